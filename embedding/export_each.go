package embedding

import (
	"context"

	"github.com/gorec/gorec/internal/ctable"
)

// ExportChunk is one chunk of ExportEach. Its slices view memory that is valid only during the
// call of ExportEach's function: copy what must outlive it.
type ExportChunk struct {
	Offset int   // position of the chunk's first id in the whole export
	Total  int   // ids in the whole export
	Step   int64 // the table's step counter
	IDs    []int64
	Rows   []float32 // [len(IDs) * Dim], row after row
	States []ChunkState
	// LastStep and Frequency are the rows' metadata (see Metadata) when the table tracks
	// access; nil otherwise.
	LastStep, Frequency []int64
}

// ChunkState is an optimizer state of the rows of an ExportChunk.
type ChunkState struct {
	Name   string
	Values []float32 // [len(IDs) * Dim], or [len(IDs)] for RowWiseAdagrad's "sum"
}

// ExportEach streams what Export returns, chunkRows ids at a time, without the whole snapshot in
// memory: fn gets each chunk in turn (ids ascending across chunks; no call for an empty table),
// on the host whatever the table's device. It is one consistent snapshot: the table is locked
// shared during the whole call, so lookups of present ids go on and writers wait, and fn must
// not call the table. Beyond a chunk's buffers it holds 16 bytes an id (32 while it sorts them).
// An error fn returns stops the export and is returned as is; a panic in fn stops it too and
// comes back as an ErrInternal error. For pushing a large table to a serving store, or writing
// it in a format of one's own. ctx is checked before each chunk: once it is done the export
// stops, returning an error that wraps ctx.Err().
func (t *Table) ExportEach(ctx context.Context, chunkRows int, fn func(*ExportChunk) error) error {
	if t == nil {
		return errNilTable
	}
	const op = "export each"
	if chunkRows <= 0 {
		return badInput(op, t.name, "chunkRows must be > 0, got %d", chunkRows)
	}
	if err := stopped(ctx, op, t.name); err != nil {
		return err
	}
	var fnErr error
	err := t.t.ExportChunks(int64(chunkRows), func(c *ctable.Chunk) error {
		if fnErr = stopped(ctx, op, t.name); fnErr != nil {
			return fnErr
		}
		ch := &ExportChunk{Offset: int(c.Offset), Total: int(c.TotalRows), Step: c.Step, IDs: c.IDs, Rows: c.Rows}
		for i, v := range c.States {
			ch.States = append(ch.States, ChunkState{Name: c.StateNames[i], Values: v})
		}
		if len(c.LastStep) > 0 {
			ch.LastStep, ch.Frequency = c.LastStep, c.Frequency
		}
		fnErr = fn(ch)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	return wrap(op, t.name, err)
}
