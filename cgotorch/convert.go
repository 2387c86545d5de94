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
// anything is allocated. A Bool element whose byte is not 0 comes back as true, whatever the byte.
func ToSlice[T Element](t *Tensor) ([]T, error) {
	var out []T
	err := copyOut("to slice", t, dtypeOf[T](), func(n int) unsafe.Pointer {
		out = make([]T, n)
		if n == 0 {
			return nil
		}
		return unsafe.Pointer(&out[0])
	})
	if err != nil {
		return nil, err
	}
	if bs, ok := any(out).([]bool); ok {
		validBools(bs)
	}
	return out, nil
}

// validBools makes every element of b a valid Go bool. A Bool tensor's bytes are libtorch's,
// where any nonzero byte is true (FromBytes and a file's data can hold 2 or 255, as PyTorch's
// frombuffer does), but a Go bool must be the byte 0 or 1: one holding 2 is true and yet
// unequal to true.
func validBools(b []bool) {
	if len(b) == 0 {
		return
	}
	for i, x := range unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b)) {
		b[i] = x != 0
	}
}

// ToBytes copies the elements of t (any device, any layout) into a new byte slice in row-major
// order and the host's byte order: the form for dtypes with no Go element type (Float16,
// BFloat16, Int16, Int8). dt must be t's dtype, as ToSlice's T must match it (else
// ErrInvalidArgument); other errors as ToSlice's.
func ToBytes(t *Tensor, dt DType) ([]byte, error) {
	if dt.Size() == 0 {
		return nil, fmt.Errorf("%w: to bytes: unknown dtype %v", ErrInvalidArgument, dt)
	}
	var out []byte
	err := copyOut("to bytes", t, dt, func(n int) unsafe.Pointer {
		out = make([]byte, n*dt.Size())
		if n == 0 {
			return nil
		}
		return unsafe.Pointer(&out[0])
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// copyOut copies t's elements, as dtype dt, into the memory alloc returns for n elements (after
// the size checks); the Go memory is alloc's caller's, alive until it returns.
func copyOut(op string, t *Tensor, dt DType, alloc func(n int) unsafe.Pointer) error {
	p, err := t.cOrErr(op)
	if err != nil {
		return err
	}
	var n C.int64_t
	if err := toError(op, C.ct_tensor_numel(&n, p)); err != nil {
		return err
	}
	if err := checkSliceSize(int64(n), dt.Size()); err != nil {
		return err
	}
	ptr := alloc(int(n))
	err = toError(op, C.ct_tensor_copy_to(ptr, C.size_t(int(n)*dt.Size()), p, C.int32_t(dt)))
	runtime.KeepAlive(t)
	return err
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
