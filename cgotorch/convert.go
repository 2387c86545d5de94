package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// ToSlice copies the elements of t (any device, any layout) into a new Go slice in row-major
// order. T must match t's dtype, else ErrInvalidArgument; a closed tensor gives ErrClosed. A
// tensor too large for Go memory (its byte count overflows int or exceeds the machine's physical
// memory: an expanded view can have any number of elements) gives ErrInvalidArgument, before
// anything is allocated.
func ToSlice[T Element](t *Tensor) ([]T, error) {
	p, err := t.cOrErr("to slice")
	if err != nil {
		return nil, err
	}
	var n C.int64_t
	if err := toError("to slice", C.ct_tensor_numel(&n, p)); err != nil {
		return nil, err
	}
	dt := dtypeOf[T]()
	if err := checkSliceSize(int64(n), dt.Size()); err != nil {
		return nil, err
	}
	out := make([]T, int(n))
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

// checkSliceSize returns ErrInvalidArgument when a slice of n elements of size bytes each cannot
// be allocated: the byte count overflows int, or exceeds the machine's physical memory (make
// would panic or the runtime die of a fatal out-of-memory error, which nothing can recover).
func checkSliceSize(n int64, size int) error {
	if n < 0 || size <= 0 || n > int64(math.MaxInt/size) {
		return fmt.Errorf("%w: to slice: %d elements of %d bytes overflow int", ErrInvalidArgument, n, size)
	}
	bytes := uint64(n) * uint64(size)
	if m := physicalMemory(); m > 0 && bytes > m {
		return fmt.Errorf("%w: to slice: %d elements need %d bytes, more than the machine's %d bytes of memory",
			ErrInvalidArgument, n, bytes, m)
	}
	return nil
}
