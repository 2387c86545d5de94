package tests

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// store is a serving replica of a table: id -> row, outside the table.
type store map[int64][]float32

// exportTo bulk-loads a table into a new store, a chunk at a time.
func exportTo(t *testing.T, tab *embedding.Table) store {
	t.Helper()
	s := store{}
	err := tab.ExportEach(context.Background(), 100, func(c *embedding.ExportChunk) error {
		for i, id := range c.IDs {
			s[id] = slices.Clone(c.Rows[i*dim : (i+1)*dim])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// apply brings the store up to date with a delta: rows changed, ids deleted.
func (s store) apply(d *embedding.Delta) {
	for _, id := range d.Deleted {
		delete(s, id)
	}
	for i, id := range d.IDs {
		s[id] = slices.Clone(d.Rows[i*dim : (i+1)*dim])
	}
}

func (s store) ids() []int64 {
	out := make([]int64, 0, len(s))
	for id := range s {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Serving copies of the tables follow training, while readers answer from the live tables
// (ReadInto) in between:
//   - a replica table per table, kept by deltas (ApplyDelta of the first, whole delta, then of
//     the delta after training);
//   - for the tables without lazy state (users: SparseAdam, items: Adagrad), a plain map kept
//     by a bulk load (ExportEach after the mark) and the same delta's rows and deletions. (With
//     SGD momentum, rows nobody trains keep moving, applied lazily: a delta carries the rows as
//     stored, and only a table catches them up; see Table.Delta.)
//
// During training, ids of the bulk load that nothing deletes (users and tags; items are
// evicted) are always found with finite rows, and ids never seen never are found and read as
// zeros. After it, every copy holds the table's ids, and its rows are the table's, to the bit.
func TestServingCopiesFollowTraining(t *testing.T) {
	m := newRecModel(t, "serve-")
	m.run(t, 0, 8)
	replicas := make([]*embedding.Table, len(m.tables))
	stores := make([]store, len(m.tables))
	for i, tab := range m.tables {
		d, err := tab.Delta(true) // the whole table, and the mark the next delta starts from
		if err != nil {
			t.Fatal(err)
		}
		if replicas[i], err = embedding.NewNamed("replica-"+tab.Name(), tab.Config()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { replicas[i].Close() })
		if err := replicas[i].ApplyDelta(d); err != nil {
			t.Fatal(err)
		}
		stores[i] = exportTo(t, tab)
	}

	done := make(chan struct{})
	var wg, started sync.WaitGroup
	errs := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		started.Add(1)
		go func(r int) {
			defer wg.Done()
			errs <- readWhileTraining(m, stores, r, started.Done, done)
		}(r)
	}
	started.Wait() // every reader is reading when training starts (else a fast run can end first)
	evicted := 0
	for s := 8; s < 20; s++ { // as m.run, with the readers going on
		m.step(t, s)
		if s%maintainAt == maintainAt-1 {
			evicted += m.maintain(t)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if evicted == 0 {
		t.Errorf("no item evicted while serving: the deltas carried no deletion")
	}

	for i, tab := range m.tables {
		d, err := tab.Delta(false)
		if err != nil {
			t.Fatal(err)
		}
		if err := replicas[i].ApplyDelta(d); err != nil {
			t.Fatal(err)
		}
		stores[i].apply(d)
		now := exportTo(t, tab)
		ids := now.ids()
		want := readAll(t, tab, ids)
		if got := exportTo(t, replicas[i]).ids(); !slices.Equal(got, ids) {
			t.Errorf("%s: the replica table holds %d ids, the table %d", tab.Name(), len(got), len(ids))
		} else if got := readAll(t, replicas[i], ids); !slices.Equal(got, want) {
			t.Errorf("%s: the replica table's rows differ from the table's", tab.Name())
		}
		if i == 2 { // SGD with momentum: no plain copy (see above)
			continue
		}
		if got := stores[i].ids(); !slices.Equal(got, ids) {
			t.Errorf("%s: the store holds %d ids, the table %d", tab.Name(), len(got), len(ids))
			continue
		}
		for j, id := range ids {
			if !slices.Equal(stores[i][id], want[j*dim:(j+1)*dim]) {
				t.Errorf("%s: id %d: store %v, table %v", tab.Name(), id, stores[i][id], want[j*dim:(j+1)*dim])
				break
			}
		}
	}
}

// readAll reads ids from tab, all of which it must hold.
func readAll(t *testing.T, tab *embedding.Table, ids []int64) []float32 {
	t.Helper()
	rows := make([]float32, len(ids)*dim)
	found := make([]bool, len(ids))
	if err := tab.ReadInto(rows, found, ids); err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(found, false); i >= 0 {
		t.Fatalf("%s: id %d not found", tab.Name(), ids[i])
	}
	return rows
}

// readWhileTraining reads batches of 32 ids from the users' and the tags' tables until done:
// half from the bulk load, half never seen (no batch draws ids at or below -2^62). It calls
// started once, after its first batch (or when it returns before).
func readWhileTraining(m *recModel, base []store, seed int, started func(), done <-chan struct{}) error {
	first := sync.OnceFunc(started)
	defer first()
	r := rand.New(rand.NewPCG(uint64(seed), 5))
	known := [][]int64{base[0].ids(), nil, base[2].ids()}
	ids := make([]int64, 32)
	rows := make([]float32, 32*dim)
	found := make([]bool, 32)
	for n := 0; ; n++ {
		select {
		case <-done:
			return nil
		default:
		}
		if n == 1 {
			first()
		}
		ti := []int{0, 2}[n%2]
		for j := range ids {
			if j%2 == 0 {
				ids[j] = known[ti][r.IntN(len(known[ti]))]
			} else {
				ids[j] = math.MinInt64 + r.Int64N(1<<62)
			}
		}
		if err := m.tables[ti].ReadInto(rows, found, ids); err != nil {
			return err
		}
		for j, id := range ids {
			row := rows[j*dim : (j+1)*dim]
			if found[j] != (j%2 == 0) {
				return fmt.Errorf("%s: id %d found %v", m.tables[ti].Name(), id, found[j])
			}
			for _, v := range row {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || (!found[j] && v != 0) {
					return fmt.Errorf("%s: id %d (found %v) reads %v", m.tables[ti].Name(), id, found[j], row)
				}
			}
		}
	}
}
