package embedding_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// Bad input gets an error wrapping ErrBadInput and leaves the table exactly as it was (the
// export, with optimizer states and step, compared before and after).
func TestBadInputChangesNothing(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.SparseAdam{LR: 0.1}, BlockRows: 4})
	update(t, tbl, []int64{1, 2, 3, 1}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1)
	update(t, tbl, []int64{2, 4}, 1, 0, 1, 0, 1, 0)
	before := export(t, tbl)
	stBefore, _ := tbl.Stats()

	mk := func(v any, shape ...int64) *cgotorch.Tensor {
		var x *cgotorch.Tensor
		var err error
		switch d := v.(type) {
		case []int64:
			x, err = cgotorch.FromSlice(d, shape...)
		case []float32:
			x, err = cgotorch.FromSlice(d, shape...)
		case []float64:
			x, err = cgotorch.FromSlice(d, shape...)
		case []int32:
			x, err = cgotorch.FromSlice(d, shape...)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(x.Close)
		return x
	}
	newIDs := mk([]int64{1, 50, 60})
	grads3 := mk([]float32{1, 1, 1, 1, 1, 1, 1, 1, 1}, 3, 3)
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	closed := mk([]int64{1})
	closed.Close()

	cases := []struct {
		name string
		err  error
	}{
		{"keys float32", tbl.Update(mk([]float32{1, 2, 3}), grads3)},
		{"keys int32", tbl.Update(mk([]int32{1, 2, 3}), grads3)},
		{"keys [3, 1], grads [3, 3]", tbl.Update(mk([]int64{1, 50, 60}, 3, 1), grads3)},
		{"keys [3, 1], grads [1, 3, 3]", tbl.Update(mk([]int64{1, 50, 60}, 3, 1), mk([]float32{1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 3, 3))},
		{"keys 0-D", tbl.Update(mk([]int64{1}, []int64{}...), mk([]float32{1, 1, 1}, 1, 3))},
		{"grads float64", tbl.Update(newIDs, mk([]float64{1, 1, 1, 1, 1, 1, 1, 1, 1}, 3, 3))},
		{"grads 1-D", tbl.Update(newIDs, mk([]float32{1, 1, 1, 1, 1, 1, 1, 1, 1}))},
		{"grads 3-D", tbl.Update(newIDs, mk([]float32{1, 1, 1, 1, 1, 1, 1, 1, 1}, 3, 3, 1))},
		{"too few grad rows", tbl.Update(newIDs, mk([]float32{1, 1, 1, 1, 1, 1}, 2, 3))},
		{"too many grad rows", tbl.Update(mk([]int64{50}), grads3)},
		{"wrong dim", tbl.Update(newIDs, mk([]float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 3, 4))},
		{"NaN gradient", tbl.Update(newIDs, mk([]float32{1, 1, 1, 1, nan, 1, 1, 1, 1}, 3, 3))},
		{"+Inf gradient", tbl.Update(newIDs, mk([]float32{1, 1, 1, 1, 1, 1, 1, 1, inf}, 3, 3))},
		{"-Inf gradient", tbl.Update(newIDs, mk([]float32{-inf, 1, 1, 1, 1, 1, 1, 1, 1}, 3, 3))},
		{"NaN value", tbl.Write(newIDs, mk([]float32{1, 1, 1, 1, nan, 1, 1, 1, 1}, 3, 3))},
		{"write wrong dim", tbl.Write(newIDs, mk([]float32{1, 1, 1, 1, 1, 1}, 3, 2))},
		{"write row mismatch", tbl.Write(newIDs, mk([]float32{1, 1, 1}, 1, 3))},
		{"nil keys", tbl.Update(nil, grads3)},
		{"nil grads", tbl.Update(newIDs, nil)},
		{"closed keys", tbl.Write(closed, grads3)},
		{"slice grads length", tbl.UpdateIDs([]int64{1, 50}, []float32{1, 2, 3})},
		{"slice values length", tbl.WriteIDs([]int64{1, 50}, []float32{1, 2, 3, 4, 5, 6, 7})},
		{"lookup float keys", func() error { _, err := tbl.Lookup(mk([]float32{1})); return err }()},
		{"read 2-D int32 keys", func() error { _, _, err := tbl.Read(mk([]int32{1, 2}, 1, 2)); return err }()},
		{"delete float keys", func() error { _, err := tbl.Delete(mk([]float32{1})); return err }()},
		{"indices nil keys", func() error { _, err := tbl.Indices(nil, true); return err }()},
		{"prefetch int32 keys", func() error { _, err := tbl.Prefetch(mk([]int32{1})); return err }()},
	}
	for _, c := range cases {
		if !errors.Is(c.err, embedding.ErrBadInput) {
			t.Errorf("%s: %v, want ErrBadInput", c.name, c.err)
		}
	}
	// The C layer's message comes through.
	err := tbl.Update(newIDs, mk([]float32{1, 1, 1, 1, nan, 1, 1, 1, 1}, 3, 3))
	var ce *cgotorch.Error
	if !errors.As(err, &ce) || !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("NaN error %v does not wrap a *cgotorch.Error", err)
	}
	after := export(t, tbl)
	stAfter, _ := tbl.Stats()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("bad input changed the table:\nbefore %+v\nafter  %+v", before, after)
	}
	if stBefore != stAfter {
		t.Fatalf("stats changed: %+v -> %+v", stBefore, stAfter)
	}
}

