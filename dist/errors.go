package dist

import (
	"errors"
	"fmt"

	"github.com/gorec/gorec/cgotorch"
)

// Sentinel errors; every error of this package wraps one of them (test with errors.Is).
var (
	// ErrTimeout: a rank did not take part in time (it skipped the collective, is stuck, or
	// never joined the group).
	ErrTimeout = errors.New("dist: timeout")
	// ErrPeer: a peer failed or left (its connection closed or broke).
	ErrPeer = errors.New("dist: peer failed")
	// ErrRefused: a rank of another job, or announcing another world size, or a second process
	// claiming a rank, was refused at the start.
	ErrRefused = errors.New("dist: rank refused")
	// ErrBroken: the group is out of step after a failed collective and unusable: every rank
	// must close it and start again (e.g. from the last checkpoint).
	ErrBroken = errors.New("dist: process group broken")
	// ErrClosed: the group was closed, or a tensor argument was.
	ErrClosed = errors.New("dist: closed")
	// ErrInvalidArgument: this rank's arguments were refused before anything was sent (the
	// other ranks get ErrMismatch); the group stays usable.
	ErrInvalidArgument = errors.New("dist: invalid argument")
	// ErrMismatch: the ranks called different collectives, or the same with different dtypes,
	// shapes, reductions or roots, or another rank refused its arguments. Every rank gets it
	// (or ErrInvalidArgument) and nothing was sent: the group stays usable.
	ErrMismatch = errors.New("dist: ranks disagree")
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

// kinds maps cgotorch's sentinels to this package's.
var kinds = []struct{ from, to error }{
	{cgotorch.ErrTimeout, ErrTimeout},
	{cgotorch.ErrPeer, ErrPeer},
	{cgotorch.ErrRefused, ErrRefused},
	{cgotorch.ErrBroken, ErrBroken},
	{cgotorch.ErrClosed, ErrClosed},
	{cgotorch.ErrInvalidArgument, ErrInvalidArgument},
	{cgotorch.ErrMismatch, ErrMismatch},
}

// wrap turns an error of cgotorch into an *Error of op. Timeouts and failed peers break the
// group: the ranks are out of step.
func wrap(op string, err error) *Error {
	kind := ErrPeer
	for _, k := range kinds {
		if errors.Is(err, k.from) {
			kind = k.to
			break
		}
	}
	broken := kind == ErrTimeout || kind == ErrPeer || kind == ErrBroken
	return &Error{Op: op, Kind: kind, Broken: broken, Err: err}
}
