package ctable

// #include <stdlib.h>
// #include "../../cgotorch/cgotorch.h"
// extern int32_t ctTableSink(uintptr_t, ct_table_chunk *);
// static ct_table_sink ct_go_table_sink(void) { return (ct_table_sink)ctTableSink; }
import "C"

import (
	"runtime"
	"runtime/cgo"
	"unsafe"

	"github.com/gorec/gorec/cgotorch"
)

// ChunkKind says what a Chunk holds.
type ChunkKind int32

// The chunk kinds of a Save stream: rows (with states and metadata), then admission counts.
const (
	ChunkRows   ChunkKind = C.CT_CHUNK_ROWS
	ChunkCounts ChunkKind = C.CT_CHUNK_COUNTS
)

// Chunk is one chunk of a Save stream. Its slices view C memory that is valid only during
// the call of the sink: copy what must outlive it.
type Chunk struct {
	Kind        ChunkKind
	TotalRows   int64 // rows in the whole save
	TotalCounts int64 // admission counts in the whole save
	Step        int64 // the step counter
	Offset      int64 // position of this chunk's first entry within its kind
	IDs         []int64
	Rows        []float32   // ChunkRows: [len(IDs), dim]
	States      [][]float32 // ChunkRows: one per optimizer state, [len(IDs), width]
	StateNames  []string    // the states' names (StateName), shared by every chunk: do not modify
	LastStep    []int64     // ChunkRows
	Frequency   []int64     // ChunkRows
	Stamp       []int64     // ChunkRows: the step SGD momentum is up to date with
	Counts      []int64     // ChunkCounts: how often IDs[i] was seen (admission)
	Chain       DeltaChain  // the table's position in its delta chain (Base unused)
}

// DeltaChain places a delta in its table's chain of deltas (see ct_table_delta_info): the
// table's lineage (a random id, never 0 for a table; 0 in a delta: none, applied unchecked),
// the mark sequence the delta follows (Base: 0 for a whole table) and the one it brings a
// copy to (Seq: Base + 1 when the delta set a mark, else Base).
type DeltaChain struct {
	Lineage   uint64
	Base, Seq int64
}

// DeltaState is the table-wide state a delta carries besides its rows: the optimizer's
// parameters (the learning rate at [0]), the admission threshold and the admission counts
// changed since the delta's base (a count of 0: no longer counted), ids ascending; with
// CountsReplace they are every count of the table and replace the copy's.
type DeltaState struct {
	OptParams     [8]float64
	AdmitAfter    int64
	CountsReplace bool
	CountIDs      []int64
	Counts        []int64
}

// EvictPolicy selects the rows Evict removes.
type EvictPolicy int32

// The eviction policies and the meaning of their parameter.
const (
	EvictTTL   EvictPolicy = C.CT_EVICT_TTL   // rows last seen more than param steps ago
	EvictLRU   EvictPolicy = C.CT_EVICT_LRU   // keep the param most recently seen rows
	EvictLFU   EvictPolicy = C.CT_EVICT_LFU   // keep the param most frequently seen rows
	EvictBytes EvictPolicy = C.CT_EVICT_BYTES // LRU keeping what fits in param bytes, then compaction
)

// Delta is the change of a table since its last mark (see Delta): the changed rows with
// their states and metadata, and the ids deleted since then; CPU tensors.
type Delta struct {
	IDs     *cgotorch.Tensor   // int64 [M] ascending
	Rows    *cgotorch.Tensor   // float32 [M, dim]
	States  []*cgotorch.Tensor // [M, width] each
	Meta    *cgotorch.Tensor   // int64 [M, 3]: last step, frequency, stamp
	Deleted *cgotorch.Tensor   // int64 [D] ascending
	Step    int64
	Chain   DeltaChain
	State   DeltaState
}

// Close releases the delta's tensors.
func (d *Delta) Close() {
	if d == nil {
		return
	}
	for _, t := range append([]*cgotorch.Tensor{d.IDs, d.Rows, d.Meta, d.Deleted}, d.States...) {
		t.Close()
	}
}

// call runs f with the table's handle (held shared) and converts its error.
func (t *Table) call(op string, f func(p C.ct_table) C.ct_error) error {
	p, err := t.acquire(op)
	if err != nil {
		return err
	}
	defer t.mu.RUnlock()
	err = toError(op, f(p))
	runtime.KeepAlive(t)
	return err
}

