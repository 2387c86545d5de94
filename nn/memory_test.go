package nn_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// A training loop that frees nothing keeps its tensor memory bounded: the cleanups and the
// forced collections of cgotorch release every temporary. Not timed: it asserts memory only.
func TestTrainingLoopWithoutFreesStaysBounded(t *testing.T) {
	defer cgotorch.SetGCThreshold(cgotorch.SetGCThreshold(4 << 20))
	runtime.GC()
	cgotorch.ManualSeed(1)
	model := nn.NewSequential(nn.NewLinear(64, 256, true), nn.NewBatchNorm1d(256), &nn.ReLU{},
		nn.NewDropout(0.1), nn.NewLinear(256, 1, true))
	opt, err := nn.NewAdam(model.Parameters(), nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	loss := nn.BCEWithLogits(nn.ReduceMean)
	x := cgotorch.Randn([]int64{256, 64})
	target, _ := cgotorch.Rand([]int64{256, 1}).GtScalar(0.5).To(cgotorch.CPU, cgotorch.Float32)
	start := cgotorch.LiveBytes()
	var peak int64
	const steps = 400 // each step allocates about 2 MiB of temporaries: 800 MiB in all
	for i := 0; i < steps; i++ {
		opt.ZeroGrad()
		l := loss(model.Forward(x), target)
		l.Backward()
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, cgotorch.LiveBytes()-start)
	}
	if peak > 48<<20 {
		t.Errorf("live tensor memory grew by %d MiB over %d steps", peak>>20, steps)
	}
	// Once the loop's tensors are unreachable, the handles go back to what the model, the
	// optimizer and the data hold.
	held := int64(len(nn.StateDict(model))*4 + 8)
	base := cgotorch.LiveTensors()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		if cgotorch.LiveTensors() <= held+16 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := cgotorch.LiveTensors(); n > held+16 && n >= base {
		t.Errorf("%d live tensors after collection (was %d), expected about %d", n, base, held)
	}
	runtime.KeepAlive(model)
	runtime.KeepAlive(opt)
}

// A training loop with every step in cgotorch.WithScope frees each step's tensors when the step
// ends: after the first step (which allocates the gradients) the live bytes stay put.
func TestTrainingLoopInScope(t *testing.T) {
	defer cgotorch.SetGCThreshold(cgotorch.SetGCThreshold(0)) // no forced collections: the scope alone frees
	cgotorch.ManualSeed(2)
	model := nn.NewSequential(nn.NewLinear(32, 64, true), nn.NewLayerNorm(64), &nn.Tanh{}, nn.NewLinear(64, 1, true))
	opt, err := nn.NewSGD(model.Parameters(), nn.SGDOptions{LR: 0.01, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	x := cgotorch.Randn([]int64{128, 32})
	target := cgotorch.Randn([]int64{128, 1})
	loss := nn.MSE(nn.ReduceMean)
	var after1 int64
	first := 0.0
	last := 0.0
	for i := 0; i < 100; i++ {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			opt.ZeroGrad()
			l := loss(model.Forward(x), target)
			l.Backward()
			if err := opt.Step(); err != nil {
				t.Fatal(err)
			}
			last, _ = l.Item()
		})
		if i == 0 {
			after1, first = cgotorch.LiveBytes(), last
		} else if live := cgotorch.LiveBytes(); live > after1 {
			t.Fatalf("step %d: live bytes %d, %d after the first step", i, live, after1)
		}
	}
	if !(last < first) {
		t.Errorf("loss did not decrease: %v -> %v", first, last)
	}
}
