package nn_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// optimizerKinds builds each rule with its state-carrying options on (momentum, AMSGrad, lr
// decay), a second group with its own learning rate, and unusual hyperparameters.
var optimizerKinds = []struct {
	name string
	make func(g0, g1 []nn.NamedParameter) (*nn.Optimizer, error)
}{
	{"SGD", func(g0, g1 []nn.NamedParameter) (*nn.Optimizer, error) {
		return withGroup(nn.NewSGD(nn.ParamList(g0), nn.SGDOptions{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3}))(g1)
	}},
	{"Adam", func(g0, g1 []nn.NamedParameter) (*nn.Optimizer, error) {
		o := nn.DefaultAdamOptions()
		o.LR, o.AMSGrad = 0.01, true
		return withGroup(nn.NewAdam(nn.ParamList(g0), o))(g1)
	}},
	{"AdamW", func(g0, g1 []nn.NamedParameter) (*nn.Optimizer, error) {
		o := nn.DefaultAdamWOptions()
		o.LR, o.Beta1 = 0.02, 0.8
		return withGroup(nn.NewAdamW(nn.ParamList(g0), o))(g1)
	}},
	{"Adagrad", func(g0, g1 []nn.NamedParameter) (*nn.Optimizer, error) {
		o := nn.DefaultAdagradOptions()
		o.LRDecay, o.InitialAccumulatorValue = 0.1, 0.5
		return withGroup(nn.NewAdagrad(nn.ParamList(g0), o))(g1)
	}},
}

func withGroup(o *nn.Optimizer, err error) func([]nn.NamedParameter) (*nn.Optimizer, error) {
	return func(g1 []nn.NamedParameter) (*nn.Optimizer, error) {
		if err != nil {
			return nil, err
		}
		return o, o.AddParamGroup(nn.ParamGroup{Params: g1, LR: 0.003, WeightDecay: 0.01})
	}
}

// resumeCase is a model, its optimizer and fixed batches.
type resumeCase struct {
	model *nn.Sequential
	opt   *nn.Optimizer
	x, y  *cgotorch.Tensor
}

func newResumeCase(t *testing.T, kind int) *resumeCase {
	t.Helper()
	cgotorch.ManualSeed(11)
	m := newMLP()
	ps := m.Parameters() // the first layer in group 0, the second in group 1
	opt, err := optimizerKinds[kind].make(ps[:2], ps[2:])
	if err != nil {
		t.Fatal(err)
	}
	return &resumeCase{model: m, opt: opt, x: cgotorch.Randn([]int64{16, 4}), y: cgotorch.Randn([]int64{16, 1})}
}

