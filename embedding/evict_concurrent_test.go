package embedding_test

import (
	"context"
	"math/rand"
	"sync/atomic"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// Evictions run while goroutines train: eviction chooses its rows under the shared lock and
// takes them under the exclusive one (rows trained in between stay; a removal in between makes
// it choose again), so updates, lookups, removals and evictions interleave. Every update adds 1
// to each element of each occurrence's row (zeros, SGD, lr 1, gradient -1) and every row leaves
// the table only through an eviction or removal that returns it, so the updates counted equal
// what the table holds at the end plus what was returned: a lost update, a row taken twice or
// a row taken under the wrong id breaks the sum.
func TestEvictWhileTraining(t *testing.T) {
	const (
		dim     = 4
		ids     = 2000
		workers = 4
		rounds  = 300
	)
	tbl := newTable(t, embedding.Config{Dim: dim, BlockRows: 64, Initializer: embedding.Zeros{},
		Optimizer: embedding.SGD{LR: 1}, TrackAccess: true})
	var updates, removed atomic.Int64 // removed: by EvictIf
	var evicted, evictions int64
	errs := newFirstErr()
	fail := errs.report
	done := startWorkers(workers, func(w int, rng *rand.Rand) {
		for i := 0; i < rounds; i++ {
			batch := make([]int64, 1+rng.Intn(64))
			for k := range batch {
				batch[k] = rng.Int63n(ids)
			}
			switch rng.Intn(8) {
			case 0: // a removal between an eviction's phases makes it choose again
				ev, err := tbl.EvictIf(context.Background(), func(id, _, _ int64) bool { return id%workers == int64(w) })
				if err == nil {
					var m int64
					m, err = rowMass(ev)
					removed.Add(m)
					ev.Close()
				}
				if err != nil {
					fail(err)
					return
				}
				continue
			case 1, 2, 3:
				r, err := tbl.LookupIDs(batch)
				if err != nil {
					fail(err)
					return
				}
				r.Close()
				continue
			}
			if err := tbl.UpdateIDs(batch, filled(len(batch)*dim, -1)); err != nil {
				fail(err)
				return
			}
			updates.Add(int64(len(batch)))
		}
	})
	policies := []embedding.EvictPolicy{embedding.TTL(3), embedding.KeepRecent(500),
		embedding.KeepFrequent(500), embedding.MemoryBudget(40_000)}
	for running := true; running; evictions++ {
		select {
		case <-done:
			running = false // one more eviction after the last update
		default:
		}
		ev, err := tbl.Evict(context.Background(), policies[evictions%int64(len(policies))], true)
		if err != nil {
			t.Fatal(err)
		}
		m, err := rowMass(ev)
		ev.Close()
		if err != nil {
			t.Fatal(err)
		}
		evicted += m
		if err := tbl.Check(); err != nil { // (while the workers train)
			t.Fatal(err)
		}
	}
	errs.check(t)
	var held int64
	for _, r := range export(t, tbl).rows {
		held += int64(r[0])
	}
	if held+evicted+removed.Load() != updates.Load() {
		t.Fatalf("%d updates; the table holds %d, %d evictions returned %d and removals %d",
			updates.Load(), held, evictions, evicted, removed.Load())
	}
	t.Logf("%d updates: %d held, %d returned by %d evictions, %d by removals", updates.Load(), held, evicted, evictions, removed.Load())
}

// rowMass checks an eviction's ids (ascending) and rows (each element the same integer) and
// returns the sum of the rows' first elements.
func rowMass(ev *embedding.Evicted) (int64, error) {
	got, err := cgotorch.ToSlice[int64](ev.IDs)
	if err != nil {
		return 0, err
	}
	rows, err := embedding.Rows(ev.Rows)
	if err != nil {
		return 0, err
	}
	if len(got) != ev.N || len(rows) != ev.N {
		return 0, errorf("evicted %d: %d ids, %d rows", ev.N, len(got), len(rows))
	}
	var sum int64
	for i, r := range rows {
		if i > 0 && got[i-1] >= got[i] {
			return 0, errorf("evicted ids not ascending: %d then %d", got[i-1], got[i])
		}
		for _, v := range r {
			if v != r[0] || v < 0 || v != float32(int64(v)) {
				return 0, errorf("evicted id %d: torn or bad row %v", got[i], r)
			}
		}
		sum += int64(r[0])
	}
	return sum, nil
}
