// Package scope runs the examples' training and evaluation steps: each in a cgotorch scope
// that frees its tensors at the end, with the panics of tensor math turned into errors.
package scope

import "github.com/gorec/gorec/cgotorch"

// Run calls f in a cgotorch.WithScope and returns f's error, or the *cgotorch.Error that f
// panicked with.
func Run(f func() error) (err error) {
	cgotorch.WithScope(func(*cgotorch.Scope) {
		var ferr error
		if err = cgotorch.Try(func() { ferr = f() }); err == nil {
			err = ferr
		}
	})
	return err
}
