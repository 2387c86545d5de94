package ctable_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// The embedding tables are tested in depth through package embedding; these tests cover the
// handle itself.

func TestTableHandle(t *testing.T) {
	cfg := ctable.Config{Dim: 2, Init: ctable.InitConstant, InitParams: [4]float64{3},
		Optimizer: ctable.OptSGD, OptParams: [8]float64{0.5}, Device: cgotorch.CPU}
	tbl, err := ctable.New("ctable-handle", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctable.New("ctable-handle", cfg); !errors.Is(err, cgotorch.ErrNameTaken) {
		t.Fatalf("duplicate: %v", err)
	}
	if !slices.Contains(ctable.Names(), "ctable-handle") {
		t.Fatal("not listed")
	}
	keys := cgotorch.MustFromSlice([]int64{4, 5, 4})
	defer keys.Close()
	rows, err := tbl.Lookup(keys)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := cgotorch.ToSlice[float32](rows)
	if !slices.Equal(v, []float32{3, 3, 3, 3, 3, 3}) || rows.DType() != cgotorch.Float32 {
		t.Fatalf("rows %v", v)
	}
	grads := cgotorch.MustFromSlice([]float32{1, 0, 1, 0, 1, 0}, 3, 2)
	defer grads.Close()
	if err := tbl.Update(keys, grads); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Export()
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := cgotorch.ToSlice[int64](snap.IDs)
	r, _ := cgotorch.ToSlice[float32](snap.Rows)
	if !slices.Equal(ids, []int64{4, 5}) || !slices.Equal(r, []float32{2, 3, 2.5, 3}) || snap.Step != 1 || len(snap.States) != 0 {
		t.Fatalf("export %v %v step %d", ids, r, snap.Step)
	}
	snap.Close()
	if _, err := tbl.Lookup(nil); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("nil keys: %v", err)
	}
	// Close concurrently with use: no crash, later calls fail with ErrClosed.
	other, err := ctable.Open("ctable-handle")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				r, err := other.Lookup(keys)
				if err != nil {
					if !errors.Is(err, cgotorch.ErrClosed) {
						t.Error(err)
					}
					return
				}
				r.Close()
			}
		}()
	}
	if err := tbl.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := tbl.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Stats(); !errors.Is(err, cgotorch.ErrClosed) {
		t.Fatalf("stats after close: %v", err)
	}
	other.Close()
	if _, err := ctable.Open("ctable-handle"); !errors.Is(err, cgotorch.ErrNotFound) {
		t.Fatalf("open after close: %v", err)
	}
}

// The tensor kernels (CUDA's code path, run on the CPU) give the raw kernels' numbers, a learning
// rate change between steps included (SGD momentum: the rows absent from steps are caught up).
func TestTableTensorKernels(t *testing.T) {
	for _, opt := range []ctable.Optimizer{ctable.OptSGD, ctable.OptAdagrad, ctable.OptRowWiseAdagrad,
		ctable.OptSparseAdam, ctable.OptAdamW, ctable.OptFTRL} {
		params := map[ctable.Optimizer][8]float64{
			ctable.OptSGD:            {0.1, 0.9},
			ctable.OptAdagrad:        {0.1, 0, 0.1, 1e-10},
			ctable.OptRowWiseAdagrad: {0.1, 0.05, 0.1, 1e-6},
			ctable.OptSparseAdam:     {0.01, 0.9, 0.999, 1e-8},
			ctable.OptAdamW:          {0.01, 0.9, 0.999, 1e-8, 0.1},
			ctable.OptFTRL:           {0.1, 1, 0.01, 0.1, 0.1},
		}[opt]
		var tables [2]*ctable.Table
		for i := range tables {
			var err error
			tables[i], err = ctable.New("kernels-"+string(rune('a'+i)), ctable.Config{
				Dim: 3, Init: ctable.InitNormal, InitParams: [4]float64{0, 1}, Optimizer: opt, OptParams: params,
				Device: cgotorch.CPU, BlockRows: 2, TensorKernels: i == 1, Layout: ctable.LayoutInterleaved})
			if err != nil {
				t.Fatal(err)
			}
		}
		for step := 0; step < 4; step++ {
			if step == 2 {
				for _, tbl := range tables {
					if err := tbl.SetLR(params[0] * 0.3); err != nil {
						t.Fatal(err)
					}
				}
			}
			keys := cgotorch.MustFromSlice([]int64{int64(step), 7, int64(step * 3), 7})
			grads := cgotorch.MustFromSlice([]float32{1, -2, 3, 0.5, 0.5, 0.5, -1, 0, 1, 2, 2, 2}, 4, 3)
			for _, tbl := range tables {
				if err := tbl.Update(keys, grads); err != nil {
					t.Fatal(err)
				}
			}
			keys.Close()
			grads.Close()
		}
		var got [2][]float32
		for i, tbl := range tables {
			s, err := tbl.Export()
			if err != nil {
				t.Fatal(err)
			}
			got[i], _ = cgotorch.ToSlice[float32](s.Rows)
			s.Close()
			tbl.Close()
		}
		for i := range got[0] {
			d := got[0][i] - got[1][i]
			if d > 1e-5 || d < -1e-5 {
				t.Fatalf("optimizer %d: raw %v, tensor kernels %v", opt, got[0], got[1])
			}
		}
	}
}

