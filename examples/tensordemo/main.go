// Command tensordemo fits y = 3x + 2 by gradient descent with cgotorch tensors and autograd.
package main

import (
	"fmt"
	"os"

	"github.com/gorec/gorec/cgotorch"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tensordemo:", err)
		os.Exit(1)
	}
}

func run() error {
	cgotorch.ManualSeed(1)
	x := cgotorch.Rand([]int64{256, 1})
	y := x.MulScalar(3).AddScalar(2)
	w := cgotorch.Zeros([]int64{1, 1}, cgotorch.RequiresGrad())
	b := cgotorch.Zeros([]int64{1}, cgotorch.RequiresGrad())
	for step := 0; step < 200; step++ {
		cgotorch.WithScope(func(s *cgotorch.Scope) {
			loss := cgotorch.MSELoss(x.MM(w).Add(b), y, cgotorch.ReduceMean)
			loss.Backward()
			cgotorch.NoGrad(func() {
				w.SubInPlace(w.Grad().MulScalar(0.5))
				b.SubInPlace(b.Grad().MulScalar(0.5))
			})
			w.ZeroGrad()
			b.ZeroGrad()
			if step%50 == 0 {
				l, _ := loss.Item()
				fmt.Printf("step %3d  loss %.5f\n", step, l)
			}
		})
	}
	wv, err := w.Item()
	if err != nil {
		return err
	}
	bv, err := b.Item()
	if err != nil {
		return err
	}
	fmt.Printf("fitted y = %.3fx + %.3f (want 3x + 2), libtorch %s\n", wv, bv, cgotorch.TorchVersion())
	return nil
}
