package nn_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// Layers and losses match PyTorch within 1e-5 absolute plus 1e-5 relative (float32).
const (
	layerAbs = 1e-5
	layerRel = 1e-5
)

func intsOf(v []any) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x.(float64))
	}
	return out
}

// layerFor builds the module of a layer case (its state comes from the case's "param." tensors).
func layerFor(t *testing.T, c *refCase) nn.Layer {
	name := c.Name
	switch {
	case strings.HasPrefix(name, "linear"):
		w := c.Tensors["param.weight"]
		_, hasBias := c.Tensors["param.bias"]
		return nn.NewLinear(int(w.Shape[1]), int(w.Shape[0]), hasBias)
	case strings.HasPrefix(name, "layernorm"):
		return nn.NewLayerNorm(intsOf(c.Config["shape"].([]any))...)
	case strings.HasPrefix(name, "batchnorm"):
		bn := nn.NewBatchNorm1d(int(c.Tensors["param.weight"].Shape[0]))
		bn.Momentum = cfgFloat(c, "momentum", 0.1)
		bn.Train(strings.HasSuffix(name, "_train"))
		return bn
	case strings.HasPrefix(name, "dropout"):
		d := nn.NewDropout(cfgFloat(c, "p", 0))
		d.Train(strings.HasSuffix(name, "_train"))
		return d
	case name == "relu":
		return &nn.ReLU{}
	case name == "sigmoid":
		return &nn.Sigmoid{}
	case name == "tanh":
		return &nn.Tanh{}
	case strings.HasPrefix(name, "leaky_relu"):
		return nn.NewLeakyReLU(cfgFloat(c, "slope", 0.01))
	}
	t.Fatalf("no layer for case %s", name)
	return nil
}

func TestLayersMatchPyTorch(t *testing.T) {
	names := []string{"linear", "linear_nobias", "layernorm", "layernorm2d",
		"batchnorm_train", "batchnorm_eval", "batchnorm3d_train", "batchnorm3d_eval",
		"dropout_p0_train", "dropout_eval", "relu", "sigmoid", "tanh", "leaky_relu", "leaky_relu_0.2"}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := refCaseNamed(t, name)
			m := layerFor(t, c)
			c.setState(t, m, "param.")
			x := c.tensor(t, "x").SetRequiresGrad(true)
			y := m.Forward(x)
			c.checkClose(t, "y", y, "y", layerAbs, layerRel)
			y.Mul(c.tensor(t, "gy")).Sum().Backward()
			c.checkClose(t, "grad x", x.Grad(), "grad.x", layerAbs, layerRel)
			for _, p := range m.Parameters() {
				c.checkClose(t, "grad "+p.Name, p.Tensor.Grad(), "grad."+p.Name, layerAbs, layerRel)
			}
			for _, b := range nn.Buffers(m) {
				c.checkClose(t, b.Name, b.Tensor, "after."+b.Name, layerAbs, layerRel)
			}
		})
	}
}

func TestLossesMatchPyTorch(t *testing.T) {
	for _, red := range []string{"mean", "sum"} {
		r := nn.ReduceMean
		if red == "sum" {
			r = nn.ReduceSum
		}
		for name, loss := range map[string]nn.Loss{
			"bce_with_logits": nn.BCEWithLogits(r),
			"mse":             nn.MSE(r),
			"cross_entropy":   nn.CrossEntropy(r),
		} {
			t.Run(name+"_"+red, func(t *testing.T) {
				c := refCaseNamed(t, name+"_"+red)
				x := c.tensor(t, "x").SetRequiresGrad(true)
				l := loss(x, c.tensor(t, "target"))
				c.checkClose(t, "loss", l, "loss", layerAbs, layerRel)
				l.Backward()
				c.checkClose(t, "grad x", x.Grad(), "grad.x", layerAbs, layerRel)
			})
		}
	}
}

func TestLinearInit(t *testing.T) {
	cgotorch.ManualSeed(7)
	l := nn.NewLinear(16, 32, true)
	if !slices.Equal(l.Weight.Shape(), []int64{32, 16}) || !slices.Equal(l.Bias.Shape(), []int64{32}) {
		t.Fatalf("shapes %v %v", l.Weight.Shape(), l.Bias.Shape())
	}
	if !l.Weight.RequiresGrad() || !l.Bias.RequiresGrad() {
		t.Fatal("parameters must require grad")
	}
	// U(-1/4, 1/4): every value inside, and the extremes near the bounds.
	for _, p := range l.Parameters() {
		v := values(t, p.Tensor)
		lo, hi := v[0], v[0]
		for _, x := range v {
			lo, hi = min(lo, x), max(hi, x)
		}
		if lo < -0.25 || hi > 0.25 {
			t.Errorf("%s outside [-0.25, 0.25]: [%v, %v]", p.Name, lo, hi)
		}
		if p.Name == "weight" && (lo > -0.2 || hi < 0.2) {
			t.Errorf("%s does not spread over [-0.25, 0.25]: [%v, %v]", p.Name, lo, hi)
		}
	}
	if nb := nn.NewLinear(3, 2, false); nb.Bias != nil || len(nb.Parameters()) != 1 {
		t.Error("Linear without bias has a bias")
	}
}

