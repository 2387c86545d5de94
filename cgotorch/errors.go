package cgotorch

// #include <stdlib.h>
// #include "cgotorch.h"
import "C"

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error of this package wraps one of them (test with errors.Is).
//
// They are the one definition of each kind of failure the C ABI reports: embedding and dist
// re-export them as aliases (embedding.ErrBadInput = ErrInvalidArgument, dist.ErrTimeout =
// ErrTimeout, as os.ErrNotExist = fs.ErrNotExist), so no package maps one sentinel to another.
var (
	// ErrTorch: libtorch rejected the operation (wrong shape, dtype, device, ...).
	ErrTorch = errors.New("cgotorch: libtorch error")
	// ErrClosed: the tensor (or other handle) was closed, or released by its scope.
	ErrClosed = errors.New("cgotorch: use of a closed handle")
	// ErrInvalidArgument: the Go-side arguments are inconsistent (data length vs shape, ...).
	ErrInvalidArgument = errors.New("cgotorch: invalid argument")
	// ErrDevice: the requested device does not exist in this build or on this machine.
	ErrDevice = errors.New("cgotorch: device not available")
	// ErrTimeout: a process group's peers did not take part within its timeout.
	ErrTimeout = errors.New("cgotorch: process group timeout")
	// ErrPeer: a process group's peer failed or left (a closed or broken connection).
	ErrPeer = errors.New("cgotorch: process group peer failed")
	// ErrRefused: a process group refused a rank of another job or world size.
	ErrRefused = errors.New("cgotorch: process group refused a rank")
	// ErrMismatch: the ranks of a process group called a collective with arguments that do not
	// match (or another rank refused its own); nothing was sent.
	ErrMismatch = errors.New("cgotorch: process group ranks disagree")
	// ErrBroken: a process group is out of step after an earlier failure.
	ErrBroken = errors.New("cgotorch: process group is broken")

	// The embedding engine's own (package embedding re-exports them).

	// ErrNameTaken: the name is already in use (embedding.ErrNameTaken).
	ErrNameTaken = errors.New("cgotorch: name taken")
	// ErrNotFound: nothing open has that name (embedding.ErrNotFound, also for a missing file).
	ErrNotFound = errors.New("cgotorch: not found")
	// ErrIncompatible: a delta that does not follow its target's position in its delta chain
	// (embedding.ErrIncompatible, also for a checkpoint that does not fit).
	ErrIncompatible = errors.New("cgotorch: incompatible checkpoint or delta")
	// ErrUnknownPrefetch: the prefetch id was never issued, was already waited for, or was
	// discarded.
	ErrUnknownPrefetch = errors.New("cgotorch: unknown prefetch")
)

// Error is a failure reported by libtorch or the C layer: the operation's name and the message
// (libtorch's message without its C++ backtrace). It wraps Kind, one of the sentinels.
type Error struct {
	Op   string
	Msg  string
	Kind error
}

func (e *Error) Error() string { return fmt.Sprintf("cgotorch: %s: %s", e.Op, e.Msg) }

// Unwrap returns the sentinel the error belongs to.
func (e *Error) Unwrap() error { return e.Kind }

// kinds are the sentinels of the C ABI's error codes; any other code is ErrTorch.
var kinds = map[C.int32_t]error{
	C.CT_ERR_INVALID_ARGUMENT: ErrInvalidArgument,
	C.CT_ERR_CLOSED:           ErrClosed,
	C.CT_ERR_NAME_TAKEN:       ErrNameTaken,
	C.CT_ERR_NOT_FOUND:        ErrNotFound,
	C.CT_ERR_UNKNOWN_PREFETCH: ErrUnknownPrefetch,
	C.CT_ERR_INCOMPATIBLE:     ErrIncompatible,
	C.CT_ERR_TIMEOUT:          ErrTimeout,
	C.CT_ERR_PEER:             ErrPeer,
	C.CT_ERR_REFUSED:          ErrRefused,
	C.CT_ERR_MISMATCH:         ErrMismatch,
	C.CT_ERR_BROKEN:           ErrBroken,
}

// toError converts (and frees) an error of the C ABI, whose code gives the sentinel; nil stays
// nil.
func toError(op string, e C.ct_error) error {
	if e == nil {
		return nil
	}
	msg := C.GoString(e)
	kind, ok := kinds[C.ct_error_code(e)]
	C.ct_error_free(e)
	if !ok {
		kind = ErrTorch
	}
	return &Error{Op: op, Msg: msg, Kind: kind}
}

// must panics with the *Error of a failed tensor operation (see the package doc's error policy).
func must(op string, e C.ct_error) {
	if err := toError(op, e); err != nil {
		panic(err)
	}
}

// Try runs f and returns the *Error of a tensor operation that panicked inside it, so that a
// caller can turn the panics of tensor math into an error. Other panics propagate unchanged.
func Try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(*Error); ok {
				err = e
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}
