package cgotorch

// #include "cgotorch.h"
import "C"

import "runtime"

// SetRequiresGrad marks t (a leaf) as recording gradients; it returns t.
func (t *Tensor) SetRequiresGrad(b bool) *Tensor {
	v := C.int32_t(0)
	if b {
		v = 1
	}
	must("set requires grad", C.ct_tensor_set_requires_grad(t.c(), v))
	runtime.KeepAlive(t)
	return t
}

// RequiresGrad reports whether t records gradients.
func (t *Tensor) RequiresGrad() bool {
	var v C.int32_t
	must("requires grad", C.ct_tensor_requires_grad(&v, t.c()))
	runtime.KeepAlive(t)
	return v != 0
}

// Backward computes the gradients of the scalar t with respect to the leaves that require them.
func (t *Tensor) Backward() {
	must("backward", C.ct_tensor_backward(t.c(), nil, 0))
	runtime.KeepAlive(t)
}

// BackwardWith backpropagates grad (shaped like t); retainGraph keeps the graph for another pass.
func (t *Tensor) BackwardWith(grad *Tensor, retainGraph bool) {
	r := C.int32_t(0)
	if retainGraph {
		r = 1
	}
	var g C.ct_tensor
	if grad != nil {
		g = grad.c()
	}
	must("backward", C.ct_tensor_backward(t.c(), g, r))
	runtime.KeepAlive(t)
	runtime.KeepAlive(grad)
}

// Grad returns the accumulated gradient of t (sharing its memory), or nil if there is none.
func (t *Tensor) Grad() *Tensor {
	var out C.ct_tensor
	must("grad", C.ct_tensor_grad(&out, t.c()))
	runtime.KeepAlive(t)
	return newTensor(out)
}

// ZeroGrad sets t's accumulated gradient to zero, if it has one.
func (t *Tensor) ZeroGrad() {
	must("zero grad", C.ct_tensor_zero_grad(t.c()))
	runtime.KeepAlive(t)
}

// Detach returns a tensor sharing t's data but outside the autograd graph.
func (t *Tensor) Detach() *Tensor {
	var out C.ct_tensor
	must("detach", C.ct_tensor_detach(&out, t.c()))
	runtime.KeepAlive(t)
	return newTensor(out)
}

// SetData gives t the data of src (its storage, shape, dtype and device), as PyTorch's
// `t.data = src`: t stays the same tensor to autograd and to everyone holding it (a leaf keeps
// requires-grad), and its gradient is left as it was. This is how a parameter moves to another
// device in place (see nn.To). It returns an error wrapping ErrClosed for a nil or closed tensor,
// and one wrapping ErrTorch where PyTorch raises: integer or bool data for a tensor that requires
// grad (every tensor this package makes is dense, and otherwise any one can back any other).
func (t *Tensor) SetData(src *Tensor) error {
	p, err := t.cOrErr("set data")
	if err != nil {
		return err
	}
	s, err := src.cOrErr("set data")
	if err != nil {
		return err
	}
	err = toError("set data", C.ct_tensor_set_data(p, s))
	runtime.KeepAlive(t)
	runtime.KeepAlive(src)
	return err
}

// NoGrad runs f with gradient recording off on the calling goroutine (which stays on one OS
// thread meanwhile: libtorch's grad mode is per thread). Goroutines started by f are not covered.
func NoGrad(f func()) { withGradMode(false, f) }

// EnableGrad runs f with gradient recording on (inside NoGrad, for instance).
func EnableGrad(f func()) { withGradMode(true, f) }

func withGradMode(enabled bool, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	v := C.int32_t(0)
	if enabled {
		v = 1
	}
	var prev C.int32_t
	must("grad mode", C.ct_grad_mode_set(&prev, v))
	defer func() {
		var ignored C.int32_t
		must("grad mode", C.ct_grad_mode_set(&ignored, prev))
	}()
	f()
}

// gradModeEnabled reports the calling thread's grad mode (for tests; callers must be locked to
// their thread for the answer to mean anything).
func gradModeEnabled() bool {
	var prev, ignored C.int32_t
	must("grad mode", C.ct_grad_mode_set(&prev, 1))
	must("grad mode", C.ct_grad_mode_set(&ignored, prev))
	return prev != 0
}