// StateWidths gives the width of each of the n optimizer states of a table with that optimizer
// and dim (n is Stats.NumStates: how many the optimizer's parameters give it, e.g. SGD has
// a state only with momentum).
func StateWidths(opt Optimizer, dim int64, n int) []int64 {
	w := make([]int64, n)
	for i := range w {
		w[i] = dim
		if opt == OptRowWiseAdagrad {
			w[i] = 1
		}
	}
	return w
}

// Config returns the configuration the table was created with (or took over with Swap).
func (t *Table) Config() (Config, error) {
	var c C.ct_table_config
	err := t.call("table config", func(p C.ct_table) C.ct_error { return C.ct_table_config_get(&c, p) })
	if err != nil {
		return Config{}, err
	}
	cfg := Config{
		Dim: int64(c.dim), Capacity: int64(c.capacity), BlockRows: int64(c.block_rows),
		Init: Init(c.initializer), Optimizer: Optimizer(c.optimizer),
		Device: cgotorch.Device{Type: cgotorch.DeviceType(c.device._type), Index: int(c.device.index)}, Seed: uint64(c.seed), Layout: Layout(c.layout),
		TensorKernels: c.flags&C.CT_TABLE_TENSOR_KERNELS != 0, TrackAccess: c.flags&C.CT_TABLE_TRACK_ACCESS != 0,
	}
	for i := range cfg.InitParams {
		cfg.InitParams[i] = float64(c.init_params[i])
	}
	for i := range cfg.OptParams {
		cfg.OptParams[i] = float64(c.opt_params[i])
	}
	return cfg, nil
}

// Save streams a consistent snapshot of the table to sink, chunkRows rows at a time, in row
// order, then its admission counts (each kind at least once, possibly empty). The table is
// locked shared during the whole call: writers wait. sink must not call the table.
func (t *Table) Save(chunkRows int64, sink func(*Chunk) error) error {
	return t.stream("table save", sink, func(p C.ct_table, ctx C.uintptr_t) C.ct_error {
		return C.ct_table_save(p, C.int64_t(chunkRows), C.ct_go_table_sink(), ctx)
	})
}

// ExportChunks streams what Export gives (ids ascending, SGD momentum caught up) to sink,
// chunkRows rows at a time, without the whole snapshot in memory: ChunkRows chunks with IDs,
// Rows and States, and LastStep and Frequency when the table tracks access; no call for an
// empty table. The table is locked shared during the whole call: writers wait. sink must not
// call the table.
func (t *Table) ExportChunks(chunkRows int64, sink func(*Chunk) error) error {
	return t.stream("table export chunks", sink, func(p C.ct_table, ctx C.uintptr_t) C.ct_error {
		return C.ct_table_export_chunks(p, C.int64_t(chunkRows), C.ct_go_table_sink(), ctx)
	})
}

// stream runs a C call that reports chunks to ctTableSink, which hands them to sink; sink's
// error, if any, is the result.
func (t *Table) stream(op string, sink func(*Chunk) error, call func(C.ct_table, C.uintptr_t) C.ct_error) error {
	st, err := t.Stats()
	if err != nil {
		return err
	}
	s := &sinkState{f: sink, dim: int(st.Dim)}
	for i, w := range StateWidths(st.Optimizer, st.Dim, st.NumStates) {
		s.w = append(s.w, int(w))
		s.names = append(s.names, StateName(st.Optimizer, i))
	}
	h := cgo.NewHandle(s)
	defer h.Delete()
	err = t.call(op, func(p C.ct_table) C.ct_error { return call(p, C.uintptr_t(h)) })
	if s.err != nil {
		return s.err
	}
	return err
}

// Rows are rows to Import: ids with their rows [n*dim], optimizer states (one slice of
// n*width per state) and metadata (nil: the current step, 0 and the current step).
type Rows struct {
	IDs       []int64
	Rows      []float32
	States    [][]float32
	LastStep  []int64
	Frequency []int64
	Stamp     []int64
}

