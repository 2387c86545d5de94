package outside

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// Rank 1's ctx is done for each collective operation that takes one (Evict, Save,
// SaveCheckpoint, LoadCheckpoint, LoadShardedTable): the call fails on every rank (rank 1:
// context.Canceled, the others ErrMismatch), nothing changes, and the group goes on.
func TestCancelOnOneRank(t *testing.T) {
	if os.Getenv("OUTSIDE_RANK") == "" {
		outs, errs := runRanks(t, 2, t.Name())
		for r := range outs {
			if errs[r] != nil || strings.Contains(outs[r], "BAD") || !strings.Contains(outs[r], "AllReduce after all: <nil>") {
				t.Errorf("rank %d (exit %v):\n%s", r, errs[r], rankLines(outs[r]))
			}
		}
		return
	}
	g := rankGroup(t, 10*time.Second)
	defer g.Close()
	dir := os.Getenv("OUTSIDE_STORE") + ".ckpt"
	bg, ctx := context.Background(), context.Background()
	if g.Rank() == 1 {
		c, cancel := context.WithCancel(bg)
		cancel()
		ctx = c
	}
	cfg := embedding.Config{Dim: 2, TrackAccess: true, Optimizer: embedding.Adagrad{}}
	users, err := dist.NewShardedTable(g, "users", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 40)
	for i := range ids {
		ids[i] = int64(i)
	}
	rows, err := users.Lookup(cgotorch.MustFromSlice(ids))
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	check := func(what string, err error, want int) {
		n, lerr := users.Len()
		mine := errors.Is(err, context.Canceled)
		if g.Rank() == 0 {
			mine = errors.Is(err, dist.ErrMismatch) && !errors.Is(err, dist.ErrBroken)
		}
		if !mine || lerr != nil || n != want {
			say(g, "BAD: %s: %v; Len after: %d, %v", what, err, n, lerr)
		}
	}
	_, _, err = users.Evict(ctx, embedding.KeepRecent(10), false)
	check("Evict", err, 40)
	m := nn.NewEmbedding(users, nn.EmbeddingOptions{})
	check("SaveCheckpoint", dist.SaveCheckpoint(ctx, g, filepath.Join(dir, "model"), m, nil), 40)
	check("Save", users.Save(ctx, filepath.Join(dir, "table")), 40)
	if err := dist.SaveCheckpoint(bg, g, filepath.Join(dir, "model"), m, nil); err != nil {
		t.Fatal(err)
	}
	if err := users.Save(bg, filepath.Join(dir, "table")); err != nil {
		t.Fatal(err)
	}
	users.Close()
	if users, err = dist.NewShardedTable(g, "users", cfg); err != nil {
		t.Fatal(err)
	}
	check("LoadCheckpoint", dist.LoadCheckpoint(ctx, g, filepath.Join(dir, "model"), nn.NewEmbedding(users, nn.EmbeddingOptions{}), nil), 0)
	users.Close()
	if l, err := dist.LoadShardedTable(ctx, g, filepath.Join(dir, "table")); err == nil {
		say(g, "BAD: LoadShardedTable loaded")
		l.Close()
	}
	_, err = g.AllReduce(cgotorch.MustFromSlice([]float32{1}), dist.Sum)
	say(g, "AllReduce after all: %v", err)
}
