package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"unsafe"

	"github.com/gorec/gorec/internal/ctensor"
)

// The hook of internal/ctensor: the table binding (internal/ctable) passes tensors, errors and
// devices through it, so that this package exports no C handles.
func init() {
	ctensor.Handle = func(op, what string, t any) (unsafe.Pointer, error) {
		p, err := tensorArg(op, what, t.(*Tensor))
		return unsafe.Pointer(p), err
	}
	ctensor.Wrap = func(p unsafe.Pointer) any { return newTensor(C.ct_tensor(p)) }
	ctensor.Error = func(op string, e unsafe.Pointer) error { return toError(op, C.ct_error(e)) }
	ctensor.CheckDevice = func(d any) error { return d.(Device).checkAvailable() }
}

// tensorArg is the handle of a tensor argument; nil or closed tensors are bad input.
func tensorArg(op, what string, t *Tensor) (C.ct_tensor, error) {
	if t == nil {
		return nil, &Error{Op: op, Msg: what + " is a nil *Tensor", Kind: ErrInvalidArgument}
	}
	p := t.p.Load()
	if p == nil {
		return nil, &Error{Op: op, Msg: what + " tensor is closed", Kind: ErrInvalidArgument}
	}
	return C.ct_tensor(unsafe.Pointer(p)), nil
}
