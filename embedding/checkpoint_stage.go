package embedding

import "github.com/gorec/gorec/internal/ctable"

// checkpoint_stage.go: a staged save (SaveOptions.Staged) copies a table's save stream into
// memory and writes the copy after the table's lock is released. The memory is allocated, and
// each of its pages written once, before the save takes the lock: fresh pages fault on their
// first write (on this project's VM faulting 1.6 GB took 0.6-2.2 s, the walk and copy under the
// lock 0.4-0.6 s), and that must not happen while the table's writers wait.

// stager holds the copies; rows inserted after it was sized go to memory allocated as they come.
type stager struct {
	ints   []int64   // unused part of the int64 arena: ids, last steps, frequencies, stamps
	floats []float32 // unused part of the float32 arena: rows and states
	chunks []*ctable.Chunk
}

// newStager sizes the arenas for rows rows of floatsPerRow floats (and a margin for rows
// inserted before the save starts) and touches every page of them.
func newStager(rows, floatsPerRow int64) *stager {
	rows += rows/64 + 1024
	s := &stager{ints: make([]int64, 4*rows), floats: make([]float32, floatsPerRow*rows)}
	touch(s.ints)
	touch(s.floats)
	return s
}

// touch writes one element of every 4 KiB page of x.
func touch[T int64 | float32](x []T) {
	for i := 0; i < len(x); i += 512 {
		x[i] = 0
	}
}

// take returns a copy of x carved from *arena (or newly allocated once the arena is used up);
// nil stays nil.
func take[T int64 | float32](arena *[]T, x []T) []T {
	if x == nil {
		return nil
	}
	var d []T
	if len(*arena) >= len(x) {
		d, *arena = (*arena)[:len(x):len(x)], (*arena)[len(x):]
	} else {
		d = make([]T, len(x))
	}
	copy(d, x)
	return d
}

// add is the save's sink: it keeps a copy of c (whose slices view C memory).
func (s *stager) add(c *ctable.Chunk) error {
	d := *c
	d.IDs, d.Counts = take(&s.ints, c.IDs), take(&s.ints, c.Counts)
	d.LastStep, d.Frequency, d.Stamp = take(&s.ints, c.LastStep), take(&s.ints, c.Frequency), take(&s.ints, c.Stamp)
	d.Rows = take(&s.floats, c.Rows)
	d.States = nil
	for _, st := range c.States {
		d.States = append(d.States, take(&s.floats, st))
	}
	s.chunks = append(s.chunks, &d)
	return nil
}

// replay hands the copies to sink in order, dropping each once written.
func (s *stager) replay(sink func(*ctable.Chunk) error) error {
	for i, c := range s.chunks {
		if err := sink(c); err != nil {
			return err
		}
		s.chunks[i] = nil
	}
	return nil
}