func TestNewLinearFrom(t *testing.T) {
	w := cgotorch.MustFromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := cgotorch.MustFromSlice([]float32{0.5, -0.5})
	l, err := nn.NewLinearFrom(w, b)
	if err != nil {
		t.Fatal(err)
	}
	y := l.Forward(cgotorch.MustFromSlice([]float32{1, 0, -1}, 1, 3))
	if v := values(t, y); v[0] != -1.5 || v[1] != -2.5 {
		t.Errorf("forward %v", v)
	}
	// The layer holds copies: changing it leaves w alone.
	cgotorch.NoGrad(func() { l.Weight.Fill(0) })
	if values(t, w)[0] != 1 {
		t.Error("NewLinearFrom aliases its argument")
	}
	for _, bad := range []struct {
		w, b *cgotorch.Tensor
	}{
		{cgotorch.Ones([]int64{3}), nil},
		{cgotorch.Ones([]int64{2, 3}), cgotorch.Ones([]int64{3})},
		{cgotorch.Ones([]int64{2, 3}), cgotorch.Ones([]int64{2, 1})},
		{cgotorch.Ones([]int64{2, 3}, cgotorch.WithDType(cgotorch.Int64)), nil},
		{nil, nil},
	} {
		if _, err := nn.NewLinearFrom(bad.w, bad.b); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("NewLinearFrom(%v, %v): %v", bad.w, bad.b, err)
		}
	}
}

func TestDropoutTrainingZeroesAndScales(t *testing.T) {
	cgotorch.ManualSeed(3)
	d := nn.NewDropout(0.5)
	y := d.Forward(cgotorch.Ones([]int64{1000}))
	zeros := 0
	for _, v := range values(t, y) {
		switch v {
		case 0:
			zeros++
		case 2:
		default:
			t.Fatalf("value %v: want 0 or 2", v)
		}
	}
	if zeros < 400 || zeros > 600 {
		t.Errorf("%d of 1000 zeroed with p = 0.5", zeros)
	}
	if v := values(t, nn.NewDropout(1).Forward(cgotorch.Ones([]int64{10}))); v[3] != 0 {
		t.Errorf("p = 1: %v", v)
	}
}

func TestBatchNormErrors(t *testing.T) {
	bn := nn.NewBatchNorm1d(3)
	if err := cgotorch.Try(func() { bn.Forward(cgotorch.Ones([]int64{1, 3})) }); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("one value per channel in training: %v", err)
	}
	if err := cgotorch.Try(func() { bn.Forward(cgotorch.Ones([]int64{3})) }); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("1-D input: %v", err)
	}
	bn.Train(false)
	if err := cgotorch.Try(func() { bn.Forward(cgotorch.Ones([]int64{1, 3})) }); err != nil {
		t.Errorf("one sample in eval: %v", err)
	}
	if err := cgotorch.Try(func() { bn.Forward(cgotorch.Ones([]int64{2, 4})) }); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("wrong channel count: %v", err)
	}
}