func TestBadConfig(t *testing.T) {
	name := t.Name()
	for _, cfg := range []embedding.Config{
		{Dim: 0},
		{Dim: -3},
		{Dim: 2, BlockRows: -1},
		{Dim: 2, Capacity: -1},
		{Dim: 2, Layout: 7},
		{Dim: 2, ReadDefault: 9},
		{Dim: 2, Initializer: embedding.Normal{Std: -1}},
		{Dim: 2, Initializer: embedding.Uniform{Low: 1, High: 0}},
		{Dim: 2, Initializer: embedding.Constant{Value: math.NaN()}},
		{Dim: 2, Optimizer: embedding.SGD{LR: -1}},
		{Dim: 2, Optimizer: embedding.SGD{LR: 0.1, Nesterov: true}},
		{Dim: 2, Optimizer: embedding.SparseAdam{Beta1: 1}},
		{Dim: 2, Optimizer: embedding.Adagrad{Eps: -1}},
		{Dim: 2, Optimizer: embedding.FTRL{L1: -1}},
		{Dim: 2, Optimizer: embedding.AdamW{WeightDecay: -1}},
	} {
		if _, err := embedding.NewNamed(name, cfg); !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("config %+v: %v, want ErrBadInput", cfg, err)
		}
	}
	if _, err := embedding.NewNamed("", embedding.Config{Dim: 2}); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("empty name: %v", err)
	}
	// none of them took the name
	tbl, err := embedding.NewNamed(name, embedding.Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	tbl.Close()
	if !cgotorch.CUDAAvailable() {
		if _, err := embedding.NewNamed(name, embedding.Config{Dim: 2, Device: cgotorch.CUDA(0)}); !errors.Is(err, embedding.ErrDevice) {
			t.Errorf("CUDA without CUDA: %v", err)
		}
	}
	// no optimizer: Update is bad input
	none := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.NoOptimizer{}}, "none")
	if err := none.UpdateIDs([]int64{1}, []float32{1, 1}); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("update without optimizer: %v", err)
	}
}

// An initializer with which a row value could overflow float32 (finite float64 parameters
// beyond float32's range) is refused with ErrBadInput naming the parameter: accepted, it gave
// +Inf rows, which Save wrote and Load then refused. Those at the edge of the range are fine:
// their rows are finite and the table saves and loads.
func TestInitializerMustFitFloat32(t *testing.T) {
	const max = math.MaxFloat32
	for _, c := range []struct {
		dim  int
		init embedding.Initializer
		want string // in the error
	}{
		{2, embedding.Constant{Value: 1e39}, "value"},
		{2, embedding.Constant{Value: -1e39}, "value"},
		{2, embedding.Uniform{Low: -1e308, High: 1e308}, "low"},
		{2, embedding.Uniform{Low: 0, High: 1e39}, "high"},
		{2, embedding.Normal{Std: 1e300}, "std"},
		{2, embedding.Normal{Std: 4e37}, "std"}, // 8.66 * 4e37 > 3.4e38
		{2, embedding.Normal{Mean: 1e39, Std: 0}, "mean"},
		{2, embedding.Normal{Mean: 3e38, Std: 1e37}, "std"}, // 3e38 + 8.66e37
		{2, embedding.TruncatedNormal{Std: 1e300}, "low"},   // Mean ± 2 Std
		{2, embedding.TruncatedNormal{Std: 1, Low: -1, High: 1e39}, "high"},
		{2, embedding.XavierUniform{Gain: 1e300}, "gain"},
		{2, embedding.XavierUniform{Gain: 3e38}, "gain"}, // b = 3e38 * sqrt(6 / 4)
		{2, embedding.XavierNormal{Gain: 1e300}, "gain"},
		{2, embedding.XavierNormal{Gain: 1e38, FanIn: 1, FanOut: 1}, "gain"}, // 8.66 * 1e38
	} {
		tbl, err := embedding.NewNamed(t.Name(), embedding.Config{Dim: c.dim, Initializer: c.init})
		if err == nil {
			tbl.Close()
		}
		if !errors.Is(err, embedding.ErrBadInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("dim %d, %#v: %v, want ErrBadInput naming %q", c.dim, c.init, err, c.want)
		}
	}
	for i, c := range []struct {
		dim  int
		init embedding.Initializer
	}{
		{2, embedding.Constant{Value: max}},
		{2, embedding.Constant{Value: -max}},
		{2, embedding.Uniform{Low: -max, High: max}},
		{2, embedding.Normal{Std: 3e37}},
		{2, embedding.Normal{Mean: -3e38, Std: 4e36}},
		{2, embedding.TruncatedNormal{Std: 1e300, Low: -1, High: 1}}, // bounded by its limits
		{2, embedding.TruncatedNormal{Mean: 1e300, Std: 1, Low: -max, High: max}},
		{8, embedding.XavierUniform{Gain: 3e38}}, // b = 3e38 * sqrt(6 / 16): the scale follows Dim
		{2, embedding.XavierNormal{Gain: 1e37}},
	} {
		tbl := newTable(t, embedding.Config{Dim: c.dim, Initializer: c.init}, strconv.Itoa(i))
		for _, row := range lookup(t, tbl, 1, 2, 3, -7, 1<<40) {
			for _, x := range row {
				if math.IsInf(float64(x), 0) || math.IsNaN(float64(x)) {
					t.Fatalf("dim %d, %#v: row %v", c.dim, c.init, row)
				}
			}
		}
		dir := t.TempDir()
		if err := embedding.Save(context.Background(), dir, tbl); err != nil {
			t.Fatalf("%#v: save: %v", c.init, err)
		}
		ts, err := embedding.LoadRenamed(context.Background(), dir, func(s string) string { return s + "/copy" })
		for _, x := range ts {
			x.Close()
		}
		if err != nil {
			t.Fatalf("%#v: load: %v", c.init, err)
		}
	}
}
