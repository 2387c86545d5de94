package embedding

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/gorec/gorec/cgotorch"
)

// Sentinel errors: every error of this package wraps one of them (test with errors.Is) and,
// when the C layer reported it, the *cgotorch.Error it came from.
//
// A sentinel is defined once, in the package whose layer detects the failure, and re-exported
// elsewhere as an alias (as os.ErrNotExist = fs.ErrNotExist): those of the C ABI live in
// cgotorch, so errors.Is(err, ErrBadInput) and errors.Is(err, cgotorch.ErrInvalidArgument) give
// the same answer for any error. Only ErrCorrupt and ErrInternal are this package's own.
var (
	// ErrBadInput: wrong dtype, rank, shape, device, contiguity, a NaN or Inf gradient or value,
	// a bad configuration. The table is exactly as it was before the call.
	ErrBadInput = cgotorch.ErrInvalidArgument
	// ErrClosed: the table was closed (by any of its handles).
	ErrClosed = cgotorch.ErrClosed
	// ErrNameTaken: an open table already has that name.
	ErrNameTaken = cgotorch.ErrNameTaken
	// ErrNotFound: no open table has that name, or the checkpoint or delta file to load is not
	// there (the OS error is wrapped too: errors.Is(err, fs.ErrNotExist)).
	ErrNotFound = cgotorch.ErrNotFound
	// ErrUnknownPrefetch: the prefetch was already waited for or discarded (a Wait during which
	// another goroutine discards it returns this too), or another Wait is waiting for it.
	ErrUnknownPrefetch = cgotorch.ErrUnknownPrefetch
	// ErrDevice: the requested device is not available.
	ErrDevice = cgotorch.ErrDevice
	// ErrInternal: libtorch or the C layer failed for another reason (out of memory, ...), or
	// reading or writing a file failed.
	ErrInternal = errors.New("embedding: internal error")
	// ErrCorrupt: a checkpoint or delta is malformed (bad magic or version, truncated, lengths
	// that do not add up, checksum mismatch). Nothing was loaded.
	ErrCorrupt = errors.New("embedding: corrupt checkpoint")
	// ErrIncompatible: a checkpoint's table does not fit the table it is loaded into (dim,
	// optimizer, layout, block rows), or a delta does not fit the table it is applied to (another
	// optimizer, or not the next delta of the table's chain: see ApplyDelta). Nothing changed.
	ErrIncompatible = cgotorch.ErrIncompatible
)

// Error is a failed table operation: the operation, the table, the sentinel it belongs to
// (Kind) and the underlying error (Err, often a *cgotorch.Error).
type Error struct {
	Op    string
	Table string
	Kind  error
	Err   error
}

func (e *Error) Error() string {
	if e.Table == "" {
		return fmt.Sprintf("embedding: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("embedding: table %q: %s: %v", e.Table, e.Op, e.Err)
}

// Unwrap gives both the sentinel and the underlying error to errors.Is and errors.As.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// kinds are the sentinels an error of cgotorch can carry into this package, in the order wrap
// tests them; any other failure is ErrInternal.
var kinds = []error{ErrBadInput, ErrClosed, ErrNameTaken, ErrNotFound, ErrUnknownPrefetch, ErrDevice, ErrIncompatible}

// stopped is the error of an operation whose context is done (nil while it is not): it
// wraps ctx.Err() (context.Canceled or context.DeadlineExceeded) as its Kind.
func stopped(ctx context.Context, op, table string) error {
	if ctx.Err() == nil {
		return nil
	}
	return &Error{Op: op, Table: table, Kind: ctx.Err(), Err: fmt.Errorf("stopped: %w", context.Cause(ctx))}
}

// wrap turns an error of cgotorch into an *Error whose Kind is the sentinel it wraps.
func wrap(op, table string, err error) error {
	if err == nil {
		return nil
	}
	kind := ErrInternal
	for _, k := range kinds {
		if errors.Is(err, k) {
			kind = k
			break
		}
	}
	return &Error{Op: op, Table: table, Kind: kind, Err: err}
}

// badInput is an ErrBadInput detected on the Go side.
func badInput(op, table, format string, args ...any) error {
	return &Error{Op: op, Table: table, Kind: ErrBadInput, Err: fmt.Errorf(format, args...)}
}

// fileError is the error of opening or reading a checkpoint or delta file: ErrNotFound when it
// is not there, ErrInternal for any other failure (permissions, I/O); err stays wrapped.
func fileError(op string, err error) error {
	kind := ErrInternal
	if errors.Is(err, fs.ErrNotExist) {
		kind = ErrNotFound
	}
	return &Error{Op: op, Kind: kind, Err: err}
}
