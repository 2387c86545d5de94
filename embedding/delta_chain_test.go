package embedding_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// deltaOf takes a delta of src, marking.
func deltaOf(t *testing.T, src *embedding.Table) *embedding.Delta {
	t.Helper()
	d, err := src.Delta(true)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// refused applies d to dst and wants ErrIncompatible with dst unchanged.
func refused(t *testing.T, what string, dst *embedding.Table, d *embedding.Delta) {
	t.Helper()
	before := dump(t, dst)
	if err := dst.ApplyDelta(d); !errors.Is(err, embedding.ErrIncompatible) {
		t.Fatalf("%s: %v, want ErrIncompatible", what, err)
	}
	sameDump(t, what, dump(t, dst), before)
}

func applied(t *testing.T, what string, dst *embedding.Table, d *embedding.Delta) {
	t.Helper()
	if err := dst.ApplyDelta(d); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Each delta names the mark it follows: a skipped, repeated or reordered delta, or one of another
// table, is refused with ErrIncompatible and changes nothing. Before, base + d2 (d1 skipped) held
// 1 id where the source held 2, and d3, d2, d1 applied in that order.
func TestDeltasApplyInOrderOnly(t *testing.T) {
	cfg := embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, TrackAccess: true}
	src := newTable(t, cfg, "src")
	dst := newTable(t, cfg, "dst")
	update(t, src, []int64{1}, 1, 1)
	d0 := deltaOf(t, src)
	if d0.Base != 0 || d0.Seq != 1 || d0.Lineage == 0 {
		t.Fatalf("the first delta: base %d seq %d lineage %d, want 0, 1 and a lineage", d0.Base, d0.Seq, d0.Lineage)
	}
	applied(t, "d0", dst, d0)
	update(t, src, []int64{2}, 1, 1)
	d1 := deltaOf(t, src)
	src.DeleteIDs([]int64{1})
	d2 := deltaOf(t, src)
	update(t, src, []int64{3}, 1, 1)
	d3 := deltaOf(t, src)
	refused(t, "d2 with d1 skipped", dst, d2)
	refused(t, "d3 first", dst, d3)
	refused(t, "d0 again", dst, d0)
	applied(t, "d1", dst, d1)
	refused(t, "d1 again", dst, d1)
	refused(t, "d3 before d2", dst, d3)
	applied(t, "d2", dst, d2)
	applied(t, "d3", dst, d3)
	sameDump(t, "after d0..d3", dump(t, dst), dump(t, src))

	// Two deltas with no step between them: only their own order applies.
	e1, e2 := deltaOf(t, src), deltaOf(t, src)
	if e1.Step != e2.Step {
		t.Fatalf("steps %d and %d", e1.Step, e2.Step)
	}
	refused(t, "e2 before e1", dst, e2)
	applied(t, "e1", dst, e1)
	refused(t, "e1 again", dst, e1)
	applied(t, "e2", dst, e2)

	// A delta of another table at the same mark: refused (another lineage).
	other := newTable(t, cfg, "other")
	for i := 0; i < 6; i++ { // (as many marks as src)
		deltaOf(t, other)
	}
	update(t, other, []int64{9}, 1, 1)
	refused(t, "a delta of another table", dst, deltaOf(t, other))

	// A whole-table delta applies to a table at mark 0 only.
	refused(t, "a whole table onto a copy", dst, d0)

	// Unmarked deltas do not move the mark: any number of them, then the marked one.
	update(t, src, []int64{4}, 1, 1)
	u, err := src.Delta(false)
	if err != nil {
		t.Fatal(err)
	}
	applied(t, "an unmarked delta", dst, u)
	applied(t, "an unmarked delta again", dst, u)
	applied(t, "the marked one after it", dst, deltaOf(t, src))
	sameDump(t, "after the unmarked deltas", dump(t, dst), dump(t, src))
}

// A delta file of version 1 (an older gorec: no chain) applies with no chain check, refused
// only when older than the table; a version 2 file keeps the chain.
func TestDeltaFileVersions(t *testing.T) {
	cfg := embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}, TrackAccess: true}
	src := newTable(t, cfg, "src")
	dst := newTable(t, cfg, "dst")
	update(t, src, []int64{1, 2}, 1, 1, 1, 1)
	d := deltaOf(t, src)
	dir := t.TempDir()
	v2 := filepath.Join(dir, "v2")
	if err := embedding.WriteDelta(v2, d, 2); err != nil {
		t.Fatal(err)
	}
	back, _, err := embedding.ReadDelta(v2)
	if err != nil || back.Lineage != d.Lineage || back.Seq != d.Seq || back.OptParams != d.OptParams {
		t.Fatalf("ReadDelta of version 2: %+v (%v)", back, err)
	}
	applied(t, "a version 2 file", dst, back)
	update(t, src, []int64{2, 3}, 1, 1, 1, 1)
	d = deltaOf(t, src)
	d.Lineage, d.Base, d.Seq = 0, 0, 0 // what WriteDelta of an older gorec wrote
	v1 := filepath.Join(dir, "v1")
	if err := embedding.WriteDelta(v1, d, 2); err != nil {
		t.Fatal(err)
	}
	old, _, err := embedding.ReadDelta(v1)
	if err != nil || old.Lineage != 0 {
		t.Fatalf("ReadDelta of version 1: lineage %d, %v", old.Lineage, err)
	}
	applied(t, "a version 1 file", dst, old)
	applied(t, "a version 1 file again (unchecked)", dst, old)
	sameDump(t, "after the version 1 file", dump(t, dst), dump(t, src))
	older := *old
	older.Step--
	if err := dst.ApplyDelta(&older); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("a version 1 delta older than the table: %v, want ErrBadInput", err)
	}
}

