package embedding_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// overflowOptimizers: every rule, each with a finite gradient (1e20) whose step overflows
// float32 (its square; for SGD at lr 1e19, lr * g).
var overflowOptimizers = map[string]embedding.Optimizer{
	"sgd":             embedding.SGD{LR: 1e19},
	"sgd-momentum":    embedding.SGD{LR: 1e19, Momentum: 0.9},
	"adagrad":         embedding.Adagrad{},
	"rowwise-adagrad": embedding.RowWiseAdagrad{},
	"sparse-adam":     embedding.SparseAdam{},
	"adamw":           embedding.AdamW{},
	"ftrl":            embedding.FTRL{},
}

// The data loss: a finite gradient of 1e20 overflowed the optimizer state, Update and
// Save returned nil, the save removed the good checkpoint and Load refused the new one. Now the
// update is ErrBadInput and changes nothing, and the next save loads with the good contents.
// Every optimizer, both layouts, plain and fused (autograd) steps. Before the fix the update
// returned nil and Load failed with "states contain NaN or Inf".
func TestOverflowingUpdateRejectedAndSaveLoads(t *testing.T) {
	for name, opt := range overflowOptimizers {
		for _, layout := range []embedding.Layout{embedding.Separate, embedding.Interleaved} {
			for _, fused := range []bool{false, true} {
				dir := t.TempDir()
				tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: opt, Layout: layout}, name)
				update(t, tbl, []int64{7, 8}, 0.5, 0, 0.25, -1)
				if err := embedding.Save(context.Background(), dir, tbl); err != nil {
					t.Fatal(err)
				}
				want := export(t, tbl)
				var err error
				if fused {
					err = cgotorch.Try(func() {
						out, err := tbl.Forward(ids64(t, []int64{8, 7}), embedding.ForwardOptions{Train: true, Fused: true})
						if err != nil {
							t.Fatal(err)
						}
						backwardWith(out, []float32{1, 1, 1e20, 0})
					})
				} else {
					err = tbl.UpdateIDs([]int64{8, 7, 9}, []float32{1, 1, 1e20, 0, 1, 1})
				}
				if err == nil || (!fused && !errors.Is(err, embedding.ErrBadInput)) {
					t.Errorf("%s layout %d fused %v: overflowing update: %v, want ErrBadInput", name, layout, fused, err)
				}
				if got := export(t, tbl); !reflect.DeepEqual(got, want) {
					t.Errorf("%s layout %d fused %v: the rejected update changed the table", name, layout, fused)
				}
				if err := embedding.Save(context.Background(), dir, tbl); err != nil {
					t.Fatal(err)
				}
				tbl.Close()
				loaded, err := embedding.Load(context.Background(), dir)
				if err != nil {
					t.Fatalf("%s layout %d fused %v: Load: %v", name, layout, fused, err)
				}
				if got := export(t, loaded[0]); !reflect.DeepEqual(got, want) {
					t.Errorf("%s layout %d fused %v: loaded %v, want %v", name, layout, fused, got, want)
				}
				loaded[0].Close()
			}
		}
	}
}

// Write refuses values of magnitude 2^64 or more (their square overflows float32, and 1e38
// overflowed FTRL's next step), as it refuses NaN and Inf; the largest float below 2^64 goes
// in. Before the fix 1e38 was accepted.
func TestWriteBound(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.FTRL{}})
	below := math.Nextafter32(0x1p64, 0)
	write(t, tbl, []int64{1}, below, -below)
	for _, v := range []float32{1e38, -1e38, 0x1p64, -0x1p64, float32(math.Inf(1)), float32(math.NaN())} {
		if err := tbl.WriteIDs([]int64{1, 2}, []float32{0, 0, v, 0}); !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("WriteIDs(%g): %v, want ErrBadInput", v, err)
		}
	}
	if rows, found := read(t, tbl, 1, 2); rows[0][0] != below || found[1] {
		t.Errorf("after the refused writes: %v %v", rows, found)
	}
}

// A table whose contents a load refuses (here: SGD with momentum 2, whose buffer grows by 2^k
// over the k steps a row missed, caught up into Inf by SetLR) is not saved: Save fails before
// the commit and the previous checkpoint stays, loadable.
func TestSaveRefusesWhatLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1, Momentum: 2}})
	update(t, tbl, []int64{1}, 1, 1) // the buffer of row 1 is 1
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	want := export(t, tbl)
	for i := 0; i < 150; i++ {
		update(t, tbl, []int64{2}, 0, 0) // row 2's buffer stays 0; row 1 lags
	}
	if err := tbl.SetLR(0.2); err != nil {
		t.Fatal(err)
	}
	if err := embedding.Save(context.Background(), dir, tbl); err == nil {
		t.Fatal("Save of a table holding Inf: nil")
	}
	tbl.Close()
	loaded, err := embedding.Load(context.Background(), dir)
	if err != nil {
		t.Fatalf("Load after the refused save: %v", err)
	}
	defer loaded[0].Close()
	if got := export(t, loaded[0]); !reflect.DeepEqual(got.rows, want.rows) || got.step != want.step {
		t.Errorf("loaded %v, want the first save's %v", got, want)
	}
}
