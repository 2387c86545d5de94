package outside

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// lookup inserts ids into s.
func lookup(t *testing.T, s *dist.ShardedTable, ids ...int64) {
	t.Helper()
	rows, err := s.Lookup(cgotorch.MustFromSlice(ids))
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
}

// ShardedTable.Save of table "items" into a directory, then dist.SaveCheckpoint of a model over
// table "users" into the same one: each manifest counts its own generations, so the model's
// save wrote generation 1 again, over the one sharded.json committed, and LoadShardedTable
// then loaded users' rows under the name "items", with no error anywhere. The save is now
// refused.
func TestModelCheckpointOverTableCheckpoint(t *testing.T) {
	g := oneRank(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ckpt")
	cfg := embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}
	items, err := dist.NewShardedTable(g, "items", cfg)
	if err != nil {
		t.Fatal(err)
	}
	lookup(t, items, 1, 2, 3)
	if err := items.Save(ctx, dir); err != nil {
		t.Fatal(err)
	}
	items.Close()
	users, err := dist.NewShardedTable(g, "users", cfg)
	if err != nil {
		t.Fatal(err)
	}
	lookup(t, users, 5)
	saveErr := dist.SaveCheckpoint(ctx, g, dir, nn.NewEmbedding(users, nn.EmbeddingOptions{}), nil)
	users.Close()
	l, err := dist.LoadShardedTable(ctx, g, dir)
	if err != nil {
		return // the committed table checkpoint is refused, not replaced by another table's rows
	}
	defer l.Close()
	snap, err := l.Export()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	ids, _ := cgotorch.ToSlice[int64](snap.IDs)
	if len(ids) != 3 {
		t.Errorf("SaveCheckpoint into the directory of items' checkpoint (err %v): LoadShardedTable now gives %q with ids %v, not items' [1 2 3]", saveErr, l.Name(), ids)
	}
}

// A table made with the default optimizer (embedding.Config: "Only Dim is required"), saved by
// dist.SaveCheckpoint and loaded by dist.LoadCheckpoint into a model built the same way (the
// load compared the saved optimizer, SGD, with the model's Config as given, nil, and refused
// it), as nn.LoadCheckpoint loads the same model of one process.
func TestLoadCheckpointDefaultOptimizer(t *testing.T) {
	g := oneRank(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ckpt")
	cfg := embedding.Config{Dim: 2}
	users, err := dist.NewShardedTable(g, "users", cfg)
	if err != nil {
		t.Fatal(err)
	}
	lookup(t, users, 1, 2, 3)
	if err := dist.SaveCheckpoint(ctx, g, dir, nn.NewEmbedding(users, nn.EmbeddingOptions{}), nil); err != nil {
		t.Fatal(err)
	}
	users.Close()
	if users, err = dist.NewShardedTable(g, "users", cfg); err != nil { // the restarted job
		t.Fatal(err)
	}
	defer users.Close()
	if err := dist.LoadCheckpoint(ctx, g, dir, nn.NewEmbedding(users, nn.EmbeddingOptions{}), nil); err != nil {
		t.Fatalf("LoadCheckpoint into the model that saved it: %v", err)
	}
	if n, err := users.Len(); err != nil || n != 3 {
		t.Errorf("loaded %d ids (%v), want 3", n, err)
	}
}

// A crashed save left generation 2 half written (a junk manifest and tensor file, the
// directory of a rank of a larger world); the next save takes generation 2 and commits a
// checkpoint that loads.
func TestSaveOverLeftoverGeneration(t *testing.T) {
	g := oneRank(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ckpt")
	cfg := embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}
	users, err := dist.NewShardedTable(g, "users", cfg)
	if err != nil {
		t.Fatal(err)
	}
	lookup(t, users, 1, 2, 3)
	m := nn.NewEmbedding(users, nn.EmbeddingOptions{})
	if err := dist.SaveCheckpoint(ctx, g, dir, m, nil); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(dir, "gen-00000002", "rank-00000")
	for _, d := range []string{left, filepath.Join(dir, "gen-00000002", "rank-00005")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"manifest.json", "old.t0.safetensors"} {
		if err := os.WriteFile(filepath.Join(left, f), []byte("{junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lookup(t, users, 4)
	if err := dist.SaveCheckpoint(ctx, g, dir, m, nil); err != nil {
		t.Fatal(err)
	}
	users.Close()
	if users, err = dist.NewShardedTable(g, "users", cfg); err != nil {
		t.Fatal(err)
	}
	defer users.Close()
	if err := dist.LoadCheckpoint(ctx, g, dir, nn.NewEmbedding(users, nn.EmbeddingOptions{}), nil); err != nil {
		t.Fatal(err)
	}
	if n, err := users.Len(); err != nil || n != 4 {
		t.Errorf("loaded %d ids (%v), want the second save's 4", n, err)
	}
}

// A job that resumes when there is a checkpoint and starts afresh otherwise tells a missing
// one by fs.ErrNotExist.
func TestLoadCheckpointMissing(t *testing.T) {
	g := oneRank(t)
	users, err := dist.NewShardedTable(g, "users", embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}})
	if err != nil {
		t.Fatal(err)
	}
	defer users.Close()
	err = dist.LoadCheckpoint(context.Background(), g, filepath.Join(t.TempDir(), "none"), nn.NewEmbedding(users, nn.EmbeddingOptions{}), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadCheckpoint of a missing directory: %v, not fs.ErrNotExist", err)
	}
}
