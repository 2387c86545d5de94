package embedding_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// SetLR changes the rate of the next steps, and only that: Config and checkpoints carry it.
func TestSetLR(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 1, Initializer: embedding.Zeros{}, Optimizer: embedding.SGD{LR: 0.1}})
	update(t, tbl, []int64{1}, 1) // w = -0.1
	if err := tbl.SetLR(0.5); err != nil {
		t.Fatal(err)
	}
	update(t, tbl, []int64{1}, 1) // w = -0.1 - 0.5
	if got := lookup(t, tbl, 1)[0][0]; !near(float64(got), -0.6, 1e-6) {
		t.Fatalf("after SetLR(0.5): %v, want -0.6", got)
	}
	if o := tbl.Config().Optimizer.(embedding.SGD); o.LR != 0.5 {
		t.Errorf("Config: %+v", o)
	}
	dir := t.TempDir()
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	loaded, err := embedding.LoadRenamed(context.Background(), dir, func(string) string { return t.Name() + "/loaded" })
	if err != nil {
		t.Fatal(err)
	}
	defer loaded[0].Close()
	if o := loaded[0].Config().Optimizer.(embedding.SGD); o.LR != 0.5 {
		t.Errorf("loaded Config: %+v", o)
	}
	// Another handle sees the rate too.
	other, ok := embedding.Get(tbl.Name())
	if !ok {
		t.Fatal("Get")
	}
	if o := other.Config().Optimizer.(embedding.SGD); o.LR != 0.5 {
		t.Errorf("Config of another handle: %+v", o)
	}
	// FTRL's rate is Alpha.
	ftrl := newTable(t, embedding.Config{Dim: 1, Optimizer: embedding.FTRL{Alpha: 0.5, Beta: 1}}, "ftrl")
	if err := ftrl.SetLR(0.25); err != nil {
		t.Fatal(err)
	}
	if o := ftrl.Config().Optimizer.(embedding.FTRL); o.Alpha != 0.25 || o.Beta != 1 {
		t.Errorf("FTRL Config: %+v", o)
	}
}

// A refused rate changes nothing.
func TestSetLRBadInput(t *testing.T) {
	cases := []struct {
		name string
		cfg  embedding.Config
		lr   float64
		kind error
	}{
		{"negative", embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}}, -0.1, embedding.ErrBadInput},
		{"NaN", embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}, math.NaN(), embedding.ErrBadInput},
		{"Inf", embedding.Config{Dim: 2, Optimizer: embedding.SparseAdam{}}, math.Inf(1), embedding.ErrBadInput},
		{"FTRL alpha 0", embedding.Config{Dim: 2, Optimizer: embedding.FTRL{Alpha: 0.1}}, 0, embedding.ErrBadInput},
		{"no optimizer", embedding.Config{Dim: 2, Optimizer: embedding.NoOptimizer{}}, 0.1, embedding.ErrBadInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tbl := newTable(t, c.cfg)
			if c.cfg.Optimizer != (embedding.NoOptimizer{}) {
				train(t, tbl, rand.New(rand.NewPCG(1, 2)), 3, 8, 20)
			}
			before := dump(t, tbl)
			cfg := tbl.Config()
			if err := tbl.SetLR(c.lr); !errors.Is(err, c.kind) {
				t.Fatalf("SetLR(%v): %v, want %v", c.lr, err, c.kind)
			}
			sameDump(t, "after a refused SetLR", dump(t, tbl), before)
			if tbl.Config() != cfg {
				t.Errorf("Config changed: %+v, was %+v", tbl.Config(), cfg)
			}
		})
	}
	closed := newTable(t, embedding.Config{Dim: 2}, "closed")
	closed.Close()
	if err := closed.SetLR(0.1); !errors.Is(err, embedding.ErrClosed) {
		t.Errorf("SetLR on a closed table: %v", err)
	}
}

// With SGD momentum, SetLR brings every row up to date first: the values do not move (the
// catch-up is what a read does), and every row goes into the next delta, so that a copy kept
// by ApplyDelta, which catches rows up at its own rate, stays the table.
func TestSetLRWithMomentumKeepsCopiesExact(t *testing.T) {
	cfg := embedding.Config{Dim: 3, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}, BlockRows: 4, TrackAccess: true}
	src := newTable(t, cfg, "src")
	dst := newTable(t, cfg, "dst")
	r := rand.New(rand.NewPCG(4, 5))
	train(t, src, r, 6, 10, 60)
	d, err := src.Delta(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.ApplyDelta(d); err != nil {
		t.Fatal(err)
	}
	train(t, src, r, 3, 4, 60) // most rows fall behind: their moves wait
	before := export(t, src)
	if err := src.SetLR(0.02); err != nil {
		t.Fatal(err)
	}
	after := export(t, src)
	for id, row := range before.rows {
		if !rowsNear(after.rows[id], row, 1e-6) {
			t.Fatalf("id %d moved from %v to %v by SetLR", id, row, after.rows[id])
		}
	}
	d, err = src.Delta(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.IDs) != src.Len() {
		t.Errorf("the delta after SetLR has %d rows, the table %d", len(d.IDs), src.Len())
	}
	if err := dst.ApplyDelta(d); err != nil {
		t.Fatal(err)
	}
	if err := dst.SetLR(0.02); err != nil {
		t.Fatal(err)
	}
	train(t, src, r, 3, 4, 60)
	if d, err = src.Delta(false); err != nil {
		t.Fatal(err)
	}
	if err := dst.ApplyDelta(d); err != nil {
		t.Fatal(err)
	}
	sameDump(t, "the copy after SetLR and training", dump(t, dst), dump(t, src))
}
