package ctable_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// The autograd path of the table handle: Forward, ForwardBag, Step, ZeroGrad, PendingGrad. The
// semantics are tested against PyTorch in package nn and in depth in package embedding.
func TestTableForwardHandle(t *testing.T) {
	tbl, err := ctable.New("ctable-forward", ctable.Config{Dim: 2, Init: ctable.InitZeros,
		Optimizer: ctable.OptSGD, OptParams: [8]float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	// optimizers.md's reference: W[r] = [2r, 2r+1], bags [1,2], [], [4,5,4,3].
	keys := cgotorch.MustFromSlice([]int64{0, 1, 2, 3, 4, 5})
	if err := tbl.Write(keys, cgotorch.MustFromSlice([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 6, 2)); err != nil {
		t.Fatal(err)
	}
	ids := cgotorch.MustFromSlice([]int64{1, 2, 4, 5, 4, 3})
	offsets := cgotorch.MustFromSlice([]int64{0, 2, 2})
	want := map[ctable.BagMode][]float32{
		ctable.BagSum: {6, 8, 0, 0, 32, 36}, ctable.BagMean: {3, 4, 0, 0, 8, 9}, ctable.BagMax: {4, 5, 0, 0, 10, 11},
	}
	for mode, w := range want {
		out, err := tbl.ForwardBag(ids, offsets, nil, mode, ctable.ForwardOptions{}, ctable.ReadZeros)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := cgotorch.ToSlice[float32](out); !slices.Equal(v, w) {
			t.Errorf("mode %d: %v, want %v", mode, v, w)
		}
	}
	out, err := tbl.Forward(cgotorch.MustFromSlice([]int64{3, 9, 3}, 3, 1), ctable.ForwardOptions{Train: true}, ctable.ReadZeros)
	if err != nil {
		t.Fatal(err)
	}
	if s := out.Shape(); !slices.Equal(s, []int64{3, 1, 2}) || !out.RequiresGrad() {
		t.Fatalf("shape %v, requires grad %v", s, out.RequiresGrad())
	}
	out.Sum().Backward()
	pid, pg, err := tbl.PendingGrad()
	if err != nil {
		t.Fatal(err)
	}
	i, _ := cgotorch.ToSlice[int64](pid)
	g, _ := cgotorch.ToSlice[float32](pg)
	if !slices.Equal(i, []int64{3, 9}) || !slices.Equal(g, []float32{2, 2, 1, 1}) {
		t.Fatalf("pending %v %v", i, g)
	}
	if stepped, err := tbl.Step(); err != nil || !stepped {
		t.Fatalf("step: %v %v", stepped, err)
	}
	if stepped, err := tbl.Step(); err != nil || stepped {
		t.Fatalf("second step: %v %v", stepped, err)
	}
	r, _ := tbl.Lookup(cgotorch.MustFromSlice([]int64{3, 9}))
	if v, _ := cgotorch.ToSlice[float32](r); !slices.Equal(v, []float32{4, 5, -1, -1}) {
		t.Fatalf("rows after the step %v", v)
	}
	out, _ = tbl.Forward(cgotorch.MustFromSlice([]int64{3}), ctable.ForwardOptions{Train: true}, ctable.ReadZeros)
	out.Sum().Backward()
	if err := tbl.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
	if stepped, _ := tbl.Step(); stepped {
		t.Fatal("stepped after ZeroGrad")
	}
	if _, err := tbl.Forward(nil, ctable.ForwardOptions{}, ctable.ReadZeros); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("nil ids: %v", err)
	}
	if _, err := tbl.ForwardBag(ids, cgotorch.MustFromSlice([]int64{1}), nil, ctable.BagSum, ctable.ForwardOptions{}, ctable.ReadZeros); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("offsets not starting at 0: %v", err)
	}
	tbl.Close()
	if _, err := tbl.Step(); !errors.Is(err, cgotorch.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
