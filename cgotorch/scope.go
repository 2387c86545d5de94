package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"runtime"
)

// Scope collects the tensors created by one goroutine during WithScope, so that the
// temporaries of a training step are freed when the step ends instead of when the garbage
// collector finds them.
type Scope struct {
	p C.ct_scope
}

// WithScope runs f with a new scope open on the calling goroutine and then releases the memory of
// every tensor created by this goroutine inside f, except those passed to Keep (which move to the
// enclosing scope, if any). Using a released tensor afterwards panics with ErrClosed. Tensors
// created by other goroutines, even ones started inside f, are not part of the scope.
// The goroutine stays on one OS thread while f runs. Scopes nest.
func WithScope(f func(s *Scope)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := &Scope{}
	must("scope begin", C.ct_scope_begin(&s.p))
	defer func() {
		must("scope end", C.ct_scope_end(nil, s.p))
		s.p = nil
	}()
	f(s)
}

// Keep takes tensors out of the scope so that they outlive it: each moves to the enclosing
// scope, if any. This holds for a tensor created in a scope opened inside s (Keep on the outer
// scope, called from the inner one, takes it out of both); Keep leaves a tensor created outside
// s alone.
func (s *Scope) Keep(ts ...*Tensor) {
	if s.p == nil {
		panic(&Error{Op: "scope keep", Msg: "scope has ended", Kind: ErrClosed})
	}
	for _, t := range ts {
		must("scope keep", C.ct_scope_keep(s.p, t.c()))
		runtime.KeepAlive(t)
	}
}

// TryWithScope runs f in WithScope and returns f's error, or the *Error of a tensor operation
// that panicked inside f (as Try does): the shape of one training or evaluation step, whose
// temporaries are freed when it returns and whose shape errors come back as errors.
func TryWithScope(f func() error) (err error) {
	WithScope(func(*Scope) {
		var ferr error
		if err = Try(func() { ferr = f() }); err == nil {
			err = ferr
		}
	})
	return err
}