// steps takes n steps, the batch scaled by a factor per step so every step differs.
func (c *resumeCase) steps(t *testing.T, from, n int) {
	t.Helper()
	for s := from; s < from+n; s++ {
		c.opt.ZeroGrad()
		x := c.x.MulScalar(1 + 0.1*float64(s))
		nn.MSE(nn.ReduceMean)(c.model.Forward(x), c.y).Backward()
		if err := c.opt.Step(); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *resumeCase) params(t *testing.T) []float32 {
	t.Helper()
	var out []float32
	for _, p := range c.model.Parameters() {
		v, err := cgotorch.ToSlice[float32](p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v...)
	}
	return out
}

// Saving after 3 steps and loading into an optimizer built anew (as a new process would)
// continues with the numbers of the uninterrupted run, to the bit, for every rule.
func TestOptimizerStateResumesExactly(t *testing.T) {
	for kind, k := range optimizerKinds {
		t.Run(k.name, func(t *testing.T) {
			c := newResumeCase(t, kind)
			c.steps(t, 0, 3)
			var model, opt bytes.Buffer
			if err := nn.SaveState(&model, c.model); err != nil {
				t.Fatal(err)
			}
			if err := c.opt.SaveState(&opt); err != nil {
				t.Fatal(err)
			}
			c.steps(t, 3, 4)
			want := c.params(t)

			fresh := newResumeCase(t, kind)
			if err := nn.LoadState(bytes.NewReader(model.Bytes()), fresh.model); err != nil {
				t.Fatal(err)
			}
			without := newResumeCase(t, kind)
			if err := nn.LoadState(bytes.NewReader(model.Bytes()), without.model); err != nil {
				t.Fatal(err)
			}
			if err := fresh.opt.LoadState(bytes.NewReader(opt.Bytes())); err != nil {
				t.Fatal(err)
			}
			fresh.steps(t, 3, 4)
			if got := fresh.params(t); !slices.Equal(got, want) {
				t.Errorf("resumed run differs from the uninterrupted one")
			}
			// The optimizer's state is what makes the difference: without it the run differs.
			without.steps(t, 3, 4)
			if slices.Equal(without.params(t), want) {
				t.Errorf("a run resumed without the optimizer's state gives the same numbers: the test cannot tell")
			}
		})
	}
}

// The groups' learning rates come back, as torch.optim's load_state_dict restores them.
func TestOptimizerStateRestoresLearningRates(t *testing.T) {
	c := newResumeCase(t, 1)
	c.opt.Groups()[0].LR = 0.25
	c.opt.Groups()[1].WeightDecay = 0.5
	var buf bytes.Buffer
	if err := c.opt.SaveState(&buf); err != nil {
		t.Fatal(err)
	}
	fresh := newResumeCase(t, 1)
	if err := fresh.opt.LoadState(&buf); err != nil {
		t.Fatal(err)
	}
	if g := fresh.opt.Groups(); g[0].LR != 0.25 || g[1].LR != 0.003 || g[1].WeightDecay != 0.5 {
		t.Errorf("groups after LoadState: lr %v, %v; weight decay %v", g[0].LR, g[1].LR, g[1].WeightDecay)
	}
}

// A state that does not fit is refused, and the optimizer keeps its own: the run goes on as if
// nothing had been tried.
func TestOptimizerStateMismatchChangesNothing(t *testing.T) {
	saved := func(t *testing.T, kind int) []byte {
		c := newResumeCase(t, kind)
		c.steps(t, 0, 2)
		return stateOf(t)(c.opt, nil)
	}
	adamOther := func() (*nn.Optimizer, error) {
		o := nn.DefaultAdamOptions()
		o.LR, o.AMSGrad, o.Beta2 = 0.01, true, 0.99
		m := newMLP()
		return withGroup(nn.NewAdam(nn.ParamList(m.Parameters()[:2]), o))(m.Parameters()[2:])
	}
	cases := []struct {
		name string
		data func(t *testing.T) []byte
		kind error
	}{
		{"another rule", func(t *testing.T) []byte { return saved(t, 0) }, cgotorch.ErrInvalidArgument},
		{"other betas", func(t *testing.T) []byte { return stateOf(t)(adamOther()) }, cgotorch.ErrInvalidArgument},
		{"other parameters", func(t *testing.T) []byte {
			m := nn.NewSequential(nn.NewLinear(4, 8, true), &nn.ReLU{}, nn.NewLinear(8, 2, true))
			o := nn.DefaultAdamOptions()
			o.LR, o.AMSGrad = 0.01, true
			return stateOf(t)(withGroup(nn.NewAdam(nn.ParamList(m.Parameters()[:2]), o))(m.Parameters()[2:]))
		}, cgotorch.ErrInvalidArgument},
		{"model state, not an optimizer's", func(t *testing.T) []byte {
			var buf bytes.Buffer
			if err := nn.SaveState(&buf, newMLP()); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}, cgotorch.ErrInvalidArgument},
		{"truncated", func(t *testing.T) []byte {
			b := saved(t, 1)
			return b[:len(b)-9]
		}, nn.ErrFormat},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.data(t)
			ref, c := newResumeCase(t, 1), newResumeCase(t, 1)
			ref.steps(t, 0, 2)
			c.steps(t, 0, 2)
			err := c.opt.LoadState(bytes.NewReader(data))
			if !errors.Is(err, tc.kind) {
				t.Fatalf("LoadState: %v, want %v", err, tc.kind)
			}
			ref.steps(t, 2, 2)
			c.steps(t, 2, 2)
			if !slices.Equal(c.params(t), ref.params(t)) {
				t.Errorf("a refused LoadState changed the optimizer")
			}
		})
	}
}

// stateOf(t)(opt, err) is what opt.SaveState writes.
func stateOf(t *testing.T) func(*nn.Optimizer, error) []byte {
	return func(opt *nn.Optimizer, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := opt.SaveState(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
}

func TestOptimizerStateNeedsUniqueNames(t *testing.T) {
	a, b := nn.NewLinear(2, 2, false), nn.NewLinear(2, 2, false)
	opt, err := nn.NewSGD(nn.ParamList(append(a.Parameters(), b.Parameters()...)), nn.SGDOptions{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := opt.SaveState(&buf); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("SaveState with two parameters named %q: %v", a.Parameters()[0].Name, err)
	}
	if err := opt.LoadState(bytes.NewReader(torchOptimizerState(t, "sgd"))); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("LoadState with two parameters named %q: %v", a.Parameters()[0].Name, err)
	}
}
