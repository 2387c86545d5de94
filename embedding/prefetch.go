package embedding

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// Prefetch is an asynchronous Read started by Table.Prefetch.
type Prefetch struct {
	table   *Table
	id      int64
	ids     []int64 // the ids' shape when not [N]
	st      *prefetchState
	cleanup runtime.Cleanup
}

// prefetchState is what a Prefetch shares with the goroutine that waits for it on the C side
// and with its cleanup. It does not refer to the Prefetch, so that an abandoned Prefetch
// becomes unreachable even while that goroutine waits.
type prefetchState struct {
	t       *ctable.Table
	id      int64
	mu      sync.Mutex
	started bool          // the waiting goroutine runs or ran (the first Wait starts it)
	waiting bool          // a Wait is waiting
	over    bool          // its rows were taken, or it was discarded or abandoned
	done    chan struct{} // closed once the goroutine has the result
	rows    *cgotorch.Tensor
	err     error
}

// Prefetch starts reading the rows of ids on a worker thread (as Read: nothing is inserted);
// Wait returns them. A Prefetch that is never waited for is discarded when it becomes
// unreachable (or call Discard).
func (t *Table) Prefetch(ids *cgotorch.Tensor) (*Prefetch, error) {
	if t == nil {
		return nil, errNilTable
	}
	s, err := t.flatIDs("prefetch", ids)
	if err != nil {
		return nil, err
	}
	defer s.close()
	id, err := t.t.Prefetch(s.flat, t.conf().ReadDefault.c())
	if err != nil {
		return nil, wrap("prefetch", t.name, err)
	}
	st := &prefetchState{t: t.t, id: id, done: make(chan struct{})}
	p := &Prefetch{table: t, id: id, st: st, ids: s.shape}
	p.cleanup = runtime.AddCleanup(p, func(s *prefetchState) { _ = s.discard() }, st)
	return p, nil
}

// ID is the prefetch's id in its table.
func (p *Prefetch) ID() int64 { return p.id }

// Wait blocks until the rows are read and returns them. If ctx is done first it returns an
// error wrapping ctx.Err() and the prefetch stays pending (Wait again, or Discard; its rows are
// released by Discard or once the Prefetch is unreachable). Waiting for a prefetch that was
// already waited for (or discarded) gives ErrUnknownPrefetch, and so does a Wait during which
// another goroutine discards the prefetch (it returns at once) or waits for it already (one
// Wait at a time).
//
// Wait does not poll: the first Wait starts a goroutine that blocks in the C wait and hands
// over the result, and Wait waits for that or for ctx, whichever comes first.
func (p *Prefetch) Wait(ctx context.Context) (*cgotorch.Tensor, error) {
	const op = "prefetch wait"
	s := p.st
	s.mu.Lock()
	if s.over || s.waiting {
		s.mu.Unlock()
		return nil, &Error{Op: op, Table: p.table.name, Kind: ErrUnknownPrefetch,
			Err: errors.New("the prefetch was already waited for or discarded, or another Wait waits for it")}
	}
	s.waiting = true
	if !s.started {
		s.started = true
		go s.await()
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		s.mu.Lock()
		s.waiting = false
		s.mu.Unlock()
		return nil, stopped(ctx, op, p.table.name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = false
	if s.over { // discarded while this Wait waited
		return nil, &Error{Op: op, Table: p.table.name, Kind: ErrUnknownPrefetch, Err: errors.New("the prefetch was discarded")}
	}
	s.over = true
	p.cleanup.Stop()
	rows, err := s.rows, s.err
	s.rows = nil
	if err != nil { // a failed read or a closed table: the prefetch is gone either way
		return nil, wrap(op, p.table.name, err)
	}
	return shaped{shape: p.ids}.back(rows, nil)
}

// await waits on the C side for the prefetch and keeps the result for Wait (dropping it if the
// prefetch was discarded meanwhile).
func (s *prefetchState) await() {
	rows, found, _, err := s.t.PrefetchWait(s.id, -1)
	found.Close()
	s.mu.Lock()
	if s.over {
		rows.Close()
		rows = nil
	}
	s.rows, s.err = rows, err
	s.mu.Unlock()
	close(s.done)
}

// Discard forgets the prefetch, also while another goroutine Waits for it (that Wait then
// returns ErrUnknownPrefetch at once), and releases its rows if they were read already.
// Discarding a prefetch that was already waited for or discarded, or whose table was closed,
// does nothing and returns nil.
func (p *Prefetch) Discard() error {
	err := p.st.discard()
	p.cleanup.Stop()
	return wrap("prefetch discard", p.table.name, err)
}

// discard marks the prefetch over, releases rows the goroutine holds and forgets the prefetch
// on the C side (which wakes a goroutine waiting there).
func (s *prefetchState) discard() error {
	s.mu.Lock()
	if s.over {
		s.mu.Unlock()
		return nil
	}
	s.over = true
	rows := s.rows
	s.rows = nil
	s.mu.Unlock()
	rows.Close()
	err := s.t.PrefetchDiscard(s.id)
	if errors.Is(err, cgotorch.ErrClosed) || errors.Is(err, cgotorch.ErrUnknownPrefetch) {
		// closed, or consumed by the waiting goroutine: gone either way
		return nil
	}
	return err
}
