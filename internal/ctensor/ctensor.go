// Package ctensor is the hook through which gorec's cgo packages besides cgotorch (the table
// binding internal/ctable) pass cgotorch's tensors and errors across the C ABI, without
// cgotorch exporting its C handles. cgotorch sets these functions in its init; a package that
// imports cgotorch runs after that init, so it finds them set.
//
// The unsafe.Pointers are handles of cgotorch.h (ct_tensor, ct_error): each cgo package has
// its own Go type for a C type, so a handle crosses from one package to another as a plain
// pointer. The anys are *cgotorch.Tensor and cgotorch.Device (this package cannot name them:
// cgotorch imports it). Being internal, the hook is not part of any public API.
package ctensor

import "unsafe"

var (
	// Handle returns the ct_tensor of t (a *cgotorch.Tensor), or a *cgotorch.Error wrapping
	// ErrInvalidArgument for a nil or closed tensor, its message naming the argument what.
	// Call runtime.KeepAlive(t) after the C call that uses the handle.
	Handle func(op, what string, t any) (unsafe.Pointer, error)
	// Wrap makes a ct_tensor returned by the C ABI a *cgotorch.Tensor that owns it (a nil
	// *cgotorch.Tensor for NULL).
	Wrap func(p unsafe.Pointer) any
	// Error converts and frees a ct_error, its code (ct_error_code) giving the sentinel; NULL
	// gives nil.
	Error func(op string, e unsafe.Pointer) error
	// CheckDevice returns an error wrapping ErrDevice when d (a cgotorch.Device) cannot be
	// used in this process.
	CheckDevice func(d any) error
)
