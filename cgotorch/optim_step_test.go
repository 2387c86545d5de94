package cgotorch

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// OptimizerStep: Adagrad with weight decay and lr decay by hand over two steps (nn's optimizer
// tests compare every rule with torch.optim), and bad calls panic with a recoverable *Error
// without touching the parameter.
func TestOptimizerStep(t *testing.T) {
	p := MustFromSlice([]float64{1, -2})
	g := MustFromSlice([]float64{0.5, 1})
	sum := MustFromSlice([]float64{0.1, 0.1})
	o := OptimizerOptions{Kind: OptimAdagrad, LR: 0.1, WeightDecay: 0.2, LRDecay: 0.5, Eps: 1e-10}
	want := []float64{1, -2}
	acc := []float64{0.1, 0.1}
	for step := int64(1); step <= 2; step++ {
		OptimizerStep(o, step, p, g, sum)
		clr := o.LR / (1 + float64(step-1)*o.LRDecay)
		for i, gi := range []float64{0.5, 1} {
			d := gi + o.WeightDecay*want[i]
			acc[i] += d * d
			want[i] -= clr * d / (math.Sqrt(acc[i]) + o.Eps)
		}
	}
	got, _ := ToSlice[float64](p)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("after two Adagrad steps p = %v, want %v", got, want)
		}
	}
	for name, call := range map[string]func(){
		"missing state": func() { OptimizerStep(o, 3, p, g) },
		"step 0":        func() { OptimizerStep(o, 0, p, g, sum) },
		"grad shape":    func() { OptimizerStep(o, 3, p, MustFromSlice([]float64{1}), sum) },
		"unknown kind":  func() { OptimizerStep(OptimizerOptions{Kind: 42}, 3, p, g, sum) },
		"four states":   func() { OptimizerStep(o, 3, p, g, sum, sum, sum, sum) },
	} {
		if err := Try(call); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if after, _ := ToSlice[float64](p); after[0] != got[0] || after[1] != got[1] {
		t.Errorf("failed steps moved the parameter: %v -> %v", got, after)
	}
}

// TestOptimizerStepAMSGradMissingStateTouchesNothing: a step that fails on a missing or
// misshapen state (here AMSGrad's max_exp_avg_sq) panics before it changes anything: the
// parameter (AdamW's weight decay), exp_avg and exp_avg_sq keep their values, so that a caller
// who recovers and retries with the right states does not apply half a step twice.
func TestOptimizerStepAMSGradMissingStateTouchesNothing(t *testing.T) {
	o := OptimizerOptions{Kind: OptimAdamW, LR: 0.1, WeightDecay: 0.5, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, AMSGrad: true}
	for name, maxSq := range map[string]*Tensor{"missing": nil, "misshapen": Zeros([]int64{3})} {
		p := MustFromSlice([]float64{1, -2})
		g := MustFromSlice([]float64{0.5, 1})
		m, v := Zeros([]int64{2}, WithDType(Float64)), Zeros([]int64{2}, WithDType(Float64))
		err := Try(func() { OptimizerStep(o, 1, p, g, m, v, maxSq) })
		if !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%s max_exp_avg_sq: %v, want ErrInvalidArgument", name, err)
		}
		pv, _ := ToSlice[float64](p)
		mv, _ := ToSlice[float64](m)
		vv, _ := ToSlice[float64](v)
		if pv[0] != 1 || pv[1] != -2 || mv[0] != 0 || mv[1] != 0 || vv[0] != 0 || vv[1] != 0 {
			t.Errorf("%s max_exp_avg_sq: the failed step changed param %v, exp_avg %v, exp_avg_sq %v", name, pv, mv, vv)
		}
	}
}

// OptimizerStepParams gives, for every rule, exactly what OptimizerStep gives parameter by
// parameter from each one's gradient, skips a parameter without a gradient, and on a bad
// argument (the last parameter's misshapen state) panics before it changes anything.
func TestOptimizerStepParams(t *testing.T) {
	rules := map[string]OptimizerOptions{
		"sgd":     {Kind: OptimSGD, LR: 0.1, WeightDecay: 0.01, Momentum: 0.9, Nesterov: true},
		"adam":    {Kind: OptimAdam, LR: 0.1, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, AMSGrad: true},
		"adamw":   {Kind: OptimAdamW, LR: 0.1, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		"adagrad": {Kind: OptimAdagrad, LR: 0.1, LRDecay: 0.01, Eps: 1e-10},
	}
	// leaf returns a parameter with a gradient (none when grad is nil) and its three states.
	leaf := func(vals, grad []float32) (*Tensor, [3]*Tensor) {
		p := MustFromSlice(vals).SetRequiresGrad(true)
		if grad != nil {
			p.Mul(MustFromSlice(grad)).Sum().Backward()
		}
		var s [3]*Tensor
		for i := range s {
			s[i] = Zeros([]int64{int64(len(vals))})
		}
		return p, s
	}
	vals := [][]float32{{1, -2, 0.5}, {0.25}, {3, 4}}
	grads := [][]float32{{0.5, 1, -0.25}, nil, {-1, 2}}
	for name, o := range rules {
		var batch []OptimizerParam
		var one [][]float32
		for i := range vals {
			p, s := leaf(vals[i], grads[i])
			batch = append(batch, OptimizerParam{Param: p, States: s, Step: 1})
			q, qs := leaf(vals[i], grads[i])
			for step := int64(1); step <= 2 && grads[i] != nil; step++ {
				OptimizerStep(o, step, q, q.Grad(), qs[:]...)
			}
			w, _ := ToSlice[float32](q)
			one = append(one, w)
		}
		stepped := make([]bool, len(batch))
		for step := int64(1); step <= 2; step++ {
			for i := range batch {
				batch[i].Step = step
			}
			OptimizerStepParams(o, batch, stepped)
		}
		if !slices.Equal(stepped, []bool{true, false, true}) {
			t.Errorf("%s: stepped %v, want [true false true]", name, stepped)
		}
		for i, p := range batch {
			if got, _ := ToSlice[float32](p.Param); !slices.Equal(got, one[i]) {
				t.Errorf("%s: parameter %d = %v, OptimizerStep gives %v", name, i, got, one[i])
			}
		}
		before := make([][]float32, len(batch))
		for i, p := range batch {
			before[i], _ = ToSlice[float32](p.Param)
		}
		batch[2].States = [3]*Tensor{Zeros([]int64{5}), Zeros([]int64{5}), Zeros([]int64{5})}
		if err := Try(func() { OptimizerStepParams(o, batch, nil) }); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: misshapen state: %v, want ErrInvalidArgument", name, err)
		}
		for i, p := range batch {
			if got, _ := ToSlice[float32](p.Param); !slices.Equal(got, before[i]) {
				t.Errorf("%s: a failed step moved parameter %d: %v -> %v", name, i, before[i], got)
			}
		}
	}
}
