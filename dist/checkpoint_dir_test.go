package dist

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() {
	scenarios["checkpoint-dir-one"] = scenarioCheckpointDirOne
	scenarios["checkpoint-dir-unshared"] = scenarioCheckpointDirUnshared
}

// A directory holds one checkpoint. Before, a model's SaveCheckpoint into a table checkpoint's
// directory rewrote the generation its sharded.json names (each manifest counts its own), and
// LoadShardedTable then gave another table's rows under the saved name; a second table's Save
// replaced the first's. Now both saves fail on every rank (rank 0: ErrInvalidArgument) and
// the table's checkpoint loads as it was; the table saves there again.
func TestCheckpointDirHoldsOne(t *testing.T) {
	requirePassed(t, runSharded(t, "checkpoint-dir-one", 2, time.Minute, "GOREC_TEST_DIR="+t.TempDir()))
}

// Ranks that each save into a directory of their own (no shared file system) fail every save
// before the commit: rank 0 does not see the other rank's part (before, it committed a
// manifest naming it, and only the load failed).
func TestCheckpointDirUnshared(t *testing.T) {
	requirePassed(t, runSharded(t, "checkpoint-dir-unshared", 2, time.Minute, "GOREC_TEST_DIR="+t.TempDir()))
}

// A table checkpoint whose shard holds a table of another name (its generation replaced) is
// refused as corrupt; before, it loaded under the manifest's name.
func TestLoadShardedTableChecksTheSavedName(t *testing.T) {
	g := oneRank(t)
	ctx := context.Background()
	dirs := map[string]string{}
	for _, name := range []string{"items", "users"} {
		tbl, err := NewShardedTable(g, name, embedding.Config{Dim: 2})
		if err != nil {
			t.Fatal(err)
		}
		dirs[name] = filepath.Join(t.TempDir(), name)
		err = lookUp(tbl, 1, 2)
		if err == nil {
			err = tbl.Save(ctx, dirs[name])
		}
		tbl.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	gen := generationDir(1)
	if err := os.RemoveAll(filepath.Join(dirs["items"], gen)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dirs["users"], gen), filepath.Join(dirs["items"], gen)); err != nil {
		t.Fatal(err)
	}
	if l, err := LoadShardedTable(ctx, g, dirs["items"]); !errors.Is(err, embedding.ErrCorrupt) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("items' manifest over users' shard: %v, want ErrCorrupt", err)
	}
}

// lookUp inserts ids into tbl (a training lookup; collective).
func lookUp(tbl *ShardedTable, ids ...int64) error {
	rows, err := tbl.Lookup(cgotorch.MustFromSlice(ids))
	if err == nil {
		rows.Close()
	}
	return err
}

// refusedOnEveryRank checks a collective save's error: rank 0's wraps ErrInvalidArgument, every
// rank's is an error.
func refusedOnEveryRank(g *Group, what string, err error) error {
	if err == nil || (g.Rank() == 0 && !errors.Is(err, ErrInvalidArgument)) {
		return fmt.Errorf("%s: %v, want an error (rank 0: ErrInvalidArgument)", what, err)
	}
	return nil
}

func scenarioCheckpointDirOne(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	ctx := context.Background()
	dir := filepath.Join(os.Getenv("GOREC_TEST_DIR"), "ckpt")
	cfg := embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}
	items, err := NewShardedTable(g, "items", cfg)
	if err != nil {
		return err
	}
	if err := lookUp(items, 1, 2, 3); err != nil {
		return err
	}
	if err := items.Save(ctx, dir); err != nil {
		return err
	}
	users, err := NewShardedTable(g, "users", cfg)
	if err != nil {
		return err
	}
	defer users.Close()
	if err := lookUp(users, 5); err != nil {
		return err
	}
	m := nn.NewEmbedding(users, nn.EmbeddingOptions{})
	if err := refusedOnEveryRank(g, "SaveCheckpoint into a table's directory", SaveCheckpoint(ctx, g, dir, m, nil)); err != nil {
		return err
	}
	if err := refusedOnEveryRank(g, "another table's Save", users.Save(ctx, dir)); err != nil {
		return err
	}
	if err := lookUp(items, 4); err != nil {
		return err
	}
	if err := items.Save(ctx, dir); err != nil { // its own: generation 2
		return fmt.Errorf("the table's own save: %w", err)
	}
	items.Close()
	l, err := LoadShardedTable(ctx, g, dir)
	if err != nil {
		return err
	}
	defer l.Close()
	snap, err := l.Export()
	if err != nil {
		return err
	}
	defer snap.Close()
	ids, err := cgotorch.ToSlice[int64](snap.IDs)
	slices.Sort(ids)
	if err != nil || l.Name() != "items" || !slices.Equal(ids, []int64{1, 2, 3, 4}) {
		return fmt.Errorf("loaded %q with ids %v (%v), want items' [1 2 3 4]", l.Name(), ids, err)
	}
	// The model's directory refuses a table's checkpoint in turn.
	mdir := filepath.Join(os.Getenv("GOREC_TEST_DIR"), "model")
	if err := SaveCheckpoint(ctx, g, mdir, m, nil); err != nil {
		return err
	}
	return refusedOnEveryRank(g, "a table's Save into a model's directory", l.Save(ctx, mdir))
}

func scenarioCheckpointDirUnshared(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	ctx := context.Background()
	dir := filepath.Join(os.Getenv("GOREC_TEST_DIR"), fmt.Sprintf("node-%d", g.Rank()), "ckpt")
	users, err := NewShardedTable(g, "users", embedding.Config{Dim: 2})
	if err != nil {
		return err
	}
	defer users.Close()
	if err := lookUp(users, 1, 2, 3, 4, 5, 6); err != nil {
		return err
	}
	m := nn.NewEmbedding(users, nn.EmbeddingOptions{})
	if err := refusedOnEveryRank(g, "SaveCheckpoint into a directory per rank", SaveCheckpoint(ctx, g, dir, m, nil)); err != nil {
		return err
	}
	if err := refusedOnEveryRank(g, "Save into a directory per rank", users.Save(ctx, dir)); err != nil {
		return err
	}
	for _, f := range []string{modelManifestFile, shardedManifestFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s committed (%v), want none", f, err)
		}
	}
	return nil
}

// A load of a directory without its manifest says what the directory holds, and wraps
// fs.ErrNotExist (a job resumes or starts afresh by it).
func TestLoadsSayWhatTheDirectoryHolds(t *testing.T) {
	g := oneRank(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "items")
	if l, err := LoadShardedTable(ctx, g, dir); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "no committed checkpoint") {
		if err == nil {
			l.Close()
		}
		t.Fatalf("LoadShardedTable of a missing directory: %v", err)
	}
	items, err := NewShardedTable(g, "items", embedding.Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer items.Close()
	if err := items.Save(ctx, dir); err != nil {
		t.Fatal(err)
	}
	err = LoadCheckpoint(ctx, g, dir, nn.NewEmbedding(items, nn.EmbeddingOptions{}), nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "LoadShardedTable") {
		t.Fatalf("LoadCheckpoint of a table's checkpoint: %v, want fs.ErrNotExist naming LoadShardedTable", err)
	}
}
