package cgotorch

// #include "cgotorch.h"
import "C"

import "runtime"

// MM returns the matrix product of the 2-D tensors t [n, k] and o [k, m].
func (t *Tensor) MM(o *Tensor) *Tensor {
	var out C.ct_tensor
	must("mm", C.ct_mm(&out, t.c(), o.c()))
	runtime.KeepAlive(t)
	runtime.KeepAlive(o)
	return newTensor(out)
}

// Matmul returns the numpy-style matrix product of t and o: dot product of vectors, matrix
// times vector, and batched products of matrices with broadcast batch dimensions.
func (t *Tensor) Matmul(o *Tensor) *Tensor {
	var out C.ct_tensor
	must("matmul", C.ct_matmul(&out, t.c(), o.c()))
	runtime.KeepAlive(t)
	runtime.KeepAlive(o)
	return newTensor(out)
}

// Linear returns x Wᵀ + b, PyTorch's nn.functional.linear: x is [..., In], w is [Out, In], b is
// [Out] or nil for none. For a 2-D x with a bias it is one addmm, one autograd node, where
// Transpose, Matmul and Add make three.
func Linear(x, w, b *Tensor) *Tensor {
	var cb C.ct_tensor
	if b != nil {
		cb = b.c()
	}
	var out C.ct_tensor
	must("linear", C.ct_linear(&out, x.c(), w.c(), cb))
	runtime.KeepAlive(x)
	runtime.KeepAlive(w)
	runtime.KeepAlive(b)
	return newTensor(out)
}

func softmax(t *Tensor, dim int64, log bool, name string) *Tensor {
	var out C.ct_tensor
	must(name, C.ct_softmax(&out, t.c(), C.int64_t(dim), cBool(log)))
	runtime.KeepAlive(t)
	return newTensor(out)
}

// Softmax returns exp(t) / sum(exp(t)) along dim, computed stably.
func (t *Tensor) Softmax(dim int64) *Tensor { return softmax(t, dim, false, "softmax") }

// LogSoftmax returns log(Softmax(dim)), computed stably.
func (t *Tensor) LogSoftmax(dim int64) *Tensor { return softmax(t, dim, true, "log softmax") }

// Dropout zeroes each element with probability p and scales the others by 1/(1-p) when train
// is true; it returns t's values unchanged otherwise. The mask comes from libtorch's global
// generator (see ManualSeed).
func (t *Tensor) Dropout(p float64, train bool) *Tensor {
	var out C.ct_tensor
	must("dropout", C.ct_dropout(&out, t.c(), C.double(p), cBool(train)))
	runtime.KeepAlive(t)
	return newTensor(out)
}
