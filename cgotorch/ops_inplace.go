package cgotorch

// #include "cgotorch.h"
import "C"

import "runtime"

// The in-place operations modify t and return it (for chaining). libtorch refuses them on a
// leaf that requires grad unless gradient recording is off: update parameters inside NoGrad.

// inplace runs t op= alpha*o (a ct_binary_op: ADD, SUB, MUL, DIV or SET).
func inplace(t, o *Tensor, op C.int32_t, alpha float64, name string) *Tensor {
	must(name, C.ct_inplace_binary(t.c(), op, o.c(), C.double(alpha)))
	runtime.KeepAlive(t)
	runtime.KeepAlive(o)
	return t
}

// inplaceScalar runs t op= s.
func inplaceScalar(t *Tensor, s float64, op C.int32_t, name string) *Tensor {
	must(name, C.ct_inplace_scalar(t.c(), op, C.double(s)))
	runtime.KeepAlive(t)
	return t
}

// AddInPlace adds o (broadcast to t's shape) to t.
func (t *Tensor) AddInPlace(o *Tensor) *Tensor { return inplace(t, o, C.CT_OP_ADD, 1, "add_") }

// AddScaledInPlace adds alpha*o to t (axpy).
func (t *Tensor) AddScaledInPlace(o *Tensor, alpha float64) *Tensor {
	return inplace(t, o, C.CT_OP_ADD, alpha, "add_")
}

// SubInPlace subtracts o from t.
func (t *Tensor) SubInPlace(o *Tensor) *Tensor { return inplace(t, o, C.CT_OP_SUB, 1, "sub_") }

// MulInPlace multiplies t by o elementwise.
func (t *Tensor) MulInPlace(o *Tensor) *Tensor { return inplace(t, o, C.CT_OP_MUL, 1, "mul_") }

// DivInPlace divides t by o elementwise (t must be a float tensor).
func (t *Tensor) DivInPlace(o *Tensor) *Tensor { return inplace(t, o, C.CT_OP_DIV, 1, "div_") }

// CopyFrom copies src's elements (broadcast to t's shape, converted to t's dtype and device) into t.
func (t *Tensor) CopyFrom(src *Tensor) *Tensor { return inplace(t, src, C.CT_OP_SET, 1, "copy_") }

// AddScalarInPlace adds s to every element of t.
func (t *Tensor) AddScalarInPlace(s float64) *Tensor {
	return inplaceScalar(t, s, C.CT_OP_ADD, "add_ scalar")
}

// SubScalarInPlace subtracts s from every element of t.
func (t *Tensor) SubScalarInPlace(s float64) *Tensor {
	return inplaceScalar(t, s, C.CT_OP_SUB, "sub_ scalar")
}

// MulScalarInPlace multiplies every element of t by s.
func (t *Tensor) MulScalarInPlace(s float64) *Tensor {
	return inplaceScalar(t, s, C.CT_OP_MUL, "mul_ scalar")
}

// DivScalarInPlace divides every element of t by s (t must be a float tensor).
func (t *Tensor) DivScalarInPlace(s float64) *Tensor {
	return inplaceScalar(t, s, C.CT_OP_DIV, "div_ scalar")
}

// Fill sets every element of t to v.
func (t *Tensor) Fill(v float64) *Tensor { return inplaceScalar(t, v, C.CT_OP_SET, "fill_") }

// Zero sets every element of t to 0.
func (t *Tensor) Zero() *Tensor { return inplaceScalar(t, 0, C.CT_OP_SET, "zero_") }
