package cgotorch

// #include <stdlib.h>
// #include "cgotorch.h"
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Tensor is a libtorch tensor. Its memory lives on the C side: Close releases it at once; a
// cleanup attached to the Tensor releases it after the Go garbage collector finds the Tensor
// unreachable (a safety net, see the package doc on memory). Close is idempotent and safe to call
// from several goroutines; using a Tensor while another goroutine closes it is a bug (as with
// files), reported as a panic wrapping ErrClosed when detected.
type Tensor struct {
	p       atomic.Pointer[C.char] // the ct_tensor (an incomplete C type cannot be a type argument)
	cleanup runtime.Cleanup
}

// newTensor wraps a handle returned by the C ABI (nil for a NULL handle).
func newTensor(p C.ct_tensor) *Tensor {
	if p == nil {
		return nil
	}
	t := &Tensor{}
	t.p.Store((*C.char)(unsafe.Pointer(p)))
	t.cleanup = runtime.AddCleanup(t, freeHandle, p)
	noteAllocation()
	return t
}

func freeHandle(p C.ct_tensor) { C.ct_tensor_free(p) }

// Close releases the tensor's handle (and its memory, unless other tensors share it).
func (t *Tensor) Close() {
	if t == nil {
		return
	}
	if p := t.p.Swap(nil); p != nil {
		t.cleanup.Stop()
		// Stop holds t only as an address: without this, t can become unreachable while Stop
		// runs, its cleanup get queued (Stop then misses it) and the handle be freed twice.
		runtime.KeepAlive(t)
		C.ct_tensor_free(C.ct_tensor(unsafe.Pointer(p)))
	}
}

// c returns the handle, panicking with ErrClosed on a closed or nil Tensor. The caller must call
// runtime.KeepAlive(t) after the C call that uses the handle.
func (t *Tensor) c() C.ct_tensor {
	if t == nil {
		panic(&Error{Op: "tensor", Msg: "nil *Tensor", Kind: ErrClosed})
	}
	p := t.p.Load()
	if p == nil {
		panic(&Error{Op: "tensor", Msg: "tensor is closed", Kind: ErrClosed})
	}
	return C.ct_tensor(unsafe.Pointer(p))
}

// cOrErr is c for functions that return errors instead of panicking.
func (t *Tensor) cOrErr(op string) (C.ct_tensor, error) {
	if t == nil {
		return nil, &Error{Op: op, Msg: "nil *Tensor", Kind: ErrClosed}
	}
	p := t.p.Load()
	if p == nil {
		return nil, &Error{Op: op, Msg: "tensor is closed", Kind: ErrClosed}
	}
	return C.ct_tensor(unsafe.Pointer(p)), nil
}

// Closed reports whether Close was called.
func (t *Tensor) Closed() bool { return t == nil || t.p.Load() == nil }

// Dim is the number of dimensions.
func (t *Tensor) Dim() int {
	var n C.int32_t
	must("dim", C.ct_tensor_ndim(&n, t.c()))
	runtime.KeepAlive(t)
	return int(n)
}

// Shape returns the sizes of the dimensions.
func (t *Tensor) Shape() []int64 {
	var n C.int32_t
	p := t.c()
	must("shape", C.ct_tensor_ndim(&n, p))
	// Sized from the tensor's own rank (libtorch has no limit of 64 dimensions); the C side
	// writes at most len(out) sizes.
	out := make([]int64, int(n))
	if len(out) > 0 {
		must("shape", C.ct_tensor_shape((*C.int64_t)(unsafe.Pointer(&out[0])), n, p))
	}
	runtime.KeepAlive(t)
	return out
}

// Size returns the size of dimension d (negative d counts from the end).
func (t *Tensor) Size(d int) int64 {
	s := t.Shape()
	if d < 0 {
		d += len(s)
	}
	if d < 0 || d >= len(s) {
		panic(&Error{Op: "size", Msg: fmt.Sprintf("dimension %d out of range for %d dims", d, len(s)), Kind: ErrTorch})
	}
	return s[d]
}

// Numel is the number of elements.
func (t *Tensor) Numel() int64 {
	var n C.int64_t
	must("numel", C.ct_tensor_numel(&n, t.c()))
	runtime.KeepAlive(t)
	return int64(n)
}

// DType is the element type.
func (t *Tensor) DType() DType {
	var d C.int32_t
	must("dtype", C.ct_tensor_dtype(&d, t.c()))
	runtime.KeepAlive(t)
	return DType(d)
}

// Device is where the tensor lives.
func (t *Tensor) Device() Device {
	var d C.ct_device
	must("device", C.ct_tensor_device(&d, t.c()))
	runtime.KeepAlive(t)
	return deviceFromC(d)
}

// String renders the tensor with libtorch's printer ("<closed>" for a closed tensor).
func (t *Tensor) String() string {
	p, err := t.cOrErr("string")
	if err != nil {
		return "<closed>"
	}
	var s *C.char
	if err := toError("string", C.ct_tensor_string(&s, p)); err != nil {
		return "<" + err.Error() + ">"
	}
	runtime.KeepAlive(t)
	defer C.ct_string_free(s)
	return C.GoString(s)
}

// Share returns a second Tensor sharing this one's storage and autograd history (a new handle:
// closing either leaves the other intact).
func (t *Tensor) Share() *Tensor {
	var out C.ct_tensor
	must("share", C.ct_tensor_shallow_clone(&out, t.c()))
	runtime.KeepAlive(t)
	return newTensor(out)
}

// To returns the tensor on device d with dtype dtype (KeepDType, or any dtype < 0, keeps t's).
// Like PyTorch's Tensor.to, it copies only when something changes: when t already has that
// dtype and d is t.Device() (CPU for every CPU tensor: "cpu:0" copies, as in PyTorch; CUDA index
// -1 stands for the current GPU), the result is a new handle sharing t's storage, as Share
// gives, so writing to either changes both (nn.To relies on this: moving a model where it
// already is costs nothing). Use Clone for an independent copy. It returns ErrDevice when the
// device is not available or not valid (a CPU index other than -1 or 0, say).
func (t *Tensor) To(d Device, dtype DType) (*Tensor, error) {
	p, err := t.cOrErr("to")
	if err != nil {
		return nil, err
	}
	if err := d.checkAvailable(); err != nil {
		return nil, err
	}
	var out C.ct_tensor
	if err := toError("to", C.ct_tensor_to(&out, p, d.c(), C.int32_t(dtype))); err != nil {
		return nil, err
	}
	runtime.KeepAlive(t)
	return newTensor(out), nil
}

// KeepDType is the dtype argument of To that keeps the tensor's dtype.
const KeepDType DType = -1
