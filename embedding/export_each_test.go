package embedding_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorec/gorec/embedding"
)

// collectEach gathers ExportEach's chunks into the form export gives, checking the chunks'
// offsets, totals and steps on the way.
func collectEach(t *testing.T, tbl *embedding.Table, chunkRows int) (exported, int) {
	t.Helper()
	e := exported{rows: map[int64][]float32{}, states: map[string]map[int64][]float32{}, step: -1}
	calls, dim := 0, tbl.Dim()
	err := tbl.ExportEach(context.Background(), chunkRows, func(c *embedding.ExportChunk) error {
		calls++
		n := len(c.IDs)
		if c.Offset != len(e.ids) || n == 0 || n > chunkRows || c.Total != tbl.Len() || len(c.Rows) != n*dim {
			t.Fatalf("chunk %d: offset %d, %d ids, %d floats, total %d", calls, c.Offset, n, len(c.Rows), c.Total)
		}
		if e.step >= 0 && c.Step != e.step {
			t.Fatalf("chunk %d: step %d after %d", calls, c.Step, e.step)
		}
		e.step = c.Step
		for i, id := range c.IDs {
			e.ids = append(e.ids, id)
			e.rows[id] = append([]float32(nil), c.Rows[i*dim:(i+1)*dim]...)
		}
		for _, st := range c.States {
			if e.states[st.Name] == nil {
				e.states[st.Name] = map[int64][]float32{}
			}
			w := len(st.Values) / n
			for i, id := range c.IDs {
				e.states[st.Name][id] = append([]float32(nil), st.Values[i*w:(i+1)*w]...)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ExportEach(%d): %v", chunkRows, err)
	}
	return e, calls
}

// ExportEach gives what Export gives, bit for bit, whatever the chunk size: rows of SGD with
// momentum caught up, every optimizer's states under their names.
func TestExportEachEqualsExport(t *testing.T) {
	opts := map[string]embedding.Optimizer{
		"sgd-momentum": embedding.SGD{LR: 0.1, Momentum: 0.9},
		"adagrad":      embedding.Adagrad{LR: 0.1},
		"rowwise":      embedding.RowWiseAdagrad{LR: 0.1},
		"adam":         embedding.SparseAdam{LR: 0.01},
	}
	for name, opt := range opts {
		t.Run(name, func(t *testing.T) {
			tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: opt})
			if _, calls := collectEach(t, tbl, 4); calls != 0 {
				t.Errorf("an empty table gave %d calls", calls)
			}
			all := []int64{90, -3, 7, 0, 55, 12, math.MaxInt64, math.MinInt64, 31, 4}
			update(t, tbl, all, filled(len(all)*3, 0.5)...)
			update(t, tbl, all[:3], filled(9, -1)...) // the others lag behind
			update(t, tbl, all[:2], filled(6, 0.25)...)
			want := export(t, tbl)
			for _, cr := range []int{1, 3, 10, 1000} {
				got, calls := collectEach(t, tbl, cr)
				if wantCalls := (len(all) + cr - 1) / cr; calls != wantCalls {
					t.Errorf("chunk rows %d: %d calls, want %d", cr, calls, wantCalls)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("chunk rows %d: ExportEach differs from Export", cr)
				}
			}
		})
	}
}

// With access tracking every chunk carries the rows' metadata, as Metadata reports it.
func TestExportEachMetadata(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, TrackAccess: true})
	lookup(t, tbl, 5, 6, 7)
	stepEach(t, tbl, 2)
	lookup(t, tbl, 6, 8, 6)
	ids, last, freq, err := tbl.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs, gotLast, gotFreq []int64
	if err := tbl.ExportEach(context.Background(), 3, func(c *embedding.ExportChunk) error {
		if len(c.LastStep) != len(c.IDs) || len(c.Frequency) != len(c.IDs) {
			t.Errorf("a chunk of %d ids has %d last steps and %d frequencies", len(c.IDs), len(c.LastStep), len(c.Frequency))
		}
		gotIDs = append(gotIDs, c.IDs...)
		gotLast = append(gotLast, c.LastStep...)
		gotFreq = append(gotFreq, c.Frequency...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotIDs, ids) || !reflect.DeepEqual(gotLast, last) || !reflect.DeepEqual(gotFreq, freq) {
		t.Errorf("ExportEach metadata %v %v %v, Metadata %v %v %v", gotIDs, gotLast, gotFreq, ids, last, freq)
	}
	untracked := newTable(t, embedding.Config{Dim: 2}, "untracked")
	lookup(t, untracked, 1)
	if err := untracked.ExportEach(context.Background(), 3, func(c *embedding.ExportChunk) error {
		if c.LastStep != nil || c.Frequency != nil {
			t.Errorf("an untracked table's chunk has metadata")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// fn's error stops the export and comes back as it was; bad arguments and a closed table are
// the usual errors.
func TestExportEachErrors(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2})
	lookup(t, tbl, 1, 2, 3, 4, 5)
	stop := errors.New("the serving store is down")
	calls := 0
	err := tbl.ExportEach(context.Background(), 2, func(*embedding.ExportChunk) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("ExportEach with a failing fn: %v after %d calls", err, calls)
	}
	// A panic in fn stops the export as an error, and the table is not left locked.
	if err := tbl.ExportEach(context.Background(), 2, func(*embedding.ExportChunk) error { panic("sink bug") }); !errors.Is(err, embedding.ErrInternal) ||
		!strings.Contains(err.Error(), "sink bug") {
		t.Errorf("ExportEach with a panicking fn: %v", err)
	}
	update(t, tbl, []int64{1}, 1, 1)
	if err := tbl.ExportEach(context.Background(), 0, func(*embedding.ExportChunk) error { return nil }); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("chunkRows 0: %v", err)
	}
	if err := tbl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tbl.ExportEach(context.Background(), 2, func(*embedding.ExportChunk) error { return nil }); !errors.Is(err, embedding.ErrClosed) {
		t.Errorf("closed table: %v", err)
	}
}

// Training in other goroutines waits while a table is exported: every chunk comes from the same
// moment. Each update moves every row by the same amount, so a chunk taken after another
// update than the others would hold other values.
func TestExportEachIsOneSnapshot(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1}, Optimizer: embedding.SGD{LR: 1}})
	ids := make([]int64, 64)
	for i := range ids {
		ids[i] = int64(i)
	}
	lookup(t, tbl, ids...)
	stopTraining := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopTraining:
				return
			default:
			}
			if err := tbl.UpdateIDs(ids, filled(len(ids)*2, 1)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stopTraining); wg.Wait() }()
	for round := 0; round < 5; round++ {
		var value float32
		first := true
		err := tbl.ExportEach(context.Background(), 8, func(c *embedding.ExportChunk) error {
			time.Sleep(time.Millisecond) // room for an update between chunks, were it not locked out
			for _, v := range c.Rows {
				if first {
					value, first = v, false
				} else if v != value {
					t.Fatalf("round %d: rows %v and %v in one export", round, value, v)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
