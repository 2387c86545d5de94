// Package ctable is the Go binding of the embedding engine's C ABI (the ct_table_* functions of
// cgotorch.h): one thin wrapper per C call, with the handle locking, argument checks and
// conversions that the C side cannot do. Package embedding, the engine's Go API, is its only
// user; nothing here is meant for anyone else, which is why it is internal.
//
// A call goes embedding.Table → ctable.Table → ct_table_* → the C++ engine.
//
// # No C sources of its own
//
// The engine's C and C++ are compiled once, in package cgotorch, together with the tensor code
// they share libtorch with. This package's cgo preamble only includes cgotorch.h, and its calls
// link against the symbols that cgotorch (which it imports) compiled. A second copy of libtorch's
// C++ in another cgo package would need exported C++ helpers and handle conversions instead.
//
// # Tensors and errors cross through a hook
//
// cgo gives each package its own Go type for a C type, and cgotorch exports no C handles. So
// tensors and errors cross from one package to the other through internal/ctensor: a few
// function variables that cgotorch sets in its init (importing cgotorch guarantees that they are
// set before any call here). Through them this package reads a *cgotorch.Tensor's ct_tensor,
// wraps a returned ct_tensor as a *cgotorch.Tensor, checks a cgotorch.Device, and converts a
// ct_error with cgotorch's own conversion, whose code (ct_error_code) gives the sentinel. The
// sentinels are defined once, in cgotorch (errors.go); embedding re-exports them as aliases.
//
// # Errors, not panics
//
// Table state depends on data, so every method returns an error rather than panicking, as
// cgotorch's functions that depend on data do. Errors are *cgotorch.Error values wrapping a
// cgotorch sentinel (the Err names in this package's comments are cgotorch's); bad input
// (ErrInvalidArgument) changes nothing.
//
// The C-level baseline of the lookup benchmark lives apart, in the test-only package clookup.
package ctable