// Import inserts or overwrites rows with their optimizer states and metadata, all or nothing.
// The lengths are checked against the table's dim and states (ErrInvalidArgument).
func (t *Table) Import(r Rows) error {
	const op = "table import"
	if err := t.checkRows(op, r); err != nil {
		return err
	}
	s := r.states()
	err := t.call(op, func(p C.ct_table) C.ct_error {
		return C.ct_table_import(p, C.int64_t(len(r.IDs)), cInt64s(r.IDs), cFloats(r.Rows), s[0], s[1],
			cInt64s(r.LastStep), cInt64s(r.Frequency), cInt64s(r.Stamp))
	})
	runtime.KeepAlive(r)
	return err
}

// ApplyDelta applies a delta of the table t copies, all or nothing: it removes the deleted ids
// (an id also in r is overwritten instead), inserts or overwrites r's rows as Import does (last
// steps and stamps at most step), sets the step counter to step, and, unless chain.Lineage is 0
// (a delta without a chain: nothing of it checked or set), the table-wide state and the chain
// position. A step below t's counter is refused (ErrInvalidArgument), as is a delta that does
// not follow t's position in its chain (ErrIncompatible).
func (t *Table) ApplyDelta(step int64, deleted []int64, r Rows, chain DeltaChain, st DeltaState) error {
	const op = "table apply delta"
	if err := t.checkRows(op, r); err != nil {
		return err
	}
	if len(st.CountIDs) != len(st.Counts) {
		return &cgotorch.Error{Op: op, Msg: "invalid argument: admission count ids and counts differ in length", Kind: cgotorch.ErrInvalidArgument}
	}
	s := r.states()
	var info *C.ct_table_delta_info
	if chain.Lineage != 0 {
		info = (*C.ct_table_delta_info)(C.calloc(1, C.sizeof_ct_table_delta_info))
		defer C.free(unsafe.Pointer(info))
		info.lineage, info.base, info.seq = C.uint64_t(chain.Lineage), C.int64_t(chain.Base), C.int64_t(chain.Seq)
		for i, v := range st.OptParams {
			info.opt_params[i] = C.double(v)
		}
		info.admit_after = C.int64_t(st.AdmitAfter)
		if st.CountsReplace {
			info.counts_replace = 1
		}
		info.ncounts = C.int64_t(len(st.CountIDs))
		info.count_ids, info.counts = cInt64s(st.CountIDs), cInt64s(st.Counts)
	}
	err := t.call(op, func(p C.ct_table) C.ct_error {
		return C.ct_table_apply_delta(p, C.int64_t(step), C.int64_t(len(deleted)), cInt64s(deleted),
			C.int64_t(len(r.IDs)), cInt64s(r.IDs), cFloats(r.Rows), s[0], s[1],
			cInt64s(r.LastStep), cInt64s(r.Frequency), cInt64s(r.Stamp), info)
	})
	runtime.KeepAlive(r)
	runtime.KeepAlive(deleted)
	runtime.KeepAlive(st)
	return err
}

// SetDeltaChain sets the table's position in a delta chain (lineage != 0, seq >= 0), as a
// checkpoint recorded it (Chunk.Chain), so that the deltas that follow apply.
func (t *Table) SetDeltaChain(lineage uint64, seq int64) error {
	return t.call("table set delta chain", func(p C.ct_table) C.ct_error {
		return C.ct_table_set_delta_chain(p, C.uint64_t(lineage), C.int64_t(seq))
	})
}

// Check checks the table's invariants (ct_table_check: the id map, row indices, storage,
// metadata, admission counts, delta tracking, configuration and optimizer states) in a pass
// over the table under its shared lock; the first broken one is an ErrInvalidArgument naming it.
func (t *Table) Check() error {
	return t.call("table check", func(p C.ct_table) C.ct_error { return C.ct_table_check(p) })
}

// checkRows checks the lengths in r against t's dim and states.
func (t *Table) checkRows(op string, r Rows) error {
	st, err := t.Stats()
	if err != nil {
		return err
	}
	n := len(r.IDs)
	bad := func(msg string) error {
		return &cgotorch.Error{Op: op, Msg: "invalid argument: " + msg, Kind: cgotorch.ErrInvalidArgument}
	}
	if len(r.Rows) != n*int(st.Dim) {
		return bad("rows has the wrong length")
	}
	widths := StateWidths(st.Optimizer, st.Dim, st.NumStates)
	if len(r.States) != len(widths) {
		return bad("wrong number of optimizer states")
	}
	for i, w := range widths {
		if len(r.States[i]) != n*int(w) {
			return bad("an optimizer state has the wrong length")
		}
	}
	for _, m := range [][]int64{r.LastStep, r.Frequency, r.Stamp} {
		if m != nil && len(m) != n {
			return bad("metadata has the wrong length")
		}
	}
	return nil
}

