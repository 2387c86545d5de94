package embedding_test

import (
	"math/rand"
	"sync"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// TestLookupWhileDeleting: lookups of batches with new ids race deletes of the same ids. A lookup
// finds what it can under the shared lock and inserts the rest under the exclusive one; the rows
// it found must not be used if a delete took them in between (a freed row is reused at once by
// the next insert). No updates happen, so every row a lookup returns must be its id's initial
// row, which depends only on (seed, id) and is read from a twin table; with admission on, a row
// may also be zeros (not admitted yet).
func TestLookupWhileDeleting(t *testing.T) {
	for _, admit := range []int{1, 2} {
		t.Run(map[int]string{1: "plain", 2: "admission"}[admit], func(t *testing.T) {
			lookupWhileDeleting(t, admit)
		})
	}
}

func lookupWhileDeleting(t *testing.T, admit int) {
	const (
		dim    = 4
		ids    = 2000
		rounds = 400
		batch  = 256
	)
	cfg := embedding.Config{Dim: dim, Seed: 11, Initializer: embedding.Uniform{Low: -1, High: 1}, BlockRows: 64}
	tbl, twin := newTable(t, cfg), newTable(t, cfg, "twin")
	if err := tbl.SetAdmission(admit); err != nil {
		t.Fatal(err)
	}
	all := make([]int64, ids)
	for i := range all {
		all[i] = int64(i)*7919 - 1000
	}
	want := lookup(t, twin, all...)
	index := map[int64]int{}
	for i, id := range all {
		index[id] = i
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(seed int64, deleter bool) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for r := 0; r < rounds; r++ {
				b := make([]int64, batch)
				for k := range b {
					b[k] = all[rng.Intn(ids)]
				}
				if deleter {
					if _, err := tbl.DeleteIDs(b[:batch/4]); err != nil {
						errc <- err
						return
					}
					continue
				}
				got, err := tbl.LookupIDs(b)
				if err != nil {
					errc <- err
					return
				}
				rows, err := embedding.Rows(got)
				got.Close()
				if err != nil {
					errc <- err
					return
				}
				for k, row := range rows {
					exp := want[index[b[k]]]
					if !equalRows(row, exp) && !(admit > 1 && equalRows(row, make([]float32, dim))) {
						errc <- errorf("id %d: row %v, want %v", b[k], row, exp)
						return
					}
				}
			}
		}(int64(w+1), w%2 == 1)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if err := tbl.Check(); err != nil {
		t.Fatal(err)
	}
}
