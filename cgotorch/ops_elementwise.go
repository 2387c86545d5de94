package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"math"
	"runtime"
)

// cBool converts a Go bool to the C ABI's 0 or 1.
func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// unary applies the elementwise function op (a ct_unary_op).
func unary(t *Tensor, op C.int32_t, name string) *Tensor {
	var out C.ct_tensor
	must(name, C.ct_unary(&out, op, t.c()))
	runtime.KeepAlive(t)
	return newTensor(out)
}

// binary applies op (a ct_binary_op) to a and b, broadcasting them.
func binary(a, b *Tensor, op C.int32_t, name string) *Tensor {
	var out C.ct_tensor
	must(name, C.ct_binary(&out, op, a.c(), b.c()))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return newTensor(out)
}

// binaryScalar applies op (a ct_binary_op) to t and the scalar s.
func binaryScalar(t *Tensor, s float64, op C.int32_t, name string) *Tensor {
	var out C.ct_tensor
	must(name, C.ct_binary_scalar(&out, op, t.c(), C.double(s)))
	runtime.KeepAlive(t)
	return newTensor(out)
}

// Neg returns -t.
func (t *Tensor) Neg() *Tensor { return unary(t, C.CT_OP_NEG, "neg") }

// Abs returns |t|.
func (t *Tensor) Abs() *Tensor { return unary(t, C.CT_OP_ABS, "abs") }

// Sqrt returns the square roots of t's elements.
func (t *Tensor) Sqrt() *Tensor { return unary(t, C.CT_OP_SQRT, "sqrt") }

// Rsqrt returns 1/sqrt(t).
func (t *Tensor) Rsqrt() *Tensor { return unary(t, C.CT_OP_RSQRT, "rsqrt") }

// Exp returns e to the power of t.
func (t *Tensor) Exp() *Tensor { return unary(t, C.CT_OP_EXP, "exp") }

// Log returns the natural logarithm of t.
func (t *Tensor) Log() *Tensor { return unary(t, C.CT_OP_LOG, "log") }

// Log1p returns log(1 + t), accurate for small t.
func (t *Tensor) Log1p() *Tensor { return unary(t, C.CT_OP_LOG1P, "log1p") }

// Sigmoid returns 1 / (1 + exp(-t)).
func (t *Tensor) Sigmoid() *Tensor { return unary(t, C.CT_OP_SIGMOID, "sigmoid") }

// Tanh returns the hyperbolic tangent of t.
func (t *Tensor) Tanh() *Tensor { return unary(t, C.CT_OP_TANH, "tanh") }

// Relu returns max(t, 0).
func (t *Tensor) Relu() *Tensor { return unary(t, C.CT_OP_RELU, "relu") }

// Gelu returns the Gaussian error linear unit of t (the exact form, with erf).
func (t *Tensor) Gelu() *Tensor { return unary(t, C.CT_OP_GELU, "gelu") }

// Silu returns t * sigmoid(t) (also called swish).
func (t *Tensor) Silu() *Tensor { return unary(t, C.CT_OP_SILU, "silu") }

// Square returns t * t.
func (t *Tensor) Square() *Tensor { return unary(t, C.CT_OP_SQUARE, "square") }

// Reciprocal returns 1 / t.
func (t *Tensor) Reciprocal() *Tensor { return unary(t, C.CT_OP_RECIPROCAL, "reciprocal") }

// Sign returns -1, 0 or 1 according to the sign of each element.
func (t *Tensor) Sign() *Tensor { return unary(t, C.CT_OP_SIGN, "sign") }

// Floor rounds each element down.
func (t *Tensor) Floor() *Tensor { return unary(t, C.CT_OP_FLOOR, "floor") }

// Ceil rounds each element up.
func (t *Tensor) Ceil() *Tensor { return unary(t, C.CT_OP_CEIL, "ceil") }

// Round rounds each element to the nearest integer, halves to even.
func (t *Tensor) Round() *Tensor { return unary(t, C.CT_OP_ROUND, "round") }

// LogicalNot returns a bool tensor that is true where t is zero (or false).
func (t *Tensor) LogicalNot() *Tensor { return unary(t, C.CT_OP_LOGICAL_NOT, "logical not") }

// Add returns t + o (broadcasting).
func (t *Tensor) Add(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_ADD, "add") }

// Sub returns t - o (broadcasting).
func (t *Tensor) Sub(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_SUB, "sub") }

// Mul returns t * o elementwise (broadcasting).
func (t *Tensor) Mul(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_MUL, "mul") }

// Div returns t / o elementwise (broadcasting); integer tensors give floats.
func (t *Tensor) Div(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_DIV, "div") }

// Pow returns t to the power o elementwise (broadcasting).
func (t *Tensor) Pow(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_POW, "pow") }

// Remainder returns t modulo o with the sign of o (Python's %).
func (t *Tensor) Remainder(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_REMAINDER, "remainder") }

// Maximum returns the elementwise maximum of t and o.
func (t *Tensor) Maximum(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_MAXIMUM, "maximum") }