// states are r's optimizer states as C pointers (NULL for those the table does not have).
func (r Rows) states() (s [2]*C.float) {
	for i := range r.States {
		s[i] = cFloats(r.States[i])
	}
	return s
}

func cInt64s(v []int64) *C.int64_t {
	if len(v) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&v[0]))
}

func cFloats(v []float32) *C.float {
	if len(v) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&v[0]))
}

// SetStep sets the step counter (>= 0, and at least every row's last step and momentum stamp:
// ErrInvalidArgument otherwise).
func (t *Table) SetStep(step int64) error {
	return t.call("table set step", func(p C.ct_table) C.ct_error { return C.ct_table_set_step(p, C.int64_t(step)) })
}

// Swap exchanges the contents of two tables (ids, rows, states, metadata, step, configuration,
// admission and delta state); they must agree in dim, block rows, layout, device, kernels and
// optimizer kind, and in their flags (TrackAccess, TensorKernels) (ErrInvalidArgument).
func (t *Table) Swap(o *Table) error {
	const op = "table swap"
	q, err := o.acquire(op)
	if err != nil {
		return err
	}
	defer o.mu.RUnlock()
	err = t.call(op, func(p C.ct_table) C.ct_error { return C.ct_table_swap(p, q) })
	runtime.KeepAlive(o)
	return err
}

// SetAdmission makes absent ids wait for their k-th training lookup before they get a row
// (k <= 1: admit at once, the default).
func (t *Table) SetAdmission(k int64) error {
	return t.call("table set admission", func(p C.ct_table) C.ct_error { return C.ct_table_set_admission(p, C.int64_t(k)) })
}

// Admission returns the admission threshold and how many absent ids are being counted.
func (t *Table) Admission() (k, counted int64, err error) {
	var ck, cc C.int64_t
	err = t.call("table admission", func(p C.ct_table) C.ct_error { return C.ct_table_admission(&ck, &cc, p) })
	return int64(ck), int64(cc), err
}

// ImportCounts sets the admission counts of ids (absent from the table; counts >= 1).
func (t *Table) ImportCounts(ids, counts []int64) error {
	const op = "table import counts"
	if len(ids) != len(counts) {
		return &cgotorch.Error{Op: op, Msg: "invalid argument: ids and counts differ in length", Kind: cgotorch.ErrInvalidArgument}
	}
	err := t.call(op, func(p C.ct_table) C.ct_error {
		return C.ct_table_import_counts(p, C.int64_t(len(ids)), cInt64s(ids), cInt64s(counts))
	})
	runtime.KeepAlive(ids)
	runtime.KeepAlive(counts)
	return err
}

// Metadata returns every id (ascending) with its last step and frequency.
func (t *Table) Metadata() (ids, last, freq *cgotorch.Tensor, err error) { return t.metadata(true) }

// MetadataUnsorted is Metadata in no particular order (the rows' storage order), without its
// sort by id.
func (t *Table) MetadataUnsorted() (ids, last, freq *cgotorch.Tensor, err error) {
	return t.metadata(false)
}

