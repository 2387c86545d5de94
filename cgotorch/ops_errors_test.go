package cgotorch_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gorec/gorec/cgotorch"
)

// TestOpErrors checks that misuse panics with a *cgotorch.Error wrapping the right sentinel,
// carrying libtorch's message without its C++ backtrace, and leaks no handle.
func TestOpErrors(t *testing.T) {
	x := cgotorch.Ones([]int64{2, 3})
	v4 := cgotorch.Ones([]int64{4})
	ints := cgotorch.MustFromSlice([]int64{1, 2, 3, 4, 5, 6}, 2, 3)
	idx := cgotorch.MustFromSlice([]int64{0, 5})
	closed := cgotorch.Ones([]int64{2, 3})
	closed.Close()
	leaf := cgotorch.Ones([]int64{2, 3}).SetRequiresGrad(true)
	probs := cgotorch.Full([]int64{2, 3}, 0.5)
	col, row := cgotorch.Full([]int64{3, 1}, 0.5), cgotorch.Ones([]int64{1, 3})
	var null *T

	cases := []struct {
		name string
		f    func()
		want error
	}{
		{"add shape mismatch", func() { x.Add(v4) }, cgotorch.ErrTorch},
		{"add in place shape mismatch", func() { v4.AddInPlace(x) }, cgotorch.ErrTorch},
		{"mm dtype mismatch", func() { ints.MM(x.Transpose(0, 1)) }, cgotorch.ErrTorch},
		{"mm of vectors", func() { v4.MM(v4) }, cgotorch.ErrTorch},
		{"matmul shape mismatch", func() { x.Matmul(x) }, cgotorch.ErrTorch},
		{"mean of int64", func() { ints.Mean() }, cgotorch.ErrTorch},
		{"int64 times 0.5 in place", func() { ints.MulScalarInPlace(0.5) }, cgotorch.ErrTorch},
		{"in place on a leaf requiring grad", func() { leaf.SubInPlace(x) }, cgotorch.ErrTorch},
		{"where with a float condition", func() { cgotorch.Where(x, x, x) }, cgotorch.ErrTorch},
		{"view of a transposed tensor", func() { x.Transpose(0, 1).View(6) }, cgotorch.ErrTorch},
		{"reshape to another size", func() { x.Reshape(4, 2) }, cgotorch.ErrTorch},
		{"expand to a smaller shape", func() { x.Expand(3) }, cgotorch.ErrTorch},
		{"dropout probability", func() { x.Dropout(1.5, true) }, cgotorch.ErrTorch},
		{"topk k too large", func() { x.TopK(4, 1, true, true) }, cgotorch.ErrTorch},

		{"use after close (receiver)", func() { closed.Add(x) }, cgotorch.ErrClosed},
		{"use after close (argument)", func() { x.Mul(closed) }, cgotorch.ErrClosed},
		{"use after close (reduction)", func() { closed.Sum() }, cgotorch.ErrClosed},
		{"use after close (in place)", func() { closed.Fill(1) }, cgotorch.ErrClosed},
		{"use after close (loss)", func() { cgotorch.MSELoss(x, closed, cgotorch.ReduceMean) }, cgotorch.ErrClosed},
		{"nil receiver", func() { null.Neg() }, cgotorch.ErrClosed},
		{"nil argument", func() { x.Sub(nil) }, cgotorch.ErrClosed},
		{"nil in where", func() { cgotorch.Where(nil, x, x) }, cgotorch.ErrClosed},
		{"nil in cat", func() { cgotorch.Cat([]*T{x, nil}, 0) }, cgotorch.ErrClosed},
		{"nil index", func() { x.IndexSelect(0, nil) }, cgotorch.ErrClosed},

		{"cat of an empty list", func() { cgotorch.Cat(nil, 0) }, cgotorch.ErrInvalidArgument},
		{"stack of an empty list", func() { cgotorch.Stack([]*T{}, 0) }, cgotorch.ErrInvalidArgument},
		{"unknown reduction", func() { cgotorch.MSELoss(x, x, cgotorch.Reduction(7)) }, cgotorch.ErrInvalidArgument},

		{"sum over a bad dim", func() { x.SumDim([]int64{2}, false) }, cgotorch.ErrTorch},
		{"sum over a dim listed twice", func() { x.SumDim([]int64{1, -1}, false) }, cgotorch.ErrTorch},
		{"prod over a dim listed twice", func() { x.ProdDim([]int64{0, -2}, false) }, cgotorch.ErrTorch},
		{"squeeze a dim listed twice", func() { x.Squeeze(0, 0) }, cgotorch.ErrTorch},
		{"prod over a bad dim", func() { x.ProdDim([]int64{-3}, false) }, cgotorch.ErrTorch},
		{"transpose a bad dim", func() { x.Transpose(0, 7) }, cgotorch.ErrTorch},
		{"softmax over a bad dim", func() { x.Softmax(2) }, cgotorch.ErrTorch},
		{"max over a bad dim", func() { x.MaxDim(5, false) }, cgotorch.ErrTorch},
		{"argmax over a bad dim", func() { x.Argmax(-3, false) }, cgotorch.ErrTorch},
		{"unsqueeze at a bad dim", func() { x.Unsqueeze(4) }, cgotorch.ErrTorch},
		{"permute with too few dims", func() { x.Permute(0) }, cgotorch.ErrTorch},
		{"narrow past the end", func() { x.Narrow(1, 2, 5) }, cgotorch.ErrTorch},
		{"cat of mismatched shapes", func() { cgotorch.Cat([]*T{x, v4}, 0) }, cgotorch.ErrTorch},
		{"stack of mismatched shapes", func() { cgotorch.Stack([]*T{x, x.Transpose(0, 1)}, 0) }, cgotorch.ErrTorch},
		{"index select out of range", func() { x.IndexSelect(1, idx) }, cgotorch.ErrTorch},
		{"index select with a float index", func() { x.IndexSelect(0, v4) }, cgotorch.ErrTorch},
		{"gather out of range", func() { x.Gather(1, idx.Reshape(1, 2)) }, cgotorch.ErrTorch},
		{"index add out of range", func() { x.IndexAdd(1, idx, x.Narrow(1, 0, 2)) }, cgotorch.ErrTorch},
		{"scatter add out of range", func() { x.ScatterAdd(1, idx.Reshape(1, 2), x) }, cgotorch.ErrTorch},
		// PyTorch's binary_cross_entropy(_with_logits) refuse a target of another size;
		// libtorch's own functions squeeze and broadcast it.
		{"bce target broadcast over rows", func() { cgotorch.BCELoss(probs, row.Reshape(3), cgotorch.ReduceMean) }, cgotorch.ErrTorch},
		{"bce target of the transposed shape", func() { cgotorch.BCELoss(probs, x.Transpose(0, 1), cgotorch.ReduceMean) }, cgotorch.ErrTorch},
		{"bce column against row", func() { cgotorch.BCELoss(col, row, cgotorch.ReduceNone) }, cgotorch.ErrTorch},
		{"bce with logits target broadcast over rows", func() {
			cgotorch.BCEWithLogitsLoss(probs, row.Reshape(3), cgotorch.ReduceMean)
		}, cgotorch.ErrTorch},
		{"bce input broadcast to the target", func() { cgotorch.BCELoss(row, probs, cgotorch.ReduceNone) }, cgotorch.ErrTorch},
		{"bce with logits input broadcast to the target", func() {
			cgotorch.BCEWithLogitsLoss(row, probs, cgotorch.ReduceNone)
		}, cgotorch.ErrTorch},
		{"cross entropy with float classes of the wrong shape", func() {
			cgotorch.CrossEntropyLoss(x, v4, cgotorch.ReduceMean)
		}, cgotorch.ErrTorch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := cgotorch.LiveTensors()
			err := cgotorch.Try(c.f)
			if err == nil {
				t.Fatal("no panic")
			}
			var e *cgotorch.Error
			if !errors.As(err, &e) {
				t.Fatalf("panic value %T is not a *cgotorch.Error: %v", err, err)
			}
			if !errors.Is(err, c.want) {
				t.Errorf("error %q (kind %v), want %v", err, e.Kind, c.want)
			}
			if e.Op == "" || e.Msg == "" || strings.Contains(e.Msg, "Exception raised from") {
				t.Errorf("bad error fields: op %q, msg %q", e.Op, e.Msg)
			}
			// Views made to set up a case (x.Transpose above) are the only handles allowed.
			if after := cgotorch.LiveTensors(); after > before+2 {
				t.Errorf("%d handles leaked", after-before)
			}
		})
	}
}

