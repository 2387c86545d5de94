package nn

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gorec/gorec/cgotorch"
)

// Linear is the affine map y = x Wᵀ + b of PyTorch's nn.Linear: x is [..., In], Weight is
// [Out, In], Bias is [Out] (nil without bias), y is [..., Out].
type Linear struct {
	Base
	Weight *Tensor
	Bias   *Tensor
}

// NewLinear returns a Linear layer initialised as PyTorch does: weight and bias uniform in
// [-1/sqrt(in), 1/sqrt(in)] (kaiming_uniform_ with a = sqrt(5), from libtorch's generator: see
// cgotorch.ManualSeed; after the same seed, torch.nn.Linear's values bit for bit). It panics when
// in or out is not positive.
func NewLinear(in, out int, bias bool) *Linear {
	if in <= 0 || out <= 0 {
		panic(fmt.Sprintf("nn: Linear(%d, %d): sizes must be positive", in, out))
	}
	bound := 1 / math.Sqrt(float64(in))
	l := &Linear{Weight: uniform([]int64{int64(out), int64(in)}, bound)}
	if bias {
		l.Bias = uniform([]int64{int64(out)}, bound)
	}
	return l
}

// uniform returns a new Float32 leaf requiring grad, uniform in [-bound, bound), with the values
// of torch's uniform_(-bound, bound) from the same generator state: it draws torch.rand's
// samples x and rounds x * (to - from) + from once, from the exact value (in double: the
// product of 24-bit x and float to - from is exact there, as is the sum), not twice.
func uniform(shape []int64, bound float64) *Tensor {
	r := cgotorch.Rand(shape)
	defer r.Close()
	b := float64(float32(bound)) // torch's from and to, as floats
	x, err := r.To(r.Device(), cgotorch.Float64)
	if err != nil {
		panic(err)
	}
	defer x.Close()
	u, err := x.MulScalarInPlace(2*b).SubScalarInPlace(b).To(x.Device(), cgotorch.Float32)
	if err != nil {
		panic(err)
	}
	defer u.Close()
	return u.Detach().SetRequiresGrad(true)
}

// NewLinearFrom returns a Linear layer holding copies of weight [out, in] and bias [out] (nil
// for none), which must be Float32 or Float64 tensors. It returns an error wrapping
// cgotorch.ErrInvalidArgument when the shapes or dtypes do not fit.
func NewLinearFrom(weight, bias *Tensor) (*Linear, error) {
	if err := checkFloat("weight", weight, 2); err != nil {
		return nil, err
	}
	l := &Linear{Weight: leafCopy(weight)}
	if bias != nil {
		if err := checkFloat("bias", bias, 1); err != nil {
			return nil, err
		}
		if bias.Size(0) != weight.Size(0) || bias.DType() != weight.DType() {
			return nil, fmt.Errorf("%w: Linear bias %v %v does not fit weight %v %v", cgotorch.ErrInvalidArgument,
				bias.Shape(), bias.DType(), weight.Shape(), weight.DType())
		}
		l.Bias = leafCopy(bias)
	}
	return l, nil
}

func checkFloat(name string, t *Tensor, dims int) error {
	if t == nil || t.Closed() {
		return fmt.Errorf("%w: %s is nil or closed", cgotorch.ErrInvalidArgument, name)
	}
	if t.Dim() != dims {
		return fmt.Errorf("%w: %s must have %d dimensions, has shape %v", cgotorch.ErrInvalidArgument, name, dims, t.Shape())
	}
	if d := t.DType(); d != cgotorch.Float32 && d != cgotorch.Float64 {
		return fmt.Errorf("%w: %s must be float32 or float64, is %v", cgotorch.ErrInvalidArgument, name, d)
	}
	return nil
}

// leafCopy returns a copy of t with its own storage that is a leaf requiring grad.
func leafCopy(t *Tensor) *Tensor {
	c := t.Detach()
	defer c.Close()
	return c.Clone().SetRequiresGrad(true)
}

// Forward returns x Wᵀ + b (cgotorch.Linear: torch's F.linear, one addmm for a 2-D x).
func (l *Linear) Forward(x *Tensor) *Tensor { return cgotorch.Linear(x, l.Weight, l.Bias) }

// Parameters returns "weight" and, with a bias, "bias".
func (l *Linear) Parameters() []NamedParameter {
	ps := []NamedParameter{{Name: "weight", Tensor: l.Weight}}
	if l.Bias != nil {
		ps = append(ps, NamedParameter{Name: "bias", Tensor: l.Bias})
	}
	return ps
}

// ZeroGrad zeroes the gradients of the weight and bias.
func (l *Linear) ZeroGrad() { ZeroGradParams(l.Parameters()) }

// Dropout zeroes each element with probability P and scales the others by 1/(1-P) in training
// mode; in evaluation mode it returns its input's values.
type Dropout struct {
	Stateless
	P float64
}

