package nn_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// A model checkpoint holds the tables of an EmbeddingBagCollection (each once, also when
// several features share one), and loading it restores their rows.
func TestModelCheckpointHoldsCollectionTables(t *testing.T) {
	tw := newCollectionTwins(t, t.Name(), []embedding.BagMode{embedding.Sum, embedding.Mean, embedding.Sum, embedding.Mean})
	col, err := nn.NewEmbeddingBagCollection(tw.features[0], nn.EmbeddingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := nn.Tables(col); !reflect.DeepEqual(got, tw.tables[0]) {
		t.Fatalf("Tables: %v, want the collection's 3 tables %v", got, tw.tables[0])
	}
	keys := []string{"f0", "f1", "f2", "f3"}
	step := func(seed int) {
		ids, lengths, _ := kjtBatch(seed, len(keys), 5, false)
		cgotorch.WithScope(func(*cgotorch.Scope) {
			col.ZeroGrad()
			col.Forward(nn.KeyedJagged{Keys: keys, Values: cgotorch.MustFromSlice(ids), Lengths: cgotorch.MustFromSlice(lengths)}).Sum().Backward()
			if err := col.Step(); err != nil {
				t.Fatal(err)
			}
		})
	}
	rows := func() []map[int64][]float32 {
		var out []map[int64][]float32
		for _, tbl := range tw.tables[0] {
			out = append(out, exportRows(t, tbl))
		}
		return out
	}
	step(1)
	dir := t.TempDir()
	if err := nn.SaveCheckpoint(context.Background(), dir, col); err != nil {
		t.Fatal(err)
	}
	want := rows()
	step(2)
	if err := nn.LoadCheckpoint(context.Background(), dir, col); err != nil {
		t.Fatal(err)
	}
	for i, got := range rows() {
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("table %d: %s", i, fmt.Sprintf("%d ids after LoadCheckpoint, %d saved, or other rows", len(got), len(want[i])))
		}
	}
}
