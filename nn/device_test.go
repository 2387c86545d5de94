package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// deviceModel is a small tower with parameters, gradients and buffers of both dtypes
// (BatchNorm1d's batch count is int64).
func deviceModel(seed uint64) *nn.Sequential {
	cgotorch.ManualSeed(seed)
	return nn.NewSequential(nn.NewLinear(4, 3, true), nn.NewBatchNorm1d(3), &nn.ReLU{}, nn.NewLinear(3, 1, true))
}

// closeTo fails unless a and b agree within tol (absolute); what names the values.
func closeTo(t *testing.T, what string, a, b []float64, tol float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values against %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol {
			t.Fatalf("%s[%d]: %v against %v (tolerance %g)", what, i, a[i], b[i], tol)
		}
	}
}

// trainSteps runs SGD with momentum, created here (its buffers next to the parameters), for
// three steps of a squared-output loss on x. (Not Adam: it scales the first bias's gradient,
// which BatchNorm makes rounding noise, up to a full step, so a float32 and a float64 model
// part by 1e-4 within three steps.)
func trainSteps(t *testing.T, m *nn.Sequential, x *cgotorch.Tensor) {
	t.Helper()
	opt, err := nn.NewSGD(m, nn.SGDOptions{LR: 0.1, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; step < 3; step++ {
		opt.ZeroGrad()
		m.Forward(x).Square().Mean().Backward()
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
	}
}

// To converts in place: every parameter, gradient and buffer stays the same *Tensor and keeps
// its values (float32 -> float64 is exact), the batch count stays int64, parameters still
// require grad, and an optimizer created afterwards trains the float64 model as it trains a float32
// twin (within 1e-5: the two differ by float32 rounding only).
func TestToConvertsInPlace(t *testing.T) {
	m, twin := deviceModel(7), deviceModel(7)
	x := cgotorch.Randn([]int64{8, 4})
	m.Forward(x).Sum().Backward()
	twin.Forward(x).Sum().Backward()
	before := nn.StateDict(m)

	if err := nn.To(m, cgotorch.CPU, cgotorch.Float64); err != nil {
		t.Fatal(err)
	}
	after, want := nn.StateDict(m), nn.StateDict(twin)
	for i, p := range after {
		if p.Tensor != before[i].Tensor {
			t.Fatalf("%s: To replaced the tensor", p.Name)
		}
		wantType := cgotorch.Float64
		if p.Name == "1.num_batches_tracked" {
			wantType = cgotorch.Int64
		}
		if p.Tensor.DType() != wantType {
			t.Errorf("%s: dtype %v, want %v", p.Name, p.Tensor.DType(), wantType)
		}
		closeTo(t, p.Name, values(t, p.Tensor), values(t, want[i].Tensor), 0)
	}
	for i, p := range m.Parameters() {
		g := p.Tensor.Grad()
		if !p.Tensor.RequiresGrad() || g == nil || g.DType() != cgotorch.Float64 {
			t.Fatalf("%s: requires grad %v, gradient %v", p.Name, p.Tensor.RequiresGrad(), g)
		}
		closeTo(t, p.Name+".grad", values(t, g), values(t, twin.Parameters()[i].Tensor.Grad()), 0)
	}

	x64, err := x.To(cgotorch.CPU, cgotorch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	w0 := values(t, m.Parameters()[0].Tensor)
	trainSteps(t, m, x64)
	trainSteps(t, twin, x)
	if w := values(t, m.Parameters()[0].Tensor); w[0] == w0[0] {
		t.Fatalf("training did not change the converted weight (%v)", w[0])
	}
	for i, p := range nn.StateDict(m) {
		closeTo(t, p.Name+" after training", values(t, p.Tensor), values(t, nn.StateDict(twin)[i].Tensor), 1e-5)
	}
}

// A failed To changes nothing: a missing device, a dtype that is not floating-point, and a
// closed parameter found after the other tensors were copied.
func TestToFailureChangesNothing(t *testing.T) {
	m := deviceModel(1)
	m.Forward(cgotorch.Randn([]int64{8, 4})).Sum().Backward()
	state := nn.StateDict(m)
	saved := make([][]float64, len(state))
	for i, p := range state {
		saved[i] = values(t, p.Tensor)
	}
	unchanged := func(what string) {
		t.Helper()
		for i, p := range state {
			if p.Tensor.Closed() {
				continue
			}
			if p.Tensor.DType() == cgotorch.Float64 || p.Tensor.Device() != cgotorch.CPU {
				t.Fatalf("%s: %s is now %v on %v", what, p.Name, p.Tensor.DType(), p.Tensor.Device())
			}
			closeTo(t, what+": "+p.Name, values(t, p.Tensor), saved[i], 0)
		}
	}
	if !cgotorch.CUDAAvailable() {
		err := nn.To(m, cgotorch.CUDA(0), cgotorch.Float64)
		if !errors.Is(err, cgotorch.ErrDevice) {
			t.Fatalf("To a missing GPU: %v, want ErrDevice", err)
		}
		unchanged("missing device")
	}
	if err := nn.To(m, cgotorch.CPU, cgotorch.Int64); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("To int64: %v, want ErrInvalidArgument", err)
	}
	unchanged("int64")
	m.At(3).(*nn.Linear).Bias.Close() // the last parameter
	if err := nn.To(m, cgotorch.CPU, cgotorch.Float64); !errors.Is(err, cgotorch.ErrClosed) {
		t.Fatalf("To with a closed parameter: %v, want ErrClosed", err)
	}
	unchanged("closed parameter")
}

// On a GPU (skipped without one): a model moved with To trains there as its CPU twin does.
func TestToCUDA(t *testing.T) {
	if !cgotorch.CUDAAvailable() {
		t.Skip("no CUDA device")
	}
	m, twin := deviceModel(3), deviceModel(3)
	if err := nn.To(m, cgotorch.CUDA(0), cgotorch.KeepDType); err != nil {
		t.Fatal(err)
	}
	for _, p := range nn.StateDict(m) {
		if p.Tensor.Device().Type != cgotorch.DeviceCUDA {
			t.Fatalf("%s is on %v after To(cuda:0)", p.Name, p.Tensor.Device())
		}
	}
	x := cgotorch.Randn([]int64{8, 4})
	xg, err := x.To(cgotorch.CUDA(0), cgotorch.KeepDType)
	if err != nil {
		t.Fatal(err)
	}
	trainSteps(t, m, xg)
	trainSteps(t, twin, x)
	for i, p := range nn.StateDict(m) {
		closeTo(t, p.Name, values(t, p.Tensor), values(t, nn.StateDict(twin)[i].Tensor), 1e-4)
	}
}
