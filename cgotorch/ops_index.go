package cgotorch

// #include "cgotorch.h"
import "C"

import "runtime"

// index applies op (CT_INDEX_SELECT or CT_INDEX_GATHER) with an Int64 index tensor.
func index(t *Tensor, op C.int32_t, dim int64, idx *Tensor, name string) *Tensor {
	var out C.ct_tensor
	must(name, C.ct_index(&out, op, t.c(), C.int64_t(dim), idx.c()))
	runtime.KeepAlive(t)
	runtime.KeepAlive(idx)
	return newTensor(out)
}

// indexUpdate applies op (CT_INDEX_ADD, CT_INDEX_SCATTER or CT_INDEX_SCATTER_ADD) to a copy of
// t, or to t itself (returned) when inPlace.
func indexUpdate(t *Tensor, op C.int32_t, dim int64, idx, src *Tensor, inPlace bool, name string) *Tensor {
	var out C.ct_tensor
	pout := &out
	if inPlace {
		pout = nil
	}
	must(name, C.ct_index_update(pout, op, t.c(), C.int64_t(dim), idx.c(), src.c(), cBool(inPlace)))
	runtime.KeepAlive(t)
	runtime.KeepAlive(idx)
	runtime.KeepAlive(src)
	if inPlace {
		return t
	}
	return newTensor(out)
}

// IndexSelect returns the entries of t at positions idx (a 1-D Int64 tensor) along dim: for
// dim 0, the rows idx[0], idx[1], ... (an embedding lookup).
func (t *Tensor) IndexSelect(dim int64, idx *Tensor) *Tensor {
	return index(t, C.CT_INDEX_SELECT, dim, idx, "index select")
}

// Gather returns out shaped like idx (Int64) with out[i][j] = t[idx[i][j]][j] for dim 0 and
// out[i][j] = t[i][idx[i][j]] for dim 1 (likewise in more dimensions).
func (t *Tensor) Gather(dim int64, idx *Tensor) *Tensor {
	return index(t, C.CT_INDEX_GATHER, dim, idx, "gather")
}

// IndexAdd returns a copy of t where, along dim, entry idx[i] (a 1-D Int64 tensor) has src's
// entry i added; repeated indices accumulate. It is the backward of IndexSelect.
func (t *Tensor) IndexAdd(dim int64, idx, src *Tensor) *Tensor {
	return indexUpdate(t, C.CT_INDEX_ADD, dim, idx, src, false, "index add")
}

// IndexAddInPlace is IndexAdd updating t itself.
func (t *Tensor) IndexAddInPlace(dim int64, idx, src *Tensor) *Tensor {
	return indexUpdate(t, C.CT_INDEX_ADD, dim, idx, src, true, "index add_")
}

// Scatter returns a copy of t with t[idx[i][j]][j] = src[i][j] for dim 0 (likewise for other
// dims); it is the inverse of Gather. With repeated indices, which write wins is unspecified.
func (t *Tensor) Scatter(dim int64, idx, src *Tensor) *Tensor {
	return indexUpdate(t, C.CT_INDEX_SCATTER, dim, idx, src, false, "scatter")
}

// ScatterInPlace is Scatter updating t itself.
func (t *Tensor) ScatterInPlace(dim int64, idx, src *Tensor) *Tensor {
	return indexUpdate(t, C.CT_INDEX_SCATTER, dim, idx, src, true, "scatter_")
}

// ScatterAdd returns a copy of t with t[idx[i][j]][j] += src[i][j] for dim 0 (likewise for
// other dims); repeated indices accumulate. It is the backward of Gather.
func (t *Tensor) ScatterAdd(dim int64, idx, src *Tensor) *Tensor {
	return indexUpdate(t, C.CT_INDEX_SCATTER_ADD, dim, idx, src, false, "scatter add")
}

// ScatterAddInPlace is ScatterAdd updating t itself.
func (t *Tensor) ScatterAddInPlace(dim int64, idx, src *Tensor) *Tensor {
	return indexUpdate(t, C.CT_INDEX_SCATTER_ADD, dim, idx, src, true, "scatter add_")
}

// UniqueResult is what Unique returns. Inverse and Counts are nil unless asked for.
type UniqueResult struct {
	// Values holds the distinct values of the input, as a 1-D tensor.
	Values *Tensor
	// Inverse, shaped like the input, holds for each input element its position in Values
	// (Int64), so that Values.IndexSelect(0, Inverse.Flatten(0, -1)) rebuilds the input.
	Inverse *Tensor
	// Counts holds how many times each value occurs (Int64).
	Counts *Tensor
}

// Unique returns the distinct values of t (flattened), in ascending order when sorted (in an
// unspecified order otherwise), with the inverse mapping and the counts when asked for.
func (t *Tensor) Unique(sorted, returnInverse, returnCounts bool) UniqueResult {
	var v, inv, cnt C.ct_tensor
	pinv, pcnt := &inv, &cnt
	if !returnInverse {
		pinv = nil
	}
	if !returnCounts {
		pcnt = nil
	}
	must("unique", C.ct_unique(&v, pinv, pcnt, t.c(), cBool(sorted)))
	runtime.KeepAlive(t)
	return UniqueResult{Values: newTensor(v), Inverse: newTensor(inv), Counts: newTensor(cnt)}
}
