package nn_test

import (
	"math"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// twoSteps trains a fresh seeded Linear for two steps with opt's rule and returns its weights.
func twoSteps(t *testing.T, newOpt func(nn.Trainable) (*nn.Optimizer, error)) []float32 {
	t.Helper()
	cgotorch.ManualSeed(11)
	l := nn.NewLinear(3, 2, true)
	opt, err := newOpt(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range [][]float32{{1, -2, 3}, {-0.5, 4, 0.25}} {
		opt.ZeroGrad()
		l.Forward(cgotorch.MustFromSlice(x, 1, 3)).Square().Sum().Backward()
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
	}
	w, err := cgotorch.ToSlice[float32](l.Weight)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A zero option field means PyTorch's default, as in embedding.Config: AdamOptions{LR: 1e-3}
// is DefaultAdamOptions() (it had betas 0 and eps 0 before), and so on for every rule.
func TestZeroOptionFieldsMeanTheDefaults(t *testing.T) {
	cases := []struct {
		name          string
		partial, full func(nn.Trainable) (*nn.Optimizer, error)
	}{
		{"Adam", func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewAdam(m, nn.AdamOptions{LR: 1e-3}) },
			func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewAdam(m, nn.DefaultAdamOptions()) }},
		{"Adam zero value", func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewAdam(m, nn.AdamOptions{}) },
			func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewAdam(m, nn.DefaultAdamOptions()) }},
		{"AdamW", func(m nn.Trainable) (*nn.Optimizer, error) {
			return nn.NewAdamW(m, nn.AdamOptions{WeightDecay: 1e-2})
		}, func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewAdamW(m, nn.DefaultAdamWOptions()) }},
		{"Adagrad", func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewAdagrad(m, nn.AdagradOptions{}) },
			func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewAdagrad(m, nn.DefaultAdagradOptions()) }},
		{"SGD", func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewSGD(m, nn.SGDOptions{Momentum: 0.9}) },
			func(m nn.Trainable) (*nn.Optimizer, error) {
				return nn.NewSGD(m, nn.SGDOptions{LR: 0.01, Momentum: 0.9})
			}},
	}
	for _, c := range cases {
		if a, b := twoSteps(t, c.partial), twoSteps(t, c.full); !slices.Equal(a, b) {
			t.Errorf("%s: zero fields give %v, the defaults %v", c.name, a, b)
		}
	}
}

// Zero() asks for an exact 0 where 0 means the default.
func TestZeroAsksForZero(t *testing.T) {
	cgotorch.ManualSeed(11)
	before, _ := cgotorch.ToSlice[float32](nn.NewLinear(3, 2, true).Weight)
	frozen := twoSteps(t, func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewAdam(m, nn.AdamOptions{LR: nn.Zero()}) })
	if !slices.Equal(frozen, before) {
		t.Errorf("Adam with LR Zero() moved the weights: %v, were %v", frozen, before)
	}
	noMomentum := twoSteps(t, func(m nn.Trainable) (*nn.Optimizer, error) {
		return nn.NewAdam(m, nn.AdamOptions{Beta1: nn.Zero()})
	})
	if slices.Equal(noMomentum, twoSteps(t, func(m nn.Trainable) (*nn.Optimizer, error) { return nn.NewAdam(m, nn.AdamOptions{}) })) {
		t.Error("Adam with Beta1 Zero() steps as with the default 0.9")
	}
	if opt, err := nn.NewSGD(nn.ParamList(nil), nn.SGDOptions{LR: nn.Zero()}); err != nil || opt.LR() != 0 || math.Signbit(opt.LR()) {
		t.Errorf("SGD with LR Zero(): lr %v (%v), want +0", opt.LR(), err)
	}
}

// A param group's zero LR and weight decay are the optimizer's, as a torch param group without
// them takes the optimizer's defaults; Zero() asks for 0.
func TestParamGroupZeroMeansTheOptimizers(t *testing.T) {
	a, b, c := nn.NewLinear(1, 1, false), nn.NewLinear(1, 1, false), nn.NewLinear(1, 1, false)
	opt, err := nn.NewSGD(a, nn.SGDOptions{LR: 0.2, WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if err := opt.AddParamGroup(nn.ParamGroup{Params: b.Parameters()}); err != nil {
		t.Fatal(err)
	}
	if err := opt.AddParamGroup(nn.ParamGroup{Params: c.Parameters(), LR: nn.Zero(), WeightDecay: nn.Zero()}); err != nil {
		t.Fatal(err)
	}
	g := opt.Groups()
	if g[1].LR != 0.2 || g[1].WeightDecay != 0.1 || g[2].LR != 0 || g[2].WeightDecay != 0 {
		t.Errorf("groups' (lr, weight decay): (%v, %v), (%v, %v)", g[1].LR, g[1].WeightDecay, g[2].LR, g[2].WeightDecay)
	}
}

// &LeakyReLU{} is torch's LeakyReLU() (slope 0.01); Slope Zero() makes a ReLU.
func TestLeakyReLUZeroSlopeIsTorchs(t *testing.T) {
	x := cgotorch.MustFromSlice([]float32{-2, 3})
	got, _ := cgotorch.ToSlice[float32]((&nn.LeakyReLU{}).Forward(x))
	relu, _ := cgotorch.ToSlice[float32]((&nn.LeakyReLU{Slope: nn.Zero()}).Forward(x))
	if !slices.Equal(got, []float32{-0.02, 3}) || !slices.Equal(relu, []float32{0, 3}) {
		t.Errorf("LeakyReLU{}: %v; with Slope Zero(): %v", got, relu)
	}
}
