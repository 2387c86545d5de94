package cgotorch

// #include "cgotorch.h"
import "C"

import "runtime"

// reduce applies the reduction op (a ct_reduce_op) over dims (all of them when empty).
func reduce(t *Tensor, op C.int32_t, dims []int64, keepDim bool, name string) *Tensor {
	var out C.ct_tensor
	p, n := cShape(dims)
	must(name, C.ct_reduce(&out, op, t.c(), p, n, cBool(keepDim)))
	runtime.KeepAlive(t)
	runtime.KeepAlive(dims)
	return newTensor(out)
}

// pair wraps two handles returned together.
func pair(a, b C.ct_tensor) (*Tensor, *Tensor) { return newTensor(a), newTensor(b) }

// Sum returns the sum of all elements (a 0-dim tensor; integer tensors sum to Int64).
func (t *Tensor) Sum() *Tensor { return reduce(t, C.CT_REDUCE_SUM, nil, false, "sum") }

// SumDim sums over dims; keepDim keeps them with size 1.
func (t *Tensor) SumDim(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_SUM, dims, keepDim, "sum")
}

// Mean returns the mean of all elements (float tensors only).
func (t *Tensor) Mean() *Tensor { return reduce(t, C.CT_REDUCE_MEAN, nil, false, "mean") }

// MeanDim averages over dims; keepDim keeps them with size 1.
func (t *Tensor) MeanDim(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_MEAN, dims, keepDim, "mean")
}

// Prod returns the product of all elements.
func (t *Tensor) Prod() *Tensor { return reduce(t, C.CT_REDUCE_PROD, nil, false, "prod") }

// ProdDim multiplies over dims; keepDim keeps them with size 1.
func (t *Tensor) ProdDim(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_PROD, dims, keepDim, "prod")
}

// Max returns the largest element (a 0-dim tensor).
func (t *Tensor) Max() *Tensor { return reduce(t, C.CT_REDUCE_MAX, nil, false, "max") }

// Min returns the smallest element (a 0-dim tensor).
func (t *Tensor) Min() *Tensor { return reduce(t, C.CT_REDUCE_MIN, nil, false, "min") }

// Amax returns the largest elements over dims (values only; see MaxDim for positions).
func (t *Tensor) Amax(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_MAX, dims, keepDim, "amax")
}

// Amin returns the smallest elements over dims (values only; see MinDim for positions).
func (t *Tensor) Amin(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_MIN, dims, keepDim, "amin")
}

// LogSumExp returns log(sum(exp(t))) over dims (all when empty), computed stably.
func (t *Tensor) LogSumExp(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_LOGSUMEXP, dims, keepDim, "logsumexp")
}

// Std returns the unbiased standard deviation of all elements (divides by n-1).
func (t *Tensor) Std() *Tensor { return reduce(t, C.CT_REDUCE_STD, nil, false, "std") }

// StdDim returns the unbiased standard deviation over dims.
func (t *Tensor) StdDim(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_STD, dims, keepDim, "std")
}

// Var returns the unbiased variance of all elements (divides by n-1).
func (t *Tensor) Var() *Tensor { return reduce(t, C.CT_REDUCE_VAR, nil, false, "var") }

// VarDim returns the unbiased variance over dims.
func (t *Tensor) VarDim(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_VAR, dims, keepDim, "var")
}

// Norm returns the Euclidean norm of all elements.
func (t *Tensor) Norm() *Tensor { return reduce(t, C.CT_REDUCE_NORM, nil, false, "norm") }

// NormDim returns the Euclidean norms over dims.
func (t *Tensor) NormDim(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_NORM, dims, keepDim, "norm")
}

// Any reports (as a 0-dim bool tensor) whether some element is nonzero.
func (t *Tensor) Any() *Tensor { return reduce(t, C.CT_REDUCE_ANY, nil, false, "any") }

// AnyDim reports over dims whether some element is nonzero.
func (t *Tensor) AnyDim(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_ANY, dims, keepDim, "any")
}

// All reports (as a 0-dim bool tensor) whether every element is nonzero.
func (t *Tensor) All() *Tensor { return reduce(t, C.CT_REDUCE_ALL, nil, false, "all") }

// AllDim reports over dims whether every element is nonzero.
func (t *Tensor) AllDim(dims []int64, keepDim bool) *Tensor {
	return reduce(t, C.CT_REDUCE_ALL, dims, keepDim, "all")
}

// reduceWithIndices returns the max or min along dim and their positions; with values false
// only the positions (the first return is then nil).
func reduceWithIndices(t *Tensor, op C.int32_t, dim int64, keepDim, values bool, name string) (*Tensor, *Tensor) {
	var v, i C.ct_tensor
	pv := &v
	if !values {
		pv = nil
	}
	must(name, C.ct_reduce_with_indices(pv, &i, op, t.c(), C.int64_t(dim), cBool(keepDim)))
	runtime.KeepAlive(t)
	return pair(v, i)
}

// MaxDim returns the largest elements along dim and their positions (Int64).
func (t *Tensor) MaxDim(dim int64, keepDim bool) (values, indices *Tensor) {
	return reduceWithIndices(t, C.CT_REDUCE_MAX, dim, keepDim, true, "max")
}

// MinDim returns the smallest elements along dim and their positions (Int64).
func (t *Tensor) MinDim(dim int64, keepDim bool) (values, indices *Tensor) {
	return reduceWithIndices(t, C.CT_REDUCE_MIN, dim, keepDim, true, "min")
}

// Argmax returns the positions (Int64) of the largest elements along dim.
func (t *Tensor) Argmax(dim int64, keepDim bool) *Tensor {
	_, i := reduceWithIndices(t, C.CT_REDUCE_MAX, dim, keepDim, false, "argmax")
	return i
}

// Argmin returns the positions (Int64) of the smallest elements along dim.
func (t *Tensor) Argmin(dim int64, keepDim bool) *Tensor {
	_, i := reduceWithIndices(t, C.CT_REDUCE_MIN, dim, keepDim, false, "argmin")
	return i
}

// TopK returns the k largest (or, with largest false, smallest) elements along dim and their
// positions (Int64); sorted orders them, largest (or smallest) first.
func (t *Tensor) TopK(k, dim int64, largest, sorted bool) (values, indices *Tensor) {
	var v, i C.ct_tensor
	must("topk", C.ct_topk(&v, &i, t.c(), C.int64_t(k), C.int64_t(dim), cBool(largest), cBool(sorted)))
	runtime.KeepAlive(t)
	return pair(v, i)
}

// Sort sorts t along dim (stably: equal elements keep their order) and returns the sorted
// tensor and the original positions (Int64) of its elements.
func (t *Tensor) Sort(dim int64, descending bool) (values, indices *Tensor) {
	var v, i C.ct_tensor
	must("sort", C.ct_sort(&v, &i, t.c(), C.int64_t(dim), cBool(descending)))
	runtime.KeepAlive(t)
	return pair(v, i)
}
