package ctable

// #include "../../cgotorch/cgotorch.h"
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// sinkState is what a ct_table_save or ct_table_export_chunks stream reports to: the Go
// function and its first error.
type sinkState struct {
	f     func(*Chunk) error
	dim   int
	w     []int    // state widths
	names []string // state names
	err   error
}

// ctTableSink is the ct_table_sink of Table.Save and Table.ExportChunks: it hands each chunk
// to the Go function as slices over the C buffers (valid during the call only). A non-nil
// error or a panic stops the stream.
//
//export ctTableSink
func ctTableSink(ctx C.uintptr_t, c *C.ct_table_chunk) (ret C.int32_t) {
	s := cgo.Handle(ctx).Value().(*sinkState)
	defer func() {
		if r := recover(); r != nil {
			s.err = fmt.Errorf("ctable: table sink panicked: %v", r)
			ret = 1
		}
	}()
	n := int(c.count)
	ch := &Chunk{
		Kind:        ChunkKind(c.kind),
		TotalRows:   int64(c.total_rows),
		TotalCounts: int64(c.total_counts),
		Step:        int64(c.step),
		Chain:       DeltaChain{Lineage: uint64(c.delta_lineage), Seq: int64(c.delta_seq)},
		Offset:      int64(c.offset),
		IDs:         int64s(c.ids, n),
	}
	if ch.Kind == ChunkRows {
		ch.Rows = float32s(c.rows, n*s.dim)
		ch.StateNames = s.names
		for i, w := range s.w {
			ch.States = append(ch.States, float32s(c.states[i], n*w))
		}
		ch.LastStep = int64s(c.last_step, n)
		ch.Frequency = int64s(c.frequency, n)
		ch.Stamp = int64s(c.stamp, n)
	} else {
		ch.Counts = int64s(c.counts, n)
	}
	if err := s.f(ch); err != nil {
		s.err = err
		return 1
	}
	return 0
}

func int64s(p *C.int64_t, n int) []int64 {
	if n == 0 || p == nil {
		return []int64{}
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(p)), n)
}

func float32s(p *C.float, n int) []float32 {
	if n == 0 || p == nil {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), n)
}
