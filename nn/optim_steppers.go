package nn

import (
	"errors"
	"sync"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// stepSteppers calls Step of every Stepper and joins their errors in the Steppers' order.
//
// The Steppers whose tables are all local embedding tables step side by side on up to
// cgotorch.NumThreads() goroutines, the calling one included: such a table's update reads and
// writes only its own rows and states, and a table applies all its pending gradients under its
// own lock, so two Steppers over one table give the same result in either order. Each table is
// updated exactly as on one thread, whichever goroutine runs it: the result does not depend on
// the thread count. The calling goroutine never waits for a helper that has not started: it
// takes every Stepper left and then waits only for those a helper has begun (runShared). Other
// Steppers (a sharded table's, whose steps talk to other processes in order) step one after the
// other on the calling goroutine, in their order.
func (o *Optimizer) stepSteppers() error {
	if len(o.steppers) < 2 || cgotorch.NumThreads() < 2 {
		var errs []error
		for _, s := range o.steppers {
			if err := s.Step(); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	errs := make([]error, len(o.steppers))
	var local []int
	for i, s := range o.steppers {
		if localStepper(s) {
			local = append(local, i)
		} else {
			errs[i] = s.Step()
		}
	}
	helpers := 0
	if len(local) > 1 {
		helpers = min(cgotorch.NumThreads(), len(local)) - 1
	}
	runShared(len(local), helpers, func(k int) { errs[local[k]] = o.steppers[local[k]].Step() })
	return errors.Join(errs...)
}

// localStepper reports whether s is an Embedding, EmbeddingBag or EmbeddingBagCollection whose
// tables are all local embedding tables.
func localStepper(s Stepper) bool {
	ts := stepperTables(s)
	for _, t := range ts {
		if _, ok := t.(*embedding.Table); !ok {
			return false
		}
	}
	return len(ts) > 0
}

// runShared calls do(0) to do(n-1), each once, on the calling goroutine and up to helpers
// helper goroutines, which claim the next index as they come. It returns when every call has
// returned; it waits only for calls a helper has begun, so a helper that has not started by the
// time the caller has claimed the last index costs nothing (it finds no work when it runs). A
// panic in a helper's call is raised again on the calling goroutine.
func runShared(n, helpers int, do func(i int)) {
	c := &workClaims{n: n}
	c.done.L = &c.mu
	for h := 0; h < helpers; h++ {
		go c.help(do)
	}
	for {
		i, ok := c.claim(false)
		if !ok {
			break
		}
		do(i)
	}
	c.mu.Lock()
	for c.busy > 0 {
		c.done.Wait()
	}
	p := c.panicked
	c.mu.Unlock()
	if p != nil {
		panic(p)
	}
}

// workClaims hands out the indexes of runShared.
type workClaims struct {
	mu       sync.Mutex
	done     sync.Cond // signalled when busy falls to 0
	next, n  int
	busy     int // indexes a helper has claimed and not finished
	panicked any
}

// claim returns the next index, and false when none is left; a helper's claim counts as busy
// until it calls finish.
func (c *workClaims) claim(helper bool) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next >= c.n {
		return 0, false
	}
	i := c.next
	c.next++
	if helper {
		c.busy++
	}
	return i, true
}

// help runs claimed indexes until none is left.
func (c *workClaims) help(do func(i int)) {
	for {
		i, ok := c.claim(true)
		if !ok {
			return
		}
		if !c.run(do, i) {
			return
		}
	}
}

// run calls do(i) and marks it finished; it reports false (and keeps the value for runShared)
// when do panicked.
func (c *workClaims) run(do func(i int), i int) (ok bool) {
	defer func() {
		p := recover()
		c.mu.Lock()
		if p != nil && c.panicked == nil {
			c.panicked = p
		}
		c.busy--
		if c.busy == 0 {
			c.done.Broadcast()
		}
		c.mu.Unlock()
		ok = p == nil
	}()
	do(i)
	return true
}
