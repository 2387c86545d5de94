package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// ToSlice copies the elements of t (any device, any layout) into a new Go slice in row-major
// order. T must match t's dtype, else ErrInvalidArgument; a closed tensor gives ErrClosed.
func ToSlice[T Element](t *Tensor) ([]T, error) {
	p, err := t.cOrErr("to slice")
	if err != nil {
		return nil, err
	}
	var n C.int64_t
	if err := toError("to slice", C.ct_tensor_numel(&n, p)); err != nil {
		return nil, err
	}
	out := make([]T, int(n))
	dt := dtypeOf[T]()
	var ptr unsafe.Pointer
	if len(out) > 0 {
		ptr = unsafe.Pointer(&out[0])
	}
	err = toError("to slice", C.ct_tensor_copy_to(ptr, C.size_t(len(out)*dt.Size()), p, C.int32_t(dt)))
	runtime.KeepAlive(t)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Item returns the value of a one-element tensor of any numeric dtype as float64.
func (t *Tensor) Item() (float64, error) {
	p, err := t.cOrErr("item")
	if err != nil {
		return 0, err
	}
	var n C.int64_t
	if err := toError("item", C.ct_tensor_numel(&n, p)); err != nil {
		return 0, err
	}
	if n != 1 {
		return 0, fmt.Errorf("%w: item of a tensor with %d elements", ErrInvalidArgument, int64(n))
	}
	var out C.ct_tensor
	if err := toError("item", C.ct_tensor_to(&out, p, CPU.c(), C.CT_FLOAT64)); err != nil {
		return 0, err
	}
	runtime.KeepAlive(t)
	var v float64
	err = toError("item", C.ct_tensor_copy_to(unsafe.Pointer(&v), 8, out, C.CT_FLOAT64))
	C.ct_tensor_free(out)
	return v, err
}
