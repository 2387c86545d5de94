package cgotorch_test

import (
	"errors"
	"fmt"

	"github.com/gorec/gorec/cgotorch"
)

func ExampleTensor_MM() {
	a := cgotorch.MustFromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := cgotorch.MustFromSlice([]float32{1, 0, 0, 1, 1, 1}, 3, 2)
	c := a.MM(b)
	v, _ := cgotorch.ToSlice[float32](c)
	fmt.Println(c.Shape(), v)
	// Output: [2 2] [4 5 10 11]
}

func ExampleCat() {
	a := cgotorch.MustFromSlice([]int64{1, 2, 3, 4}, 2, 2)
	b := cgotorch.MustFromSlice([]int64{5, 6}, 1, 2)
	c := cgotorch.Cat([]*cgotorch.Tensor{a, b}, 0)
	v, _ := cgotorch.ToSlice[int64](c)
	fmt.Println(c.Shape(), v)
	// Output: [3 2] [1 2 3 4 5 6]
}

func ExampleTensor_Unique() {
	ids := cgotorch.MustFromSlice([]int64{42, 7, 42, 9, 7, 42})
	u := ids.Unique(true, true, true)
	vals, _ := cgotorch.ToSlice[int64](u.Values)
	inv, _ := cgotorch.ToSlice[int64](u.Inverse)
	counts, _ := cgotorch.ToSlice[int64](u.Counts)
	fmt.Println(vals, inv, counts)
	// Output: [7 9 42] [2 0 2 1 0 2] [2 1 3]
}

func ExampleTensor_TopK() {
	scores := cgotorch.MustFromSlice([]float32{0.1, 0.7, 0.3, 0.9, 0.5}, 1, 5)
	vals, idx := scores.TopK(2, 1, true, true)
	v, _ := cgotorch.ToSlice[float32](vals)
	i, _ := cgotorch.ToSlice[int64](idx)
	fmt.Println(v, i)
	// Output: [0.9 0.7] [3 1]
}

// A linear regression fitted by gradient descent: the pattern of a training step.
func ExampleMSELoss() {
	x := cgotorch.MustFromSlice([]float32{0, 1, 2, 3}, 4, 1)
	y := x.MulScalar(3).AddScalar(2) // y = 3x + 2
	w := cgotorch.Zeros([]int64{1, 1}).SetRequiresGrad(true)
	b := cgotorch.Zeros([]int64{1}).SetRequiresGrad(true)
	for step := 0; step < 200; step++ {
		pred := x.MM(w).Add(b)
		loss := cgotorch.MSELoss(pred, y, cgotorch.ReduceMean)
		w.ZeroGrad()
		b.ZeroGrad()
		loss.Backward()
		cgotorch.NoGrad(func() {
			w.SubInPlace(w.Grad().MulScalar(0.1))
			b.SubInPlace(b.Grad().MulScalar(0.1))
		})
	}
	wv, _ := w.Item()
	bv, _ := b.Item()
	fmt.Printf("w=%.2f b=%.2f\n", wv, bv)
	// Output: w=3.00 b=2.00
}

func ExampleTry() {
	a := cgotorch.Ones([]int64{2, 3})
	b := cgotorch.Ones([]int64{4})
	err := cgotorch.Try(func() { a.Add(b) })
	fmt.Println(errors.Is(err, cgotorch.ErrTorch))
	// Output: true
}