// RemoveUnchanged passes the expected metadata to the C side: both or neither.
func TestTableRemoveUnchanged(t *testing.T) {
	cfg := ctable.Config{Dim: 2, Optimizer: ctable.OptSGD, OptParams: [8]float64{0.5},
		Device: cgotorch.CPU, TrackAccess: true}
	tbl, err := ctable.New("ctable-remove-unchanged", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	keys := cgotorch.MustFromSlice([]int64{4, 5})
	defer keys.Close()
	rows, err := tbl.Lookup(keys)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	ids, last, freq, err := tbl.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	defer ids.Close()
	defer last.Close()
	defer freq.Close()
	if _, _, err := tbl.RemoveUnchanged(keys, last, nil); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("no frequencies: %v", err)
	}
	one := freq.Narrow(0, 0, 1)
	defer one.Close()
	if _, _, err := tbl.RemoveUnchanged(keys, last, one); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("one frequency for two keys: %v", err)
	}
	five := cgotorch.MustFromSlice([]int64{5})
	defer five.Close()
	rows, err = tbl.Lookup(five) // id 5 trained since the metadata was read
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	gone, _, err := tbl.RemoveUnchanged(ids, last, freq)
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if g, _ := cgotorch.ToSlice[int64](gone); !slices.Equal(g, []int64{4}) {
		t.Fatalf("removed %v, want [4]", g)
	}
}

// Initializer parameters with which a row value could be beyond float32's range are refused,
// also those the embedding package cannot express (fractional fans: a Xavier scale of Inf,
// or NaN with gain 0).
func TestTableInitializerMustFitFloat32(t *testing.T) {
	for _, c := range []struct {
		init   ctable.Init
		params [4]float64
	}{
		{ctable.InitConstant, [4]float64{1e39}},
		{ctable.InitUniform, [4]float64{-1e39, 0}},
		{ctable.InitNormal, [4]float64{0, 1e300}},
		{ctable.InitTruncatedNormal, [4]float64{0, 1, -1e39, 1}},
		{ctable.InitXavierUniform, [4]float64{1, 1e-320, 1e-320}},
		{ctable.InitXavierUniform, [4]float64{0, 1e-320, 1e-320}},
		{ctable.InitXavierNormal, [4]float64{1e300, 0, 0}},
	} {
		cfg := ctable.Config{Dim: 2, Init: c.init, InitParams: c.params, Device: cgotorch.CPU}
		tbl, err := ctable.New("ctable-init-range", cfg)
		if err == nil {
			tbl.Close()
		}
		if !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("initializer %d %v: %v, want ErrInvalidArgument", c.init, c.params, err)
		}
	}
}

// A prefetch discarded while another goroutine waits for it (here without a time limit) is
// forgotten: the discard succeeds, the wait returns at once with ErrUnknownPrefetch, and the id
// is unknown afterwards.
func TestTablePrefetchDiscardDuringWait(t *testing.T) {
	tbl, err := ctable.New("ctable-prefetch-discard", ctable.Config{Dim: 1, Device: cgotorch.CPU})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	big := make([]int64, 4_000_000) // reads that take a while
	for i := range big {
		big[i] = int64(i)
	}
	keys := cgotorch.MustFromSlice(big)
	defer keys.Close()
	var ids []int64 // two to keep the pool's two workers busy, then the one discarded
	for i := 0; i < 3; i++ {
		id, err := tbl.Prefetch(keys, ctable.ReadZeros)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	id := ids[2]
	waited := make(chan error, 1)
	go func() {
		rows, found, _, err := tbl.PrefetchWait(id, -1)
		rows.Close()
		found.Close()
		waited <- err
	}()
	time.Sleep(30 * time.Millisecond) // the waiter waits by now
	if err := tbl.PrefetchDiscard(id); err != nil {
		t.Fatalf("discard during a wait: %v", err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, cgotorch.ErrUnknownPrefetch) {
			t.Fatalf("wait during which the prefetch was discarded: %v, want ErrUnknownPrefetch", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the wait did not return after the discard")
	}
	if _, _, _, err := tbl.PrefetchWait(id, 0); !errors.Is(err, cgotorch.ErrUnknownPrefetch) {
		t.Fatalf("wait after the discard: %v", err)
	}
	if err := tbl.PrefetchDiscard(id); !errors.Is(err, cgotorch.ErrUnknownPrefetch) {
		t.Fatalf("second discard: %v", err)
	}
	for _, b := range ids[:2] {
		rows, found, ready, err := tbl.PrefetchWait(b, -1)
		if err != nil || !ready {
			t.Fatalf("blocker %d: ready %v, %v", b, ready, err)
		}
		rows.Close()
		found.Close()
	}
}
