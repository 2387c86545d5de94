// Package cgotorch is gorec's binding to libtorch: tensors, scopes, autograd, devices, errors.
// It has three layers: libtorch's C++ API, a C ABI (cgotorch.h: typed opaque handles,
// out-parameters, every entry point guarded so that C++ exceptions come back as error strings
// from the same call), and this Go API (Tensor and friends).
//
// This package compiles all of gorec's C and C++, the embedding engine's included, but binds
// only the tensor part of the C ABI. The engine's Go binding is internal/ctable: it includes
// cgotorch.h, links against what this package compiles, and passes tensors and errors through
// internal/ctensor, a hook this package fills in at init, so that no C handle is exported here.
// Package embedding is the engine's Go API.
//
// # Error policy
//
// One rule decides whether a function returns an error or panics:
//
//   - Tensor math (arithmetic, reductions, shape changes, losses, autograd) treats wrong shapes,
//     dtypes or devices as programming errors, like an out-of-range slice index in Go: it panics
//     with a *Error that carries libtorch's message. Try(func(){...}) turns such a panic back into
//     an error for callers that want one (a model server validating requests, say).
//   - Everything that moves data across the Go boundary or depends on data, files or devices
//     returns an error: FromSlice, ToSlice, Item, To(device), SetNumThreads.
//
// Every error wraps one of the sentinels ErrTorch, ErrClosed, ErrInvalidArgument and ErrDevice
// (the embedding engine's and process groups' add theirs: ErrNameTaken, ErrTimeout, ...; use
// errors.Is).
// The C layer's errors carry a code (ct_error_code), which gives the sentinel. Packages embedding
// and dist re-export these sentinels as aliases, never as sentinels of their own. Nothing crashes
// the process: the C layer catches every C++ exception.
//
// # Memory policy
//
// A Tensor owns one handle to C memory that the Go garbage collector cannot see. Release it in
// one of three ways, from the most to the least immediate:
//
//   - Close() frees it at once (idempotent, safe from several goroutines);
//   - WithScope(func(s *Scope){...}) frees every tensor the goroutine created inside, except
//     those passed to s.Keep — the natural unit is one training step (TryWithScope runs one
//     and returns its error, or the *Error its tensor math panicked with);
//   - otherwise a cleanup (runtime.AddCleanup) frees it after the Tensor becomes unreachable.
//
// To make the last one safe for loops that never free anything, the C allocator counts live
// bytes (LiveBytes) and every tensor creation forces a garbage collection when they have grown by
// more than SetGCThreshold's value (DefaultGCThreshold, 256 MiB) since the lowest point seen after
// the previous forced collection. LiveTensors counts live handles; tests use both counters to
// prove the absence of leaks.
//
// # Threads
//
// Tensors may be used from many goroutines; libtorch's operators are thread-safe for distinct
// outputs. Grad mode (NoGrad) is per OS thread in libtorch, and scopes are per OS thread here, so
// NoGrad and WithScope lock the calling goroutine to its thread while they run. SetNumThreads sets libtorch's intra-op
// thread count for the whole process, on every OS thread (OpenMP keeps it per thread; every C call
// re-applies a count its thread has not seen yet).
package cgotorch
