package embedding_test

import (
	"context"
	"math"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// Many goroutines look up, update, delete, compact, read, prefetch and export one table at once. Every
// update adds exactly 1 to each element of each occurrence's row (SGD, lr 1, gradient -1), so:
// a row's elements are always equal small integers; ids never deleted end with exactly the
// number of updates they got; exports are consistent; Len matches the export. On the CPU, and
// on a GPU when there is one (the table's storage there, ids and rows crossing to the host).
func TestConcurrentOperations(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { concurrentOperations(t, cgotorch.CPU) })
	t.Run("cuda", func(t *testing.T) {
		if !cgotorch.CUDAAvailable() {
			t.Skip("no CUDA device")
		}
		concurrentOperations(t, cgotorch.CUDA(0))
	})
}

func concurrentOperations(t *testing.T, device cgotorch.Device) {
	const (
		dim      = 8
		stable   = 400 // ids [0, 400) are never deleted
		churned  = 400 // ids [400, 800) are deleted and re-inserted
		workers  = 6
		rounds   = 300
		maxBatch = 64
	)
	tbl := newTable(t, embedding.Config{Dim: dim, BlockRows: 32, Initializer: embedding.Zeros{},
		Optimizer: embedding.SGD{LR: 1}, Device: device})
	var counts [stable]atomic.Int64
	errs := newFirstErr()
	fail := errs.report
	checkRows := func(rows [][]float32) {
		for _, r := range rows {
			for j := range r {
				if r[j] != r[0] || r[j] < 0 || r[j] != float32(math.Trunc(float64(r[j]))) {
					fail(errorf("torn or bad row %v", r))
					return
				}
			}
		}
	}
	<-startWorkers(workers, func(_ int, rng *rand.Rand) {
		for i := 0; i < rounds; i++ {
			n := 1 + rng.Intn(maxBatch)
			ids := make([]int64, n)
			for k := range ids {
				ids[k] = rng.Int63n(stable + churned)
			}
			switch rng.Intn(6) {
			case 0, 1: // update
				if err := tbl.UpdateIDs(ids, filled(n*dim, -1)); err != nil {
					fail(err)
					return
				}
				for _, id := range ids {
					if id < stable {
						counts[id].Add(1)
					}
				}
			case 2: // lookup, into a tensor or a slice
				var rows [][]float32
				if rng.Intn(2) == 0 {
					flat := make([]float32, n*dim)
					if err := tbl.LookupInto(flat, ids); err != nil {
						fail(err)
						return
					}
					for k := 0; k < n; k++ {
						rows = append(rows, flat[k*dim:(k+1)*dim])
					}
				} else {
					r, err := tbl.LookupIDs(ids)
					if err != nil {
						fail(err)
						return
					}
					rows, err = embedding.Rows(r)
					r.Close()
					if err != nil {
						fail(err)
						return
					}
				}
				checkRows(rows)
			case 3: // delete churned ids
				for k := range ids {
					ids[k] = stable + ids[k]%churned
				}
				if _, err := tbl.DeleteIDs(ids); err != nil {
					fail(err)
					return
				}
				if rng.Intn(4) == 0 { // and compact: rows move while others read and train
					if err := tbl.Compact(); err != nil {
						fail(err)
						return
					}
				}
			case 4: // the invariants (Check), then an export, whole or in chunks
				if err := tbl.Check(); err != nil {
					fail(err)
					return
				}
				if rng.Intn(2) == 0 {
					last := int64(math.MinInt64)
					err := tbl.ExportEach(context.Background(), 16, func(c *embedding.ExportChunk) error {
						var rows [][]float32
						for k, id := range c.IDs {
							if (c.Offset > 0 || k > 0) && id <= last {
								return errorf("export each: ids not ascending")
							}
							last = id
							rows = append(rows, c.Rows[k*dim:(k+1)*dim])
						}
						checkRows(rows)
						return nil
					})
					if err != nil {
						fail(err)
						return
					}
					continue
				}
				s, err := tbl.Export()
				if err != nil {
					fail(err)
					return
				}
				got, err := cgotorch.ToSlice[int64](s.IDs)
				if err != nil {
					fail(err)
					return
				}
				rows, err := embedding.Rows(s.Rows)
				s.Close()
				if err != nil {
					fail(err)
					return
				}
				if len(rows) != len(got) {
					fail(errorf("export: %d ids, %d rows", len(got), len(rows)))
					return
				}
				for k := 1; k < len(got); k++ {
					if got[k-1] >= got[k] {
						fail(errorf("export ids not ascending"))
						return
					}
				}
				checkRows(rows)
			case 5: // read and prefetch
				r, _, err := tbl.ReadIDs(ids)
				if err != nil {
					fail(err)
					return
				}
				r.Close()
				p, err := tbl.PrefetchIDs(ids)
				if err != nil {
					fail(err)
					return
				}
				r, err = p.Wait(context.Background())
				if err != nil {
					fail(err)
					return
				}
				rows, _ := embedding.Rows(r)
				r.Close()
				checkRows(rows)
			}
		}
	})
	errs.check(t)
	if err := tbl.Check(); err != nil {
		t.Fatal(err)
	}
	e := export(t, tbl)
	if len(e.ids) != tbl.Len() {
		t.Fatalf("export has %d ids, Len %d", len(e.ids), tbl.Len())
	}
	for id := int64(0); id < stable; id++ {
		want := float32(counts[id].Load())
		got, ok := e.rows[id]
		if !ok {
			if want != 0 {
				t.Fatalf("id %d with %v updates is missing", id, want)
			}
			continue
		}
		for _, v := range got {
			if v != want {
				t.Fatalf("id %d: row %v, want all %v", id, got, want)
			}
		}
	}
	// indices are unique and within the storage
	idx, err := tbl.IndicesIDs(e.ids, false)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := tbl.Stats()
	seen := map[int64]bool{}
	for _, i := range idx {
		if i < 0 || i >= int64(st.Capacity) || seen[i] {
			t.Fatalf("bad or repeated index %d (capacity %d)", i, st.Capacity)
		}
		seen[i] = true
	}
}

// Close while other goroutines use the table: they finish or fail with ErrClosed, nothing
// crashes, and the table's memory is released.
func TestCloseWhileInUse(t *testing.T) {
	for round := 0; round < 5; round++ {
		tbl, err := embedding.NewNamed(t.Name(), embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{}})
		if err != nil {
			t.Fatal(err)
		}
		other, _ := embedding.Get(t.Name())
		var wg, started sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			started.Add(1)
			go func(w int) {
				defer wg.Done()
				once := sync.OnceFunc(started.Done)
				defer once()
				h := tbl
				if w%2 == 1 {
					h = other
				}
				for i := 0; i < 50; i++ {
					ids := []int64{int64(i), int64(i + w)}
					if _, err := h.LookupIDs(ids); err != nil {
						if !isClosed(err) {
							t.Error(err)
						}
						return
					}
					if err := h.UpdateIDs(ids, make([]float32, 8)); err != nil && !isClosed(err) {
						t.Error(err)
						return
					}
					once()
				}
			}(w)
		}
		started.Wait()
		if round%2 == 0 {
			other.Close()
		} else {
			tbl.Close()
		}
		wg.Wait()
		tbl.Close()
		if _, err := tbl.LookupIDs([]int64{1}); !isClosed(err) {
			t.Fatalf("lookup after close: %v", err)
		}
	}
}