// LayerNorm and BatchNorm1d refuse inputs PyTorch refuses, with a panic wrapping
// ErrInvalidArgument, where broadcasting would otherwise give an output: LayerNorm(1) on [2, 4]
// (torch: "Given normalized_shape=[1], expected input with shape [*, 1], but got input of
// size[2, 4]"), BatchNorm1d(4) in eval mode on 1 channel (torch: "running_mean should contain 1
// elements not 4"). The shapes torch accepts still work.
func TestNormLayersCheckInputShape(t *testing.T) {
	eval := func(m nn.Layer) nn.Layer { m.Train(false); return m }
	bad := []struct {
		name string
		m    nn.Layer
		x    []int64
	}{
		{"LayerNorm(1) on [2 4]", nn.NewLayerNorm(1), []int64{2, 4}},
		{"LayerNorm(2, 4) on [3 1 4]", nn.NewLayerNorm(2, 4), []int64{3, 1, 4}},
		{"LayerNorm(2, 4) on [4]", nn.NewLayerNorm(2, 4), []int64{4}},
		{"LayerNorm(2, 4) on [2 4 1]", nn.NewLayerNorm(2, 4), []int64{2, 4, 1}},
		{"BatchNorm1d(4) eval on [3 1]", eval(nn.NewBatchNorm1d(4)), []int64{3, 1}},
		{"BatchNorm1d(4) eval on [3 1 5]", eval(nn.NewBatchNorm1d(4)), []int64{3, 1, 5}},
		{"BatchNorm1d(4) train on [3 1 5]", nn.NewBatchNorm1d(4), []int64{3, 1, 5}},
		{"BatchNorm1d(4) train on [3 2]", nn.NewBatchNorm1d(4), []int64{3, 2}},
		{"BatchNorm1d(4) eval on [3 4 5 6]", eval(nn.NewBatchNorm1d(4)), []int64{3, 4, 5, 6}},
		{"BatchNorm1d(4) eval on [4]", eval(nn.NewBatchNorm1d(4)), []int64{4}},
	}
	for _, c := range bad {
		var out *cgotorch.Tensor
		err := cgotorch.Try(func() { out = c.m.Forward(cgotorch.Randn(c.x)) })
		if !errors.Is(err, cgotorch.ErrInvalidArgument) {
			if err == nil {
				t.Errorf("%s: accepted, output shape %v (torch raises)", c.name, out.Shape())
			} else {
				t.Errorf("%s: %v, want an error wrapping ErrInvalidArgument", c.name, err)
			}
		}
	}
	good := []struct {
		name string
		m    nn.Layer
		x    []int64
	}{
		{"LayerNorm(4) on [4]", nn.NewLayerNorm(4), []int64{4}},
		{"LayerNorm(4) on [2 3 4]", nn.NewLayerNorm(4), []int64{2, 3, 4}},
		{"LayerNorm(2, 4) on [2 4]", nn.NewLayerNorm(2, 4), []int64{2, 4}},
		{"LayerNorm(2, 4) on [3 2 4]", nn.NewLayerNorm(2, 4), []int64{3, 2, 4}},
		{"BatchNorm1d(4) eval on [3 4]", eval(nn.NewBatchNorm1d(4)), []int64{3, 4}},
		{"BatchNorm1d(4) eval on [3 4 5]", eval(nn.NewBatchNorm1d(4)), []int64{3, 4, 5}},
		{"BatchNorm1d(4) train on [3 4]", nn.NewBatchNorm1d(4), []int64{3, 4}},
		{"BatchNorm1d(4) train on [1 4 5]", nn.NewBatchNorm1d(4), []int64{1, 4, 5}},
	}
	for _, c := range good {
		var out *cgotorch.Tensor
		if err := cgotorch.Try(func() { out = c.m.Forward(cgotorch.Randn(c.x)) }); err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if !slices.Equal(out.Shape(), c.x) {
			t.Errorf("%s: output shape %v", c.name, out.Shape())
		}
	}
}

// ---- the Module contract ------------------------------------------------------------------------

func names(ps []nn.NamedParameter) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func sameNames(t *testing.T, what string, got []nn.NamedParameter, want ...string) {
	t.Helper()
	g := names(got)
	if strings.Join(g, ",") != strings.Join(want, ",") {
		t.Errorf("%s: %v, want %v", what, g, want)
	}
}

// tower is a model of its own: a Container with two Sequentials and a stepper-holding child.
type tower struct {
	nn.Container
	bottom, top *nn.Sequential
}

func newTower(s *fakeSparse) *tower {
	tw := &tower{
		bottom: nn.NewSequential(nn.NewLinear(4, 3, true), nn.NewBatchNorm1d(3), &nn.ReLU{}, nn.NewDropout(0.5)),
		top:    nn.NewSequential(nn.NewLinear(3, 1, false)),
	}
	tw.Add("bottom", tw.bottom)
	tw.Add("sparse", s)
	tw.Add("top", tw.top)
	return tw
}

func (tw *tower) Forward(x *cgotorch.Tensor) *cgotorch.Tensor {
	return tw.top.Forward(tw.bottom.Forward(x))
}

// fakeSparse stands for the hash Embedding: no dense parameters, one Stepper.
type fakeSparse struct {
	nn.Stateless
	steps, zeroed int
	err           error
	lr            float64
}

func (f *fakeSparse) Forward(x *cgotorch.Tensor) *cgotorch.Tensor { return x }
func (f *fakeSparse) Steppers() []nn.Stepper                      { return []nn.Stepper{f} }
func (f *fakeSparse) Step() error                                 { f.steps++; return f.err }
func (f *fakeSparse) ZeroGrad()                                   { f.zeroed++ }
func (f *fakeSparse) LR() float64                                 { return f.lr }
func (f *fakeSparse) SetLR(lr float64) error                      { f.lr = lr; return f.err }

