package embedding_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/ctable"
)

// Check passes on tables of every optimizer and both layouts through training, deletions, eviction,
// admission, compaction and deltas, and fails with ErrClosed on a closed table.
func TestCheckPassesThroughTheLifecycle(t *testing.T) {
	for name, cfg := range roundTripConfigs {
		{
			tbl := newTable(t, cfg, name)
			check := func(what string) {
				t.Helper()
				if err := tbl.Check(); err != nil {
					t.Fatalf("%s, %s: %v", name, what, err)
				}
			}
			check("new")
			if _, ok := cfg.Optimizer.(embedding.NoOptimizer); ok {
				lookup(t, tbl, seq(50)...)
			} else {
				train(t, tbl, rand.New(rand.NewPCG(1, 1)), 5, 20, 100)
			}
			check("trained")
			if _, err := tbl.Delta(true); err != nil {
				t.Fatal(err)
			}
			if err := tbl.SetAdmission(3); err != nil {
				t.Fatal(err)
			}
			lookup(t, tbl, 1000, 1001, 1001)
			check("counting")
			ids := export(t, tbl).ids
			if _, err := tbl.DeleteIDs(ids[:len(ids)/2]); err != nil {
				t.Fatal(err)
			}
			if cfg.TrackAccess {
				if _, err := tbl.Evict(context.Background(), embedding.KeepRecent(10), false); err != nil {
					t.Fatal(err)
				}
			}
			check("deleted")
			if err := tbl.Compact(); err != nil {
				t.Fatal(err)
			}
			check("compacted")
		}
	}
	tbl := newTable(t, embedding.Config{Dim: 2}, "closed")
	tbl.Close()
	if err := tbl.Check(); !errors.Is(err, embedding.ErrClosed) {
		t.Errorf("Check of a closed table: %v, want ErrClosed", err)
	}
}

// The low-level handle refuses what would break an invariant: a step counter set below the rows'
// last steps (before, SetStep(0) after 5 updates left rows seen beyond the counter and the
// table's next checkpoint failed to load), and a swap with a table that differs in access
// tracking (before, it went through and the embedding table's Config said TrackAccess while the
// rows had no metadata: Metadata failed).
func TestLowLevelHandlesRefuseBrokenInvariants(t *testing.T) {
	cfg := embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.5}, TrackAccess: true}
	tbl := newTable(t, cfg, "tracked")
	for i := 0; i < 5; i++ {
		update(t, tbl, []int64{1, 2}, 1, 1, 1, 1)
	}
	h, err := ctable.Open(tbl.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.SetStep(0); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("SetStep(0) after 5 updates: %v, want ErrInvalidArgument", err)
	}
	if err := h.SetStep(5); err != nil { // (the counter itself: fine)
		t.Errorf("SetStep(5): %v", err)
	}
	if err := h.SetStep(7); err != nil { // (forward: fine)
		t.Errorf("SetStep(7): %v", err)
	}
	if err := tbl.Check(); err != nil {
		t.Fatal(err)
	}
	if err := embedding.Save(context.Background(), t.TempDir(), tbl); err != nil {
		t.Fatal(err)
	}
	cfg.TrackAccess = false
	plain := newTable(t, cfg, "plain")
	p, err := ctable.Open(plain.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := h.Swap(p); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("Swap of tables that differ in TrackAccess: %v, want ErrInvalidArgument", err)
	}
	if ids, last, _, err := tbl.Metadata(); err != nil || len(ids) != 2 || last[0] != 5 {
		t.Errorf("Metadata after the refused swap: ids %v, last steps %v (%v), want 2 ids last seen at 5", ids, last, err)
	}
}

// A swap of two tables' contents through raw handles (which refuses tables of other flags)
// leaves each table's Config describing what it now holds: initializer, seed and optimizer
// parameters go with the rows.
func TestConfigFollowsARawSwap(t *testing.T) {
	a := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, Initializer: embedding.Constant{Value: 1}, Seed: 1}, "a")
	b := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.5}, Initializer: embedding.Constant{Value: 2}, Seed: 2}, "b")
	ha, err := ctable.Open(a.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	hb, err := ctable.Open(b.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	before := a.Config()
	if err := ha.Swap(hb); err != nil {
		t.Fatal(err)
	}
	ca, cb := a.Config(), b.Config()
	if ca.Seed != 2 || cb.Seed != 1 {
		t.Errorf("seeds after the swap: %d and %d, want 2 and 1", ca.Seed, cb.Seed)
	}
	if ca.Initializer != (embedding.Constant{Value: 2}) || cb.Initializer != (embedding.Constant{Value: 1}) {
		t.Errorf("initializers after the swap: %v and %v, want Constant 2 and 1", ca.Initializer, cb.Initializer)
	}
	if o, ok := ca.Optimizer.(embedding.SGD); !ok || o.LR != 0.5 {
		t.Errorf("a's optimizer after the swap: %#v, want b's SGD{LR: 0.5}", ca.Optimizer)
	}
	if o, ok := before.Optimizer.(embedding.SGD); !ok || o.LR != 0.1 {
		t.Errorf("a's optimizer before the swap: %#v", before.Optimizer)
	}
	rows := lookup(t, a, 7)
	if rows[0][0] != 2 || rows[0][1] != 2 {
		t.Errorf("a new id of a after the swap: %v, want b's initializer's [2 2]", rows)
	}
}
