package ctable_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// overflowCases: every optimizer, with a finite gradient that takes a result beyond float32's
// range (1e38: its square overflows; SGD's lr of 10 takes lr * g beyond it).
var overflowCases = []struct {
	name   string
	opt    ctable.Optimizer
	params [8]float64
}{
	{"SGD", ctable.OptSGD, [8]float64{10}},
	{"SGDMomentum", ctable.OptSGD, [8]float64{10, 0.9}},
	{"SGDNesterov", ctable.OptSGD, [8]float64{10, 0.9, 0, 1}},
	{"Adagrad", ctable.OptAdagrad, [8]float64{0.1, 0, 0.1, 1e-10}},
	{"RowWiseAdagrad", ctable.OptRowWiseAdagrad, [8]float64{0.1, 0, 0.1, 1e-10}},
	{"SparseAdam", ctable.OptSparseAdam, [8]float64{0.01, 0.9, 0.999, 1e-8}},
	{"AdamW", ctable.OptAdamW, [8]float64{0.01, 0.9, 0.999, 1e-8, 0.01}},
	{"FTRL", ctable.OptFTRL, [8]float64{0.1, 1, 0, 0, 0.1}},
}

// dumpTable is a table's export as Go values (ids ascending).
func dumpTable(t *testing.T, tbl *ctable.Table) []any {
	t.Helper()
	s, err := tbl.Export()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, _ := cgotorch.ToSlice[int64](s.IDs)
	rows, _ := cgotorch.ToSlice[float32](s.Rows)
	out := []any{s.Step, ids, bitsOf(rows)}
	for _, st := range s.States {
		v, _ := cgotorch.ToSlice[float32](st)
		out = append(out, bitsOf(v))
	}
	return out
}

func bitsOf(v []float32) []uint32 {
	b := make([]uint32, len(v))
	for i, x := range v {
		b[i] = math.Float32bits(x)
	}
	return b
}

// An update whose result (a row or an optimizer state) would be NaN or Inf is rejected as a
// NaN gradient is, and changes nothing: not the rows updated before the one that overflowed in
// the same batch, nor the step, nor the ids it would have inserted. Every optimizer, raw and
// tensor kernels, both layouts, dim 5 (four lanes and one). Before the fix the update returned
// nil and left Inf in the table.
func TestTableUpdateOverflowRejected(t *testing.T) {
	for _, c := range overflowCases {
		for _, kernels := range []bool{false, true} {
			for _, layout := range []ctable.Layout{ctable.LayoutSeparate, ctable.LayoutInterleaved} {
				name := fmt.Sprintf("%s/kernels=%v/layout=%d", c.name, kernels, layout)
				tbl, err := ctable.New("overflow", ctable.Config{Dim: 5, Init: ctable.InitUniform,
					InitParams: [4]float64{-1, 1}, Optimizer: c.opt, OptParams: c.params, Device: cgotorch.CPU,
					BlockRows: 2, TensorKernels: kernels, Layout: layout})
				if err != nil {
					t.Fatal(err)
				}
				step := func(ids []int64, g []float32) error {
					k := cgotorch.MustFromSlice(ids)
					defer k.Close()
					v := cgotorch.MustFromSlice(g, int64(len(ids)), 5)
					defer v.Close()
					return tbl.Update(k, v)
				}
				small := make([]float32, 15)
				for i := range small {
					small[i] = float32(i%7) * 0.1
				}
				if err := step([]int64{1, 2, 3}, small); err != nil {
					t.Fatal(err)
				}
				if err := step([]int64{1, 3}, small[:10]); err != nil { // id 2 lags a step (momentum)
					t.Fatal(err)
				}
				before := dumpTable(t, tbl)
				// ids 1 and 2 step normally, id 3 overflows in its last column, id 4 is new.
				g := append(append([]float32{}, small...), small[:5]...)
				g[14] = 1e38
				err = step([]int64{1, 2, 3, 4}, g)
				if !errors.Is(err, cgotorch.ErrInvalidArgument) {
					t.Errorf("%s: update overflowing: %v, want ErrInvalidArgument", name, err)
				}
				if after := dumpTable(t, tbl); !reflect.DeepEqual(after, before) {
					t.Errorf("%s: the rejected update changed the table:\n%v\n%v", name, before, after)
				}
				if err := step([]int64{1, 2, 3, 4}, g); err == nil {
					t.Errorf("%s: the same update again was accepted", name)
				}
				if err := step([]int64{1, 2, 3, 4}, append(small, small[:5]...)); err != nil {
					t.Errorf("%s: a finite update after the rejected one: %v", name, err)
				}
				tbl.Close()
			}
		}
	}
}

// An overflow the optimizer state builds up over steps, not one gradient: Adagrad's sum after
// one gradient of 1.5e19 is 2.25e38 (finite, kept), after a second it would be 4.5e38. The
// first step is taken (on the checked path: the values are near float32's limit), the second
// is rejected and changes nothing; raw and tensor kernels.
func TestTableOverflowFromState(t *testing.T) {
	for _, kernels := range []bool{false, true} {
		tbl, err := ctable.New("overflow-state", ctable.Config{Dim: 5, Optimizer: ctable.OptAdagrad,
			OptParams: [8]float64{0.1, 0, 0, 1e-10}, Device: cgotorch.CPU, TensorKernels: kernels})
		if err != nil {
			t.Fatal(err)
		}
		step := func() error {
			k := cgotorch.MustFromSlice([]int64{3})
			defer k.Close()
			g := cgotorch.MustFromSlice([]float32{1.5e19, 1.5e19, 1.5e19, 1.5e19, 1.5e19}, 1, 5)
			defer g.Close()
			return tbl.Update(k, g)
		}
		if err := step(); err != nil {
			t.Fatalf("kernels %v: first step: %v", kernels, err)
		}
		before := dumpTable(t, tbl)
		if err := step(); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("kernels %v: second step: %v, want ErrInvalidArgument", kernels, err)
		}
		if after := dumpTable(t, tbl); !reflect.DeepEqual(after, before) {
			t.Errorf("kernels %v: the rejected step changed the table", kernels)
		}
		tbl.Close()
	}
}
