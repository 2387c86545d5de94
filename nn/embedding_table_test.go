package nn

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// failingTable is an EmbeddingTable of another kind whose lookups fail with errPeerGone.
type failingTable struct{ *embedding.Table }

var errPeerGone = errors.New("peer gone")

func (failingTable) Forward(*Tensor, embedding.ForwardOptions) (*Tensor, error) {
	return nil, errPeerGone
}

// A module over a table other than *embedding.Table works, and the panic of its failed lookup
// keeps the table's error in its chain (before, only cgotorch.ErrTorch was left).
func TestEmbeddingOverOtherTable(t *testing.T) {
	tab, err := embedding.NewNamed("other-table", embedding.Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	e := NewEmbedding(failingTable{tab}, EmbeddingOptions{})
	err = cgotorch.Try(func() { e.Forward(cgotorch.MustFromSlice([]int64{1})) })
	if !errors.Is(err, errPeerGone) || !errors.Is(err, cgotorch.ErrTorch) {
		t.Errorf("forward: %v, want errPeerGone under ErrTorch", err)
	}
	if got := e.Tables(); got != nil {
		t.Errorf("Tables() = %v for a table that is not an *embedding.Table", got)
	}
}

// A model checkpoint refuses a model whose table lives elsewhere (a sharded table): saving
// without it would silently lose its rows.
func TestCheckpointRefusesOtherTables(t *testing.T) {
	tab, err := embedding.NewNamed("other-table-ckpt", embedding.Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	m := NewSequential(NewEmbedding(failingTable{tab}, EmbeddingOptions{}), NewLinear(2, 1, true))
	dir := t.TempDir()
	if err := SaveCheckpoint(context.Background(), dir, m); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("SaveCheckpoint: %v, want ErrBadInput", err)
	}
	if err := LoadCheckpoint(context.Background(), dir, m); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("LoadCheckpoint: %v, want ErrBadInput", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused save wrote %d entries", len(entries))
	}
}
