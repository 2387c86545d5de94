package embedding_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// withThreads runs f with libtorch's thread count at n.
func withThreads(t *testing.T, n int, f func()) {
	t.Helper()
	before := cgotorch.NumThreads()
	if err := cgotorch.SetNumThreads(n); err != nil {
		t.Fatal(err)
	}
	defer cgotorch.SetNumThreads(before)
	f()
}

// Batches large enough to be split over threads (the find, the gather, the update) give what
// one thread gives: indices, reads with their found flags, inserting lookups and updates with
// every optimizer (SGD's momentum caught up on reads), on twin tables, with ids present and
// absent and repeated.
func TestLargeBatchesOverThreads(t *testing.T) {
	for _, opt := range []embedding.Optimizer{
		embedding.SGD{LR: 0.1, Momentum: 0.9}, embedding.Adagrad{}, embedding.RowWiseAdagrad{},
		embedding.SparseAdam{}, embedding.AdamW{WeightDecay: 0.01}, embedding.FTRL{L1: 0.01},
	} {
		t.Run(fmt.Sprintf("%T", opt), func(t *testing.T) { largeBatchesOverThreads(t, opt) })
	}
}

func largeBatchesOverThreads(t *testing.T, opt embedding.Optimizer) {
	// Dim 64: an update splits its rows by work (rows x floats touched, at least 2M floats), and
	// 30k-50k distinct rows of 8 floats would stay on one thread.
	cfg := embedding.Config{Dim: 64, Optimizer: opt, Seed: 3}
	one, many := newTable(t, cfg, "one"), newTable(t, cfg, "many")
	const present, n = 30000, 50000
	fill := make([]int64, present)
	for i := range fill {
		fill[i] = int64(i) * 7
	}
	batch := make([]int64, n)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range batch {
		batch[i] = int64(r.IntN(2*present)) * 7 // half present, many repeated
	}
	grads := make([]float32, n*cfg.Dim)
	for i := range grads {
		grads[i] = r.Float32() - 0.5
	}
	// on table tbl with threads threads: the find's view, then inserting lookups and updates
	run := func(tbl *embedding.Table, threads int) (idx []int64, rows [][]float32, found []bool, after [][]float32) {
		withThreads(t, threads, func() {
			lookup(t, tbl, fill...)
			var err error
			if idx, err = tbl.IndicesIDs(batch, false); err != nil {
				t.Fatal(err)
			}
			rows, found = read(t, tbl, batch...)
			lookup(t, tbl, batch...)
			if err := tbl.UpdateIDs(batch, grads); err != nil {
				t.Fatal(err)
			}
			if err := tbl.UpdateIDs(batch[:n/2], grads[:n/2*cfg.Dim]); err != nil {
				t.Fatal(err)
			}
			after, _ = read(t, tbl, batch...)
		})
		return
	}
	i1, r1, f1, a1 := run(one, 1)
	i2, r2, f2, a2 := run(many, 2)
	for i, id := range batch {
		if f1[i] != (id < present*7) || (i1[i] >= 0) != f1[i] {
			t.Fatalf("id %d: found %v, index %d", id, f1[i], i1[i])
		}
	}
	if !slices.Equal(i1, i2) || !slices.Equal(f1, f2) {
		t.Error("indices or found flags differ between 1 and 2 threads")
	}
	for i := range batch {
		if !slices.Equal(r1[i], r2[i]) || !slices.Equal(a1[i], a2[i]) {
			t.Fatalf("id %d: rows %v / %v, after the update %v / %v", batch[i], r1[i], r2[i], a1[i], a2[i])
		}
	}
	if one.Len() != many.Len() || one.Len() == present {
		t.Errorf("%d and %d rows", one.Len(), many.Len())
	}
}

// A NaN or an Inf anywhere in a large batch's gradients (checked in chunks over the threads, 16
// floats at a time with AVX-512, rows of 37 floats: chunk and row tails) rejects the update, and
// the table is left as it was.
func TestLargeGradientsRejectedAnywhere(t *testing.T) {
	const n, dim = 60000, 37 // 2.2M floats: two chunks on two threads
	tbl := newTable(t, embedding.Config{Dim: dim, Optimizer: embedding.SparseAdam{}, Seed: 4})
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	grads := make([]float32, n*dim)
	for i := range grads {
		grads[i] = float32(i%7) - 3
	}
	if err := tbl.UpdateIDs(ids, grads); err != nil {
		t.Fatal(err)
	}
	before := export(t, tbl)
	half := n * dim / 2
	for _, threads := range []int{1, 2} {
		withThreads(t, threads, func() {
			for _, at := range []int{0, 15, 16, 63, 64, dim, half - 1, half, half + 1, n*dim - 17, n*dim - 1} {
				for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
					keep := grads[at]
					grads[at] = bad
					err := tbl.UpdateIDs(ids, grads)
					grads[at] = keep
					if !errors.Is(err, embedding.ErrBadInput) {
						t.Fatalf("%d threads, %v at %d: %v, want ErrBadInput", threads, bad, at, err)
					}
				}
			}
		})
	}
	after := export(t, tbl)
	if after.step != before.step {
		t.Fatalf("step %d after rejected updates, was %d", after.step, before.step)
	}
	for _, id := range before.ids {
		if !slices.Equal(after.rows[id], before.rows[id]) {
			t.Fatalf("id %d: row changed by a rejected update", id)
		}
	}
}
