//go:build unix

package embedding

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive flock on the checkpoint directory dir for a save, without waiting:
// a second save into dir at once (another goroutine or process; flock's locks belong to an
// open file, so two in one process exclude each other too) would delete the first one's files
// as leftovers. ErrBadInput when another save holds it. The lock goes with the process, so a
// save killed midway leaves none behind.
func lockDir(dir string) (unlock func(), err error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, &Error{Op: "save", Kind: ErrInternal, Err: err}
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &Error{Op: "save", Kind: ErrBadInput, Err: fmt.Errorf("another save into %s is in progress: saves into one directory must not overlap", dir)}
		}
		return nil, &Error{Op: "save", Kind: ErrInternal, Err: fmt.Errorf("lock %s: %w", dir, err)}
	}
	return func() { d.Close() }, nil // closing the last descriptor releases the lock
}
