package dist

import (
	"errors"
	"fmt"

	"github.com/gorec/gorec/cgotorch"
)

// Sentinel errors; every error of this package wraps one of them (test with errors.Is).
//
// A sentinel is defined once and re-exported as an alias (as os.ErrNotExist = fs.ErrNotExist):
// those the C layer reports live in cgotorch, so errors.Is(err, ErrTimeout) and errors.Is(err,
// cgotorch.ErrTimeout) give the same answer for any error. Only ErrConfig is this package's own.
var (
	// ErrTimeout: a rank did not take part in time (it skipped the collective, is stuck, or
	// never joined the group).
	ErrTimeout = cgotorch.ErrTimeout
	// ErrPeer: a peer failed or left (its connection closed or broke).
	ErrPeer = cgotorch.ErrPeer
	// ErrRefused: a rank of another job, or announcing another world size, or a second process
	// claiming a rank, was refused at the start.
	ErrRefused = cgotorch.ErrRefused
	// ErrBroken: the group is out of step after a failed collective and unusable: every rank
	// must close it and start again (e.g. from the last checkpoint).
	ErrBroken = cgotorch.ErrBroken
	// ErrClosed: the group was closed, or a tensor argument was.
	ErrClosed = cgotorch.ErrClosed
	// ErrInvalidArgument: this rank's arguments were refused before anything was sent (the
	// other ranks get ErrMismatch); the group stays usable.
	ErrInvalidArgument = cgotorch.ErrInvalidArgument
	// ErrMismatch: the ranks called different collectives, or the same with different dtypes,
	// shapes, reductions or roots, or another rank refused its arguments. Every rank gets it
	// (or ErrInvalidArgument) and nothing was sent: the group stays usable.
	ErrMismatch = cgotorch.ErrMismatch
	// ErrConfig: the options or torchrun's environment are incomplete or inconsistent.
	ErrConfig = errors.New("dist: invalid configuration")
)

// Error is a failure of a group operation. It wraps Kind (one of the sentinels), ErrBroken too
// when the failure broke the group, and the underlying error.
type Error struct {
	Op     string
	Kind   error
	Broken bool // the group is unusable after this error
	Err    error
}

func (e *Error) Error() string {
	msg := e.Kind.Error()
	var ce *cgotorch.Error
	switch {
	case errors.As(e.Err, &ce):
		msg = ce.Msg // libtorch's message, without cgotorch's operation prefix
	case e.Err != nil:
		msg = e.Err.Error()
	}
	if e.Broken && e.Kind != ErrBroken {
		return fmt.Sprintf("dist: %s: %s (the process group is broken)", e.Op, msg)
	}
	return fmt.Sprintf("dist: %s: %s", e.Op, msg)
}

// Unwrap returns the sentinels and the underlying error.
func (e *Error) Unwrap() []error {
	errs := []error{e.Kind}
	if e.Broken && e.Kind != ErrBroken {
		errs = append(errs, ErrBroken)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// kinds are the sentinels an error of cgotorch can carry into this package, in the order wrap
// tests them; any other failure is ErrPeer.
var kinds = []error{ErrTimeout, ErrPeer, ErrRefused, ErrBroken, ErrClosed, ErrInvalidArgument, ErrMismatch}

// wrap turns an error of cgotorch into an *Error of op. Timeouts and failed peers break the
// group: the ranks are out of step.
func wrap(op string, err error) *Error {
	kind := ErrPeer
	for _, k := range kinds {
		if errors.Is(err, k) {
			kind = k
			break
		}
	}
	broken := kind == ErrTimeout || kind == ErrPeer || kind == ErrBroken
	return &Error{Op: op, Kind: kind, Broken: broken, Err: err}
}
