package cgotorch

import (
	"math"
	"testing"
)

// TestSmallOpsGiveOneThreadBits: an op below the parallel work (here 2^20 elements, a quarter
// of it) runs on the calling thread alone at any thread count, and so does the backward node of
// its result; so at 2 threads it gives the bits of 1. Before, libtorch split the forward's sum
// and the backward's sum of x * grad into s's shape between the two threads, and the rounding
// differed from one thread's.
func TestSmallOpsGiveOneThreadBits(t *testing.T) {
	prev := NumThreads()
	defer func() { _ = SetNumThreads(prev) }()
	ManualSeed(1)
	x := Randn([]int64{1 << 20})
	defer x.Close()
	run := func(threads int) (sum, grad float64) {
		if err := SetNumThreads(threads); err != nil {
			t.Fatal(err)
		}
		s := Ones([]int64{1}).SetRequiresGrad(true)
		defer s.Close()
		y := x.Mul(s).Sum()
		defer y.Close()
		y.Backward()
		g := s.Grad()
		defer g.Close()
		return item(t, y), item(t, g)
	}
	sum1, grad1 := run(1)
	sum2, grad2 := run(2)
	if math.Float64bits(sum1) != math.Float64bits(sum2) || math.Float64bits(grad1) != math.Float64bits(grad2) {
		t.Fatalf("2 threads: sum %v grad %v; 1 thread: sum %v grad %v", sum2, grad2, sum1, grad1)
	}
}

func item(t *testing.T, x *Tensor) float64 {
	t.Helper()
	v, err := x.Item()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