// TestInPlaceUnderNoGrad is the parameter update of a training step: refused on a leaf that
// requires grad, accepted under NoGrad, which leaves requires-grad and the gradient alone.
func TestInPlaceUnderNoGrad(t *testing.T) {
	w := cgotorch.MustFromSlice([]float32{1, 2, 3, 4}, 2, 2).SetRequiresGrad(true)
	x := cgotorch.MustFromSlice([]float32{1, 0, 0, 1}, 2, 2)
	cgotorch.MSELoss(x.MM(w), cgotorch.Zeros([]int64{2, 2}), cgotorch.ReduceSum).Backward()
	if err := cgotorch.Try(func() { w.SubInPlace(w.Grad().MulScalar(0.5)) }); !errors.Is(err, cgotorch.ErrTorch) {
		t.Fatalf("in-place update of a leaf with grad mode on: %v, want ErrTorch", err)
	}
	cgotorch.NoGrad(func() { w.SubInPlace(w.Grad().MulScalar(0.5)) })
	// loss = sum(w^2): grad 2w, so w - 0.5*2w = 0.
	if got := values(t, w); got[0] != 0 || got[3] != 0 {
		t.Errorf("updated w = %v, want zeros", got)
	}
	if !w.RequiresGrad() {
		t.Error("w lost requires-grad")
	}
}