// A copy loaded from a checkpoint takes the deltas of its table that follow the checkpoint.
func TestDeltasFollowACheckpoint(t *testing.T) {
	cfg := embedding.Config{Dim: 3, Optimizer: embedding.SparseAdam{}, TrackAccess: true}
	src := newTable(t, cfg, "src")
	r := rand.New(rand.NewPCG(3, 9))
	train(t, src, r, 4, 10, 50)
	deltaOf(t, src)
	train(t, src, r, 4, 10, 50)
	dir := t.TempDir()
	if err := embedding.Save(context.Background(), dir, src); err != nil {
		t.Fatal(err)
	}
	train(t, src, r, 4, 10, 50)
	d1 := deltaOf(t, src)
	train(t, src, r, 4, 10, 50)
	d2 := deltaOf(t, src)
	tbls, err := embedding.LoadRenamed(context.Background(), dir, func(s string) string { return s + "/copy" })
	if err != nil {
		t.Fatal(err)
	}
	cp := tbls[0]
	defer cp.Close()
	refused(t, "d2 onto the checkpoint", cp, d2)
	applied(t, "d1", cp, d1)
	applied(t, "d2", cp, d2)
	sameDump(t, "checkpoint + d1 + d2", dump(t, cp), dump(t, src))
}

// A delta carries the optimizer's parameters: after SetLR, base + delta, then the same updates
// on both, stay bit for bit equal, SGD momentum included (before, the copy read id 1 as
// [1.7448 -0.1629] where the source had [1.8258 -0.0819]: its lazy catch-up ran at the old
// rate, and the copy went on training at the base's rate).
func TestDeltasCarryTheLearningRate(t *testing.T) {
	for name, cfg := range map[string]embedding.Config{
		"sgd-momentum": {Dim: 2, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}, TrackAccess: true},
		"adagrad":      {Dim: 2, Optimizer: embedding.Adagrad{LR: 0.1}, TrackAccess: true},
		"adamw":        {Dim: 2, Optimizer: embedding.AdamW{LR: 0.1, WeightDecay: 0.01}, TrackAccess: true},
		"ftrl":         {Dim: 2, Optimizer: embedding.FTRL{Alpha: 0.1}, TrackAccess: true},
	} {
		src := newTable(t, cfg, name, "src")
		dst := newTable(t, src.Config(), name, "dst") // (its seed: new ids start alike)
		train(t, src, rand.New(rand.NewPCG(1, 2)), 5, 8, 20)
		applied(t, name+": the base", dst, deltaOf(t, src))
		train(t, src, rand.New(rand.NewPCG(3, 4)), 5, 3, 20) // rows fall behind
		if err := src.SetLR(0.01); err != nil {
			t.Fatal(err)
		}
		applied(t, name+": the delta after SetLR", dst, deltaOf(t, src))
		if got, want := dst.Config().Optimizer, src.Config().Optimizer; got != want {
			t.Errorf("%s: the copy's optimizer %#v, want %#v", name, got, want)
		}
		for _, tbl := range []*embedding.Table{src, dst} {
			train(t, tbl, rand.New(rand.NewPCG(5, 6)), 5, 8, 20)
		}
		sameDump(t, name+": the same updates after the delta", dump(t, dst), dump(t, src))
	}
}

// A delta carries the admission threshold and the counts changed since its base: the copy
// counts what the table counts and admits the ids it admits (before, the live table counted
// 3,360 ids and the copy 921). An id counted, admitted and deleted between two marks is no
// longer counted in the copy either.
func TestDeltasCarryAdmission(t *testing.T) {
	cfg := embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, TrackAccess: true}
	src := newTable(t, cfg, "src")
	dst := newTable(t, src.Config(), "dst") // (its seed: new ids start alike)
	if err := src.SetAdmission(3); err != nil {
		t.Fatal(err)
	}
	sight := func(tbl *embedding.Table, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 1))
		for i := 0; i < 20; i++ {
			ids := make([]int64, 30)
			for j := range ids {
				ids[j] = r.Int64N(400)
			}
			if _, err := tbl.LookupIDs(ids); err != nil {
				t.Fatal(err)
			}
		}
	}
	sight(src, 1)
	lookup(t, src, 1000)
	applied(t, "the base", dst, deltaOf(t, src))
	sameDump(t, "after the base", dump(t, dst), dump(t, src))
	lookup(t, src, 1000, 1000) // admitted at its third sighting
	src.DeleteIDs([]int64{1000})
	lookup(t, src, 2000, 2000) // counted twice
	sight(src, 2)
	applied(t, "the delta", dst, deltaOf(t, src))
	// (rows only looked up since the mark keep their older access metadata in the copy)
	sameDump(t, "after the delta", withoutAccess(dump(t, dst)), withoutAccess(dump(t, src)))
	for _, tbl := range []*embedding.Table{src, dst} {
		lookup(t, tbl, 1000, 1000, 2000) // 1000: counted afresh; 2000: admitted
		sight(tbl, 3)
	}
	sameDump(t, "the same lookups after the delta", withoutAccess(dump(t, dst)), withoutAccess(dump(t, src)))
	if err := src.SetAdmission(1); err != nil { // counts dropped
		t.Fatal(err)
	}
	applied(t, "the delta after SetAdmission(1)", dst, deltaOf(t, src))
	if k, n, err := dst.Admission(); err != nil || k != 1 || n != 0 {
		t.Errorf("the copy's admission: %d, %d counted (%v), want 1 and none", k, n, err)
	}
}

// withoutAccess is d without the access metadata: a delta carries that of the rows it carries
// only, so rows only looked up since its mark keep their older metadata in a copy.
func withoutAccess(d tableDump) tableDump {
	d.Last, d.Freq = nil, nil
	return d
}
