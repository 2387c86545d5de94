package dist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() { scenarios["checkpoint-files"] = scenarioCheckpointFiles }

// A model checkpoint carries the caller's files: rank 0's, read back by every rank (2 ranks),
// with the reserved names refused and a file the checkpoint lacks an error on every rank.
func TestCheckpointCarriesCallerFiles(t *testing.T) {
	requirePassed(t, runSharded(t, "checkpoint-files", 2, time.Minute, "GOREC_TEST_DIR="+t.TempDir()))
}

func scenarioCheckpointFiles(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	ctx := context.Background()
	dir := filepath.Join(os.Getenv("GOREC_TEST_DIR"), "ckpt")
	users, err := NewShardedTable(g, "users", embedding.Config{Dim: 2})
	if err != nil {
		return err
	}
	defer users.Close()
	if err := lookUp(users, 1, 2, 3); err != nil {
		return err
	}
	m := nn.NewEmbedding(users, nn.EmbeddingOptions{})
	writer := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	reserved := map[string]func(io.Writer) error{"dense": writer("x")}
	if err := SaveCheckpointWith(ctx, g, dir, m, nil, reserved); !errors.Is(err, ErrInvalidArgument) {
		return fmt.Errorf("a caller's file named dense: %v, want ErrInvalidArgument", err)
	}
	files := map[string]func(io.Writer) error{"cursor": writer(fmt.Sprint("rank ", g.Rank(), " at batch 7"))}
	if err := SaveCheckpointWith(ctx, g, dir, m, nil, files); err != nil {
		return err
	}
	var cursor []byte
	read := map[string]func(io.Reader) error{"cursor": readAll(&cursor)}
	if err := LoadCheckpointWith(ctx, g, dir, m, nil, read); err != nil {
		return err
	}
	if string(cursor) != "rank 0 at batch 7" {
		return fmt.Errorf("the cursor read back: %q, want rank 0's", cursor)
	}
	missing := map[string]func(io.Reader) error{"schedule": readAll(&cursor)}
	err = LoadCheckpointWith(ctx, g, dir, m, nil, missing)
	if err == nil || (g.Rank() == 0 && !errors.Is(err, embedding.ErrIncompatible)) {
		return fmt.Errorf("a file the checkpoint lacks: %v, want an error (ErrIncompatible here)", err)
	}
	return nil
}