func TestSequentialNamesAndOrder(t *testing.T) {
	s := nn.NewSequential(nn.NewLinear(4, 8, true), &nn.ReLU{}, nn.NewLayerNorm(8), nn.NewLinear(8, 1, true))
	sameNames(t, "Sequential", s.Parameters(), "0.weight", "0.bias", "2.weight", "2.bias", "3.weight", "3.bias")
	if s.Len() != 4 || s.Children()[1].Name != "1" {
		t.Errorf("children %v", s.Children())
	}
	// Parameters are the modules' own tensors, in order.
	if s.Parameters()[0].Tensor != s.At(0).(*nn.Linear).Weight {
		t.Error("Parameters does not return the layer's tensor")
	}
	tw := newTower(&fakeSparse{})
	sameNames(t, "tower", tw.Parameters(), "bottom.0.weight", "bottom.0.bias", "bottom.1.weight", "bottom.1.bias", "top.0.weight")
	sameNames(t, "tower buffers", nn.Buffers(tw), "bottom.1.running_mean", "bottom.1.running_var", "bottom.1.num_batches_tracked")
	sameNames(t, "tower state", nn.StateDict(tw), "bottom.0.weight", "bottom.0.bias", "bottom.1.weight", "bottom.1.bias",
		"top.0.weight", "bottom.1.running_mean", "bottom.1.running_var", "bottom.1.num_batches_tracked")
}

func TestTrainEvalPropagates(t *testing.T) {
	tw := newTower(&fakeSparse{})
	modes := func() []bool {
		bn := tw.bottom.At(1).(*nn.BatchNorm1d)
		d := tw.bottom.At(3).(*nn.Dropout)
		return []bool{tw.Training(), tw.bottom.Training(), bn.Training(), d.Training(), tw.top.At(0).(*nn.Linear).Training()}
	}
	for _, m := range modes() {
		if !m {
			t.Fatalf("modules must start in training mode: %v", modes())
		}
	}
	tw.Train(false)
	for _, m := range modes() {
		if m {
			t.Fatalf("Train(false) did not reach every module: %v", modes())
		}
	}
	// In eval mode dropout is the identity and batch norm uses its running statistics, so the
	// output is deterministic.
	x := cgotorch.Randn([]int64{5, 4})
	a, b := values(t, tw.Forward(x)), values(t, tw.Forward(x))
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("eval forward is not deterministic")
		}
	}
	tw.Train(true)
	if !modes()[3] {
		t.Fatal("Train(true) did not reach the dropout")
	}
}

func TestZeroGrad(t *testing.T) {
	s := &fakeSparse{}
	tw := newTower(s)
	tw.Forward(cgotorch.Randn([]int64{6, 4})).Sum().Backward()
	nonzero := 0
	for _, p := range tw.Parameters() {
		if g := p.Tensor.Grad(); g != nil {
			if v, _ := g.Abs().Sum().Item(); v > 0 {
				nonzero++
			}
		}
	}
	if nonzero == 0 {
		t.Fatal("no gradient after backward")
	}
	tw.ZeroGrad()
	for _, p := range tw.Parameters() {
		if v, _ := p.Tensor.Grad().Abs().Sum().Item(); v != 0 {
			t.Errorf("%s: gradient %v after ZeroGrad", p.Name, v)
		}
	}
	// ZeroGrad reaches every child, the sparse one included.
	if s.zeroed != 1 {
		t.Errorf("ZeroGrad reached the sparse child %d times, want 1", s.zeroed)
	}
}

func TestStepperExtensionPoint(t *testing.T) {
	s := &fakeSparse{}
	tw := newTower(s)
	if st := nn.Steppers(tw); len(st) != 1 || st[0] != nn.Stepper(s) {
		t.Fatalf("Steppers = %v", st)
	}
	opt, err := nn.NewSGD(tw, nn.SGDOptions{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	opt.ZeroGrad()
	tw.Forward(cgotorch.Randn([]int64{6, 4})).Sum().Backward()
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	if s.steps != 1 || s.zeroed != 1 {
		t.Errorf("stepper stepped %d times, zeroed %d times; want 1, 1", s.steps, s.zeroed)
	}
	if err := opt.SetLR(0.5); err != nil || s.lr != 0.5 {
		t.Errorf("SetLR(0.5) gave the stepper %v (%v)", s.lr, err)
	}
	s.err = errors.New("table full")
	if err := opt.Step(); err == nil || !strings.Contains(err.Error(), "table full") {
		t.Errorf("stepper error not returned: %v", err)
	}
	if err := opt.SetLR(0.25); err == nil || !strings.Contains(err.Error(), "table full") {
		t.Errorf("stepper SetLR error not returned: %v", err)
	}
}

func TestContainerAddPanics(t *testing.T) {
	for _, name := range []string{"", "a.b", "dup"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%q) did not panic", name)
				}
			}()
			var c nn.Container
			c.Add("dup", &nn.ReLU{})
			c.Add(name, &nn.ReLU{})
		}()
	}
}