// Minimum returns the elementwise minimum of t and o.
func (t *Tensor) Minimum(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_MINIMUM, "minimum") }

// Eq returns the bool tensor t == o.
func (t *Tensor) Eq(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_EQ, "eq") }

// Ne returns the bool tensor t != o.
func (t *Tensor) Ne(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_NE, "ne") }

// Lt returns the bool tensor t < o.
func (t *Tensor) Lt(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_LT, "lt") }

// Le returns the bool tensor t <= o.
func (t *Tensor) Le(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_LE, "le") }

// Gt returns the bool tensor t > o.
func (t *Tensor) Gt(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_GT, "gt") }

// Ge returns the bool tensor t >= o.
func (t *Tensor) Ge(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_GE, "ge") }

// LogicalAnd returns the bool tensor t && o (nonzero is true).
func (t *Tensor) LogicalAnd(o *Tensor) *Tensor {
	return binary(t, o, C.CT_OP_LOGICAL_AND, "logical and")
}

// LogicalOr returns the bool tensor t || o (nonzero is true).
func (t *Tensor) LogicalOr(o *Tensor) *Tensor { return binary(t, o, C.CT_OP_LOGICAL_OR, "logical or") }

// The scalar forms. A scalar with an integral value acts as an integer constant, as in Python:
// an Int64 tensor plus 1 stays Int64, an Int64 tensor times 0.5 becomes Float32. This holds for
// every integral value in [-2^63, 2^63), converted exactly (Int64 plus 1e16 is exact and Int64),
// except -0.0, a float constant whose sign survives (x / -0.0 is -Inf for x > 0, as in PyTorch).

// AddScalar returns t + s.
func (t *Tensor) AddScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_ADD, "add scalar") }

// SubScalar returns t - s.
func (t *Tensor) SubScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_SUB, "sub scalar") }

// MulScalar returns t * s.
func (t *Tensor) MulScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_MUL, "mul scalar") }

// DivScalar returns t / s (integer tensors give floats).
func (t *Tensor) DivScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_DIV, "div scalar") }

// PowScalar returns t to the power s.
func (t *Tensor) PowScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_POW, "pow scalar") }

// RemainderScalar returns t modulo s with the sign of s (Python's %).
func (t *Tensor) RemainderScalar(s float64) *Tensor {
	return binaryScalar(t, s, C.CT_OP_REMAINDER, "remainder scalar")
}

// EqScalar returns the bool tensor t == s.
func (t *Tensor) EqScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_EQ, "eq scalar") }

// NeScalar returns the bool tensor t != s.
func (t *Tensor) NeScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_NE, "ne scalar") }

// LtScalar returns the bool tensor t < s.
func (t *Tensor) LtScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_LT, "lt scalar") }

// LeScalar returns the bool tensor t <= s.
func (t *Tensor) LeScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_LE, "le scalar") }

// GtScalar returns the bool tensor t > s.
func (t *Tensor) GtScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_GT, "gt scalar") }

// GeScalar returns the bool tensor t >= s.
func (t *Tensor) GeScalar(s float64) *Tensor { return binaryScalar(t, s, C.CT_OP_GE, "ge scalar") }

// Clamp limits t's elements to [lo, hi]. An infinite bound (math.Inf(-1) for lo, math.Inf(1)
// for hi) is no bound, which keeps integer tensors usable.
func (t *Tensor) Clamp(lo, hi float64) *Tensor {
	var out C.ct_tensor
	hasLo, hasHi := cBool(!math.IsInf(lo, -1)), cBool(!math.IsInf(hi, 1))
	must("clamp", C.ct_clamp(&out, t.c(), C.double(lo), C.double(hi), hasLo, hasHi))
	runtime.KeepAlive(t)
	return newTensor(out)
}

// ClampMin returns max(t, lo) elementwise.
func (t *Tensor) ClampMin(lo float64) *Tensor { return t.Clamp(lo, math.Inf(1)) }

// ClampMax returns min(t, hi) elementwise.
func (t *Tensor) ClampMax(hi float64) *Tensor { return t.Clamp(math.Inf(-1), hi) }

// Where returns a tensor taking a's elements where the bool tensor cond is true and b's
// elsewhere (all three broadcast together).
func Where(cond, a, b *Tensor) *Tensor {
	var out C.ct_tensor
	must("where", C.ct_where(&out, cond.c(), a.c(), b.c()))
	runtime.KeepAlive(cond)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return newTensor(out)
}

// MaskedFill returns a copy of t with value where the bool tensor mask (broadcast to t's shape)
// is true.
func (t *Tensor) MaskedFill(mask *Tensor, value float64) *Tensor {
	var out C.ct_tensor
	must("masked fill", C.ct_masked_fill(&out, t.c(), mask.c(), C.double(value)))
	runtime.KeepAlive(t)
	runtime.KeepAlive(mask)
	return newTensor(out)
}
