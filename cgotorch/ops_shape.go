package cgotorch

// #include "cgotorch.h"
import "C"

import "runtime"

// shapeOp applies op (a ct_shape_op_code) with its int64 arguments.
func shapeOp(t *Tensor, op C.int32_t, args []int64, name string) *Tensor {
	var out C.ct_tensor
	p, n := cShape(args)
	must(name, C.ct_shape_op(&out, op, t.c(), p, n))
	runtime.KeepAlive(t)
	runtime.KeepAlive(args)
	return newTensor(out)
}

// Reshape returns t with a new shape holding the same elements (one size may be -1: inferred).
// It is a view sharing t's storage when possible, a copy otherwise.
func (t *Tensor) Reshape(shape ...int64) *Tensor {
	return shapeOp(t, C.CT_SHAPE_RESHAPE, shape, "reshape")
}

// View returns a view of t with a new shape (one size may be -1). It panics when t's layout
// does not allow a view (after Transpose, say): use Reshape or Contiguous first.
func (t *Tensor) View(shape ...int64) *Tensor { return shapeOp(t, C.CT_SHAPE_VIEW, shape, "view") }

// Expand returns a view of t broadcast to shape (-1 keeps a size); dimensions of size 1 repeat
// without copying.
func (t *Tensor) Expand(shape ...int64) *Tensor {
	return shapeOp(t, C.CT_SHAPE_EXPAND, shape, "expand")
}

// Permute returns a view of t with its dimensions reordered: dimension i of the result is
// dimension dims[i] of t.
func (t *Tensor) Permute(dims ...int64) *Tensor {
	return shapeOp(t, C.CT_SHAPE_PERMUTE, dims, "permute")
}

// Transpose returns a view of t with dimensions d0 and d1 swapped.
func (t *Tensor) Transpose(d0, d1 int64) *Tensor {
	return shapeOp(t, C.CT_SHAPE_TRANSPOSE, []int64{d0, d1}, "transpose")
}

// Squeeze removes the given dimensions if their size is 1, or every dimension of size 1 when
// none is given.
func (t *Tensor) Squeeze(dims ...int64) *Tensor {
	return shapeOp(t, C.CT_SHAPE_SQUEEZE, dims, "squeeze")
}

// Unsqueeze inserts a dimension of size 1 at position dim.
func (t *Tensor) Unsqueeze(dim int64) *Tensor {
	return shapeOp(t, C.CT_SHAPE_UNSQUEEZE, []int64{dim}, "unsqueeze")
}

// Flatten merges the dimensions startDim..endDim (inclusive) into one.
func (t *Tensor) Flatten(startDim, endDim int64) *Tensor {
	return shapeOp(t, C.CT_SHAPE_FLATTEN, []int64{startDim, endDim}, "flatten")
}

// Contiguous returns t with a row-major layout: t's storage when it already has one, a copy
// otherwise (after Transpose or Expand, say).
func (t *Tensor) Contiguous() *Tensor {
	return shapeOp(t, C.CT_SHAPE_CONTIGUOUS, nil, "contiguous")
}

// Clone returns a copy of t with its own storage; gradients flow back to t.
func (t *Tensor) Clone() *Tensor { return shapeOp(t, C.CT_SHAPE_CLONE, nil, "clone") }

// Narrow returns the view of t made of length entries from start along dim.
func (t *Tensor) Narrow(dim, start, length int64) *Tensor {
	var out C.ct_tensor
	must("narrow", C.ct_narrow(&out, t.c(), C.int64_t(dim), C.int64_t(start), C.int64_t(length)))
	runtime.KeepAlive(t)
	return newTensor(out)
}

// Split cuts t along dim into views of sizes entries each (they add up to t's size there),
// made by one autograd node: the backward pass joins their gradients in one concatenation,
// where a Narrow per piece would fill a zeroed gradient of t's whole size for each.
func (t *Tensor) Split(sizes []int64, dim int64) []*Tensor {
	if len(sizes) == 0 {
		panic(&Error{Op: "split", Kind: ErrInvalidArgument, Msg: "no sizes"})
	}
	outs := make([]C.ct_tensor, len(sizes))
	p, n := cShape(sizes)
	must("split", C.ct_split(&outs[0], n, t.c(), p, C.int64_t(dim)))
	runtime.KeepAlive(t)
	runtime.KeepAlive(sizes)
	pieces := make([]*Tensor, len(outs))
	for i, o := range outs {
		pieces[i] = newTensor(o)
	}
	return pieces
}

// join concatenates (CT_JOIN_CAT) or stacks (CT_JOIN_STACK) ts along dim.
func join(ts []*Tensor, dim int64, op C.int32_t, name string) *Tensor {
	handles := make([]C.ct_tensor, len(ts))
	for i, t := range ts {
		handles[i] = t.c()
	}
	var p *C.ct_tensor
	if len(handles) > 0 {
		p = &handles[0]
	}
	var out C.ct_tensor
	must(name, C.ct_join(&out, op, p, C.int32_t(len(handles)), C.int64_t(dim)))
	runtime.KeepAlive(ts)
	return newTensor(out)
}

// Cat concatenates ts along the existing dimension dim; their other sizes must match. An
// empty list panics with ErrInvalidArgument.
func Cat(ts []*Tensor, dim int64) *Tensor { return join(ts, dim, C.CT_JOIN_CAT, "cat") }

// Stack joins ts, all of one shape, along a new dimension inserted at dim. An empty list panics
// with ErrInvalidArgument.
func Stack(ts []*Tensor, dim int64) *Tensor { return join(ts, dim, C.CT_JOIN_STACK, "stack") }