// NewDropout returns a Dropout layer; it panics unless 0 <= p <= 1.
func NewDropout(p float64) *Dropout {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("nn: Dropout(%v): probability out of [0, 1]", p))
	}
	return &Dropout{P: p}
}

// Forward applies dropout in training mode.
func (d *Dropout) Forward(x *Tensor) *Tensor { return x.Dropout(d.P, d.Training()) }

// LayerNorm normalises over the last len(Shape) dimensions of its input, then scales by Weight
// and shifts by Bias (both shaped Shape; ones and zeros initially), as PyTorch's nn.LayerNorm with
// elementwise_affine: y = (x - E[x]) / sqrt(Var[x] + Eps) * Weight + Bias, Var biased.
type LayerNorm struct {
	Base
	Shape  []int64
	Eps    float64
	Weight *Tensor
	Bias   *Tensor
}

// NewLayerNorm returns a LayerNorm over the trailing dimensions shape, with Eps 1e-5.
func NewLayerNorm(shape ...int64) *LayerNorm {
	if len(shape) == 0 {
		panic("nn: LayerNorm needs a normalized shape")
	}
	return &LayerNorm{
		Shape:  append([]int64(nil), shape...),
		Eps:    1e-5,
		Weight: cgotorch.Ones(shape, cgotorch.RequiresGrad()),
		Bias:   cgotorch.Zeros(shape, cgotorch.RequiresGrad()),
	}
}

// Forward normalises x, whose trailing dimensions must be Shape (it panics otherwise, as
// PyTorch raises).
func (l *LayerNorm) Forward(x *Tensor) *Tensor {
	shape, k := x.Shape(), len(l.Shape)
	if len(shape) < k || !slices.Equal(shape[len(shape)-k:], l.Shape) {
		dims := strings.ReplaceAll(strings.Trim(fmt.Sprint(l.Shape), "[]"), " ", ", ")
		panic(shapeError("layer norm", "given normalized shape [%s], expected input with shape [*, %s], but got input of shape %v",
			dims, dims, shape))
	}
	dims := make([]int64, len(l.Shape))
	for i := range dims {
		dims[i] = int64(i - len(l.Shape))
	}
	xc := x.Sub(x.MeanDim(dims, true))
	v := xc.Square().MeanDim(dims, true)
	return xc.Mul(v.AddScalar(l.Eps).Rsqrt()).Mul(l.Weight).Add(l.Bias)
}

// Parameters returns "weight" and "bias".
func (l *LayerNorm) Parameters() []NamedParameter {
	return []NamedParameter{{Name: "weight", Tensor: l.Weight}, {Name: "bias", Tensor: l.Bias}}
}

// ZeroGrad zeroes the gradients of the weight and bias.
func (l *LayerNorm) ZeroGrad() { ZeroGradParams(l.Parameters()) }

// BatchNorm1d is PyTorch's nn.BatchNorm1d (affine, tracking running statistics) over input
// [N, C] or [N, C, L]. In training mode it normalises with the batch's mean and biased variance
// and updates RunningMean and RunningVar (with the unbiased variance) as
// running = (1 - Momentum) * running + Momentum * batch, and counts NumBatchesTracked; in
// evaluation mode it normalises with the running statistics. (PyTorch's momentum=None, a
// cumulative average, is not supported.)
type BatchNorm1d struct {
	Base
	Eps, Momentum     float64
	Weight, Bias      *Tensor // [C], trained
	RunningMean       *Tensor // [C], buffer
	RunningVar        *Tensor // [C], buffer
	NumBatchesTracked *Tensor // Int64 scalar, buffer
}

// NewBatchNorm1d returns a BatchNorm1d over c channels with Eps 1e-5 and Momentum 0.1.
func NewBatchNorm1d(c int) *BatchNorm1d {
	if c <= 0 {
		panic(fmt.Sprintf("nn: BatchNorm1d(%d): channel count must be positive", c))
	}
	shape := []int64{int64(c)}
	return &BatchNorm1d{
		Eps: 1e-5, Momentum: 0.1,
		Weight:            cgotorch.Ones(shape, cgotorch.RequiresGrad()),
		Bias:              cgotorch.Zeros(shape, cgotorch.RequiresGrad()),
		RunningMean:       cgotorch.Zeros(shape),
		RunningVar:        cgotorch.Ones(shape),
		NumBatchesTracked: cgotorch.Zeros(nil, cgotorch.WithDType(cgotorch.Int64)),
	}
}

