// Command goside is the Go half of the Python package's interoperability tests
// (python/tests/test_interop.py): it writes checkpoints from Go and loads Python's.
//
//	goside train DIR        trains tables of several optimizers for a few steps and saves them
//	goside init DIR         inserts fixed ids into fresh tables (their initial rows) and saves them
//	goside resave SRC DST   loads the checkpoint in SRC and saves the tables into DST
package main

import (
	"context"
	"fmt"
	"math"
	"os"

	"github.com/gorec/gorec/embedding"
)

// ids of every batch: duplicates, late ids and int64's extremes, as in the Python tests.
var ids = [][]int64{
	{1, 2, 1, math.MaxInt64},
	{math.MinInt64, 2, 7, 7},
	{1 << 62, -5, 1, 9},
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "goside:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 2 && args[0] == "train":
		return train(args[1])
	case len(args) == 2 && args[0] == "init":
		return initial(args[1])
	case len(args) == 3 && args[0] == "resave":
		ts, err := embedding.Load(context.Background(), args[1])
		if err != nil {
			return err
		}
		defer closeAll(ts)
		return embedding.Save(context.Background(), args[2], ts...)
	}
	return fmt.Errorf("usage: goside train DIR | init DIR | resave SRC DST")
}

func closeAll(ts []*embedding.Table) {
	for _, t := range ts {
		t.Close()
	}
}

func newTables(cfgs map[string]embedding.Config, order []string) ([]*embedding.Table, error) {
	var ts []*embedding.Table
	for _, n := range order {
		t, err := embedding.NewNamed(n, cfgs[n])
		if err != nil {
			closeAll(ts)
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func train(dir string) error {
	order := []string{"go_sgd", "go_adagrad", "go_adam", "go_rowwise"}
	ts, err := newTables(map[string]embedding.Config{
		"go_sgd":     {Dim: 4, Seed: 3, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}, TrackAccess: true},
		"go_adagrad": {Dim: 4, Seed: 4, Optimizer: embedding.Adagrad{LR: 0.1}},
		"go_adam":    {Dim: 4, Seed: 5, Optimizer: embedding.SparseAdam{LR: 0.01}, Initializer: embedding.Uniform{Low: -1, High: 1}},
		"go_rowwise": {Dim: 4, Seed: 6, Optimizer: embedding.RowWiseAdagrad{LR: 0.1}},
	}, order)
	if err != nil {
		return err
	}
	defer closeAll(ts)
	if err := ts[1].SetAdmission(2); err != nil {
		return err
	}
	for s, b := range ids {
		for _, t := range ts {
			if err := lookup(t, b); err != nil {
				return err
			}
			g := make([]float32, len(b)*4)
			for i := range g {
				g[i] = float32(i%5-2) * 0.25 * float32(s+1)
			}
			if err := t.UpdateIDs(b, g); err != nil {
				return err
			}
		}
	}
	return embedding.Save(context.Background(), dir, ts...)
}

func initial(dir string) error {
	order := []string{"go_init_normal", "go_init_xavier", "go_init_default"}
	ts, err := newTables(map[string]embedding.Config{
		"go_init_normal":  {Dim: 8, Seed: 1234},
		"go_init_xavier":  {Dim: 8, Seed: 1<<63 + 99, Initializer: embedding.XavierUniform{}},
		"go_init_default": {Dim: 8}, // the seed derived from the name
	}, order)
	if err != nil {
		return err
	}
	defer closeAll(ts)
	for _, t := range ts {
		for _, b := range ids {
			if err := lookup(t, b); err != nil {
				return err
			}
		}
	}
	return embedding.Save(context.Background(), dir, ts...)
}

// lookup is a training lookup of b (inserting the absent ids) whose rows are not needed.
func lookup(t *embedding.Table, b []int64) error {
	r, err := t.LookupIDs(b)
	r.Close()
	return err
}
