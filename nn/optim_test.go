package nn_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// The optimizers match torch.optim after every one of 6 steps within 1e-5 absolute plus 1e-4
// relative (float32; the relative part covers the rounding of fused ops such as addcmul that
// gorec composes from two).
const (
	optAbs = 1e-5
	optRel = 1e-4
)

func newMLP() *nn.Sequential {
	return nn.NewSequential(nn.NewLinear(4, 8, true), &nn.ReLU{}, nn.NewLinear(8, 1, true))
}

func optimizerFor(t testing.TB, c *refCase, model nn.Module) *nn.Optimizer {
	t.Helper()
	params := model.Parameters()
	lr, wd := cfgFloat(c, "lr", 0), cfgFloat(c, "weight_decay", 0)
	var groups []nn.ParamGroup
	if gs, ok := c.Config["groups"].([]any); ok {
		byName := map[string]nn.NamedParameter{}
		for _, p := range params {
			byName[p.Name] = p
		}
		for _, g := range gs {
			g := g.(map[string]any)
			var ps []nn.NamedParameter
			for _, n := range g["params"].([]any) {
				ps = append(ps, byName[n.(string)])
			}
			groups = append(groups, nn.ParamGroup{Params: ps, LR: g["lr"].(float64), WeightDecay: g["weight_decay"].(float64)})
		}
		params = groups[0].Params
		lr, wd = groups[0].LR, groups[0].WeightDecay
		groups = groups[1:]
	}
	var opt *nn.Optimizer
	var err error
	switch c.Config["optimizer"] {
	case "sgd":
		opt, err = nn.NewSGD(nn.ParamList(params), nn.SGDOptions{LR: lr, Momentum: cfgFloat(c, "momentum", 0),
			Dampening: cfgFloat(c, "dampening", 0), WeightDecay: wd, Nesterov: cfgBool(c, "nesterov")})
	case "adam", "adamw":
		betas := c.Config["betas"].([]any)
		o := nn.AdamOptions{LR: lr, Beta1: betas[0].(float64), Beta2: betas[1].(float64),
			Eps: cfgFloat(c, "eps", 0), WeightDecay: wd, AMSGrad: cfgBool(c, "amsgrad")}
		if c.Config["optimizer"] == "adam" {
			opt, err = nn.NewAdam(nn.ParamList(params), o)
		} else {
			opt, err = nn.NewAdamW(nn.ParamList(params), o)
		}
	case "adagrad":
		opt, err = nn.NewAdagrad(nn.ParamList(params), nn.AdagradOptions{LR: lr, LRDecay: cfgFloat(c, "lr_decay", 0),
			WeightDecay: wd, InitialAccumulatorValue: cfgFloat(c, "initial_accumulator_value", 0), Eps: cfgFloat(c, "eps", 0)})
	default:
		t.Fatalf("optimizer %v", c.Config["optimizer"])
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if err := opt.AddParamGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	return opt
}

// optimizerCases are the optimizer cases of nn.json (gen_nn.py's OPTIMIZERS).
var optimizerCases = []string{"sgd", "sgd_momentum_nesterov_wd", "sgd_momentum_dampening", "sgd_set_lr",
	"sgd_groups", "adam", "adam_wd_amsgrad", "adamw", "adamw_set_lr", "adagrad", "adagrad_decay_wd_init"}

func TestOptimizersMatchPyTorch(t *testing.T) {
	mlp := refCaseNamed(t, "mlp")
	for _, name := range optimizerCases {
		t.Run(name, func(t *testing.T) {
			c, model, opt := optimizerCase(t, mlp, name, mlp, "init.")
			trainLikeTorch(t, mlp, c, model, opt, 0, int(cfgFloat(mlp, "steps", 0)))
		})
	}
}

// optimizerCase is the optimizer case name, the MLP with the state from's tensors prefix+...,
// and the case's optimizer over it.
func optimizerCase(t *testing.T, mlp *refCase, name string, from *refCase, prefix string) (*refCase, nn.Layer, *nn.Optimizer) {
	t.Helper()
	c := refCaseNamed(t, "opt_"+name)
	if from == nil {
		from = c
	}
	model := newMLP()
	from.setState(t, model, prefix)
	return c, model, optimizerFor(t, c, model)
}

// trainLikeTorch takes the steps [from, to) of the optimizer case c (its batches in mlp, its
// learning rate changes) and checks the loss and the parameters after each against torch's.
func trainLikeTorch(t *testing.T, mlp, c *refCase, model nn.Layer, opt *nn.Optimizer, from, to int) {
	t.Helper()
	setLR, _ := c.Config["set_lr"].(map[string]any)
	loss := nn.BCEWithLogits(nn.ReduceMean)
	for step := from; step < to; step++ {
		if lr, ok := setLR[strconv.Itoa(step)]; ok {
			opt.SetLR(lr.(float64))
		}
		b := step % 3
		opt.ZeroGrad()
		l := loss(model.Forward(mlp.tensor(t, fmt.Sprint("x", b))), mlp.tensor(t, fmt.Sprint("y", b)))
		l.Backward()
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		c.checkClose(t, fmt.Sprint("loss ", step), l, fmt.Sprint("loss", step), optAbs, optRel)
		for _, p := range model.Parameters() {
			key := fmt.Sprintf("step%d.%s", step, p.Name)
			c.checkClose(t, key, p.Tensor, key, optAbs, optRel)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

func TestOptimizerOptionErrors(t *testing.T) {
	ps := newMLP().Parameters()
	for name, f := range map[string]func() (*nn.Optimizer, error){
		"negative lr": func() (*nn.Optimizer, error) { return nn.NewSGD(nn.ParamList(ps), nn.SGDOptions{LR: -1}) },
		"negative momentum": func() (*nn.Optimizer, error) {
			return nn.NewSGD(nn.ParamList(ps), nn.SGDOptions{LR: 1, Momentum: -0.1})
		},
		"nesterov without": func() (*nn.Optimizer, error) {
			return nn.NewSGD(nn.ParamList(ps), nn.SGDOptions{LR: 1, Nesterov: true})
		},
		"nesterov dampening": func() (*nn.Optimizer, error) {
			return nn.NewSGD(nn.ParamList(ps), nn.SGDOptions{LR: 1, Momentum: 0.9, Dampening: 0.1, Nesterov: true})
		},
		"beta1 = 1": func() (*nn.Optimizer, error) {
			o := nn.DefaultAdamOptions()
			o.Beta1 = 1
			return nn.NewAdam(nn.ParamList(ps), o)
		},
		"negative eps": func() (*nn.Optimizer, error) {
			o := nn.DefaultAdamWOptions()
			o.Eps = -1
			return nn.NewAdamW(nn.ParamList(ps), o)
		},
		"negative weight decay": func() (*nn.Optimizer, error) {
			o := nn.DefaultAdagradOptions()
			o.WeightDecay = -1
			return nn.NewAdagrad(nn.ParamList(ps), o)
		},
		"integer parameter": func() (*nn.Optimizer, error) {
			return nn.NewSGD(nn.ParamList{{Name: "i", Tensor: cgotorch.Zeros([]int64{2}, cgotorch.WithDType(cgotorch.Int64))}}, nn.SGDOptions{LR: 1})
		},
	} {
		if _, err := f(); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	opt, err := nn.NewSGD(nn.ParamList(ps[:2]), nn.SGDOptions{LR: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := opt.AddParamGroup(nn.ParamGroup{Params: ps[1:], LR: 1}); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("parameter in two groups: %v", err)
	}
	if len(opt.Groups()) != 1 {
		t.Errorf("a failed AddParamGroup added a group")
	}
}

// A module shared under two names lists its parameters twice; as torch's parameters() does, the
// optimizer keeps one of each tensor and steps it once.
func TestOptimizerCollapsesRepeatedParameters(t *testing.T) {
	shared := nn.NewLinear(3, 2, true)
	model := &nn.Container{}
	model.Add("a", shared)
	model.Add("b", shared)
	twin := nn.NewLinear(3, 2, true)
	cgotorch.NoGrad(func() {
		twin.Weight.CopyFrom(shared.Weight)
		twin.Bias.CopyFrom(shared.Bias)
	})
	opt, err := nn.NewAdam(model, nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(opt.Groups()[0].Params); n != 2 {
		t.Fatalf("the group holds %d parameters; want 2 (weight and bias once each)", n)
	}
	topt, _ := nn.NewAdam(twin, nn.DefaultAdamOptions())
	x := cgotorch.MustFromSlice([]float32{1, -2, 3, 0.5, 0, -1}, 2, 3)
	for _, step := range []struct {
		m   *nn.Linear
		opt *nn.Optimizer
	}{{shared, opt}, {twin, topt}} {
		for i := 0; i < 3; i++ {
			step.opt.ZeroGrad()
			loss := step.m.Forward(x).Sum()
			loss.Backward()
			if err := step.opt.Step(); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, want := values(t, shared.Weight), values(t, twin.Weight)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("shared weight %v; want %v (stepped once per step)", got, want)
		}
	}
}

func TestOptimizerSkipsParametersWithoutGrad(t *testing.T) {
	l := nn.NewLinear(3, 2, true)
	before := values(t, l.Weight)
	opt, err := nn.NewAdam(l, nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	after := values(t, l.Weight)
	for i := range before {
		if before[i] != after[i] {
			t.Fatal("a parameter without gradient changed")
		}
	}
}

func TestOptimizerStepOnClosedParameterIsAnError(t *testing.T) {
	l := nn.NewLinear(3, 2, true)
	opt, _ := nn.NewSGD(l, nn.SGDOptions{LR: 0.1})
	l.Weight.Close()
	if err := opt.Step(); !errors.Is(err, cgotorch.ErrClosed) {
		t.Errorf("Step with a closed parameter: %v", err)
	}
}

func TestSetLR(t *testing.T) {
	opt, _ := nn.NewSGD(newMLP(), nn.SGDOptions{LR: 0.1})
	opt.SetLR(0.5)
	if opt.LR() != 0.5 || opt.Groups()[0].LR != 0.5 {
		t.Errorf("LR %v", opt.LR())
	}
}