// Forward normalises x [N, C] or [N, C, L] per channel; another rank, C other than the layer's
// channel count, or a single value per channel in training mode panics (as PyTorch raises). An
// empty batch gives an empty output and leaves the running statistics as they are, as in PyTorch.
func (b *BatchNorm1d) Forward(x *Tensor) *Tensor {
	c := b.Weight.Size(0)
	var dims, bshape []int64
	switch x.Dim() {
	case 2:
		dims, bshape = []int64{0}, []int64{1, c}
	case 3:
		dims, bshape = []int64{0, 2}, []int64{1, c, 1}
	default:
		panic(shapeError("batch norm", "expected 2-D or 3-D input, got shape %v", x.Shape()))
	}
	if got := x.Size(1); got != c {
		panic(shapeError("batch norm", "expected input with %d channels, got shape %v", c, x.Shape()))
	}
	var xc, v *Tensor
	n, batchStats := x.Numel()/c, b.Training()
	if batchStats && n == 1 {
		panic(shapeError("batch norm", "expected more than 1 value per channel when training, got input %v", x.Shape()))
	}
	if batchStats && n == 0 {
		// an empty batch, as torch: counted, the running statistics unchanged (an empty mean
		// is NaN), an empty output from the running statistics, zero gradients
		cgotorch.NoGrad(func() { b.NumBatchesTracked.AddScalarInPlace(1) })
		batchStats = false
	}
	if batchStats {
		mean := x.MeanDim(dims, false)
		xc = x.Sub(mean.View(bshape...))
		v = xc.Square().MeanDim(dims, false)
		cgotorch.NoGrad(func() {
			m := b.Momentum
			b.RunningMean.MulScalarInPlace(1-m).AddScaledInPlace(mean, m)
			b.RunningVar.MulScalarInPlace(1-m).AddScaledInPlace(v, m*float64(n)/float64(n-1))
			b.NumBatchesTracked.AddScalarInPlace(1)
		})
	} else {
		xc = x.Sub(b.RunningMean.View(bshape...))
		v = b.RunningVar
	}
	inv := v.AddScalar(b.Eps).Rsqrt().Mul(b.Weight).View(bshape...)
	return xc.Mul(inv).Add(b.Bias.View(bshape...))
}

// Parameters returns "weight" and "bias".
func (b *BatchNorm1d) Parameters() []NamedParameter {
	return []NamedParameter{{Name: "weight", Tensor: b.Weight}, {Name: "bias", Tensor: b.Bias}}
}

// Buffers returns "running_mean", "running_var" and "num_batches_tracked".
func (b *BatchNorm1d) Buffers() []NamedParameter {
	return []NamedParameter{
		{Name: "running_mean", Tensor: b.RunningMean},
		{Name: "running_var", Tensor: b.RunningVar},
		{Name: "num_batches_tracked", Tensor: b.NumBatchesTracked},
	}
}

// ZeroGrad zeroes the gradients of the weight and bias.
func (b *BatchNorm1d) ZeroGrad() { ZeroGradParams(b.Parameters()) }

// ReLU is max(x, 0).
type ReLU struct{ Stateless }

// Forward returns max(x, 0).
func (*ReLU) Forward(x *Tensor) *Tensor { return x.Relu() }

// Sigmoid is 1 / (1 + exp(-x)).
type Sigmoid struct{ Stateless }

// Forward returns sigmoid(x).
func (*Sigmoid) Forward(x *Tensor) *Tensor { return x.Sigmoid() }

// Tanh is the hyperbolic tangent.
type Tanh struct{ Stateless }

// Forward returns tanh(x).
func (*Tanh) Forward(x *Tensor) *Tensor { return x.Tanh() }

// LeakyReLU is x for x > 0 and Slope*x elsewhere (PyTorch's negative_slope). A zero Slope means
// torch's default, 0.01, so &LeakyReLU{} is torch's LeakyReLU(); Slope Zero() makes it a ReLU.
type LeakyReLU struct {
	Stateless
	Slope float64
}

// NewLeakyReLU returns a LeakyReLU with the given negative slope.
func NewLeakyReLU(slope float64) *LeakyReLU { return &LeakyReLU{Slope: slope} }

// Forward returns x where x > 0 and Slope*x elsewhere.
func (l *LeakyReLU) Forward(x *Tensor) *Tensor {
	return cgotorch.Where(x.GtScalar(0), x, x.MulScalar(orDefault(l.Slope, 0.01)))
}

var (
	_ Layer        = (*Linear)(nil)
	_ Layer        = (*Dropout)(nil)
	_ Layer        = (*LayerNorm)(nil)
	_ Layer        = (*BatchNorm1d)(nil)
	_ BufferModule = (*BatchNorm1d)(nil)
	_ Layer        = (*ReLU)(nil)
	_ Layer        = (*Sigmoid)(nil)
	_ Layer        = (*Tanh)(nil)
	_ Layer        = (*LeakyReLU)(nil)
)

// shapeError is the panic value of a layer's Forward given an input of the wrong shape: a
// *cgotorch.Error wrapping cgotorch.ErrInvalidArgument, as cgotorch's tensor math panics with.
func shapeError(op, format string, args ...any) *cgotorch.Error {
	return &cgotorch.Error{Op: op, Kind: cgotorch.ErrInvalidArgument, Msg: fmt.Sprintf(format, args...)}
}