func (t *Table) metadata(sorted bool) (ids, last, freq *cgotorch.Tensor, err error) {
	var a, b, c C.ct_tensor
	err = t.call("table metadata", func(p C.ct_table) C.ct_error {
		if sorted {
			return C.ct_table_metadata(&a, &b, &c, p)
		}
		return C.ct_table_metadata_unsorted(&a, &b, &c, p)
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return newTensor(a), newTensor(b), newTensor(c), nil
}

// Evict removes the rows the policy selects (with all their state) and returns their ids
// (ascending) and current rows when wantRows, and how many went.
func (t *Table) Evict(policy EvictPolicy, param int64, wantRows bool) (ids, rows *cgotorch.Tensor, n int64, err error) {
	var a, b C.ct_tensor
	var cn C.int64_t
	pa, pb := &a, &b
	if !wantRows {
		pa, pb = nil, nil
	}
	err = t.call("table evict", func(p C.ct_table) C.ct_error {
		return C.ct_table_evict(pa, pb, &cn, p, C.int32_t(policy), C.int64_t(param))
	})
	if err != nil || !wantRows {
		return nil, nil, int64(cn), err
	}
	return newTensor(a), newTensor(b), int64(cn), nil
}

// Remove deletes keys and returns the present ones with their rows, atomically.
func (t *Table) Remove(keys *cgotorch.Tensor) (ids, rows *cgotorch.Tensor, err error) {
	return t.RemoveUnchanged(keys, nil, nil)
}

// RemoveUnchanged is Remove for the keys whose rows still have the last step and frequency
// given for them (int64 [N] each, as Metadata gives them), so that rows trained since the
// caller read their metadata stay; with both nil it is Remove. It needs a table whose config
// has TrackAccess.
func (t *Table) RemoveUnchanged(keys, lastStep, frequency *cgotorch.Tensor) (ids, rows *cgotorch.Tensor, err error) {
	const op = "table remove"
	k, err := tensorArg(op, "keys", keys)
	if err != nil {
		return nil, nil, err
	}
	var l, f C.ct_tensor
	if lastStep != nil || frequency != nil {
		if l, err = tensorArg(op, "lastStep", lastStep); err != nil {
			return nil, nil, err
		}
		if f, err = tensorArg(op, "frequency", frequency); err != nil {
			return nil, nil, err
		}
	}
	var a, b C.ct_tensor
	err = t.call(op, func(p C.ct_table) C.ct_error { return C.ct_table_remove_unchanged(&a, &b, p, k, l, f) })
	runtime.KeepAlive(keys)
	runtime.KeepAlive(lastStep)
	runtime.KeepAlive(frequency)
	if err != nil {
		return nil, nil, err
	}
	return newTensor(a), newTensor(b), nil
}

// Compact moves the live rows into the lowest row indices and frees the blocks above them
// (ct_table_compact: only the rows at or above the new size move).
func (t *Table) Compact() error {
	return t.call("table compact", func(p C.ct_table) C.ct_error { return C.ct_table_compact(p) })
}

// Delta returns the rows changed since the last mark and the ids deleted since then (before
// the first mark: every row); with mark, a new mark is set atomically with the delta.
func (t *Table) Delta(mark bool) (*Delta, error) {
	var ids, rows, meta, del C.ct_tensor
	var states [2]C.ct_tensor
	var cids, cvals C.ct_tensor
	var step C.int64_t
	var info C.ct_table_delta_info
	m := C.int32_t(0)
	if mark {
		m = 1
	}
	err := t.call("table delta", func(p C.ct_table) C.ct_error {
		return C.ct_table_delta(&ids, &rows, &states[0], 2, &meta, &del, &step, &info, &cids, &cvals, p, m)
	})
	if err != nil {
		return nil, err
	}
	d := &Delta{IDs: newTensor(ids), Rows: newTensor(rows), Meta: newTensor(meta), Deleted: newTensor(del), Step: int64(step),
		Chain: DeltaChain{Lineage: uint64(info.lineage), Base: int64(info.base), Seq: int64(info.seq)}}
	for _, s := range states {
		if s != nil {
			d.States = append(d.States, newTensor(s))
		}
	}
	ct, cv := newTensor(cids), newTensor(cvals)
	defer ct.Close()
	defer cv.Close()
	d.State = DeltaState{AdmitAfter: int64(info.admit_after), CountsReplace: info.counts_replace != 0}
	for i := range d.State.OptParams {
		d.State.OptParams[i] = float64(info.opt_params[i])
	}
	if d.State.CountIDs, err = cgotorch.ToSlice[int64](ct); err == nil {
		d.State.Counts, err = cgotorch.ToSlice[int64](cv)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// SetLR sets the optimizer's learning rate (FTRL: alpha) from the next step on (see
// ct_table_set_lr: with SGD momentum, every row behind the step is first brought up to date with
// the old rate).
func (t *Table) SetLR(lr float64) error {
	return t.call("table set lr", func(p C.ct_table) C.ct_error { return C.ct_table_set_lr(p, C.double(lr)) })
}
