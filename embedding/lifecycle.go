package embedding

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// lifecycle.go: keeping a long-lived table within bounds (eviction, compaction, admission)
// and shipping its changes (deltas). Per-row metadata, kept by tables created with
// Config.TrackAccess (Metadata, EvictIf and every EvictPolicy need it; without it they return
// ErrBadInput): the step counter at the row's last training lookup or update (LastStep) and
// how often training touched it (Frequency): every occurrence of its id in a training lookup's
// batch (Lookup, LookupInto, Forward, ForwardBag alike), plus one for each optimizer step that
// updated it (Update, Step: a step updates a row once, however often its id occurs). Training
// lookups holding the table's lock shared may lose frequency increments when they race on one
// row; updates never do.

// EvictPolicy selects the rows Evict removes; build it with TTL, KeepRecent, KeepFrequent or
// MemoryBudget. The zero value selects no policy: Evict refuses it (ErrBadInput) rather than
// read it as TTL(0), which would evict every row not trained at the current step.
type EvictPolicy struct {
	kind  ctable.EvictPolicy
	param int64
	set   bool
}

// TTL evicts the rows not seen (trained) during the last steps steps: step - LastStep > steps.
func TTL(steps int64) EvictPolicy { return EvictPolicy{ctable.EvictTTL, steps, true} }

// KeepRecent keeps the n rows seen most recently (LRU); ties keep the more frequent, then the
// smaller id.
func KeepRecent(n int) EvictPolicy { return EvictPolicy{ctable.EvictLRU, int64(n), true} }

// KeepFrequent keeps the n rows seen most often (LFU); ties keep the more recent, then the
// smaller id.
func KeepFrequent(n int) EvictPolicy { return EvictPolicy{ctable.EvictLFU, int64(n), true} }

// MemoryBudget keeps the most recently seen rows that fit bytes, counting per row:
//
//	4 * (Dim + the optimizer states' widths)   the row and its states (Dim each; RowWiseAdagrad's: 1)
//	+ 8                                        last step and frequency (TrackAccess, which it needs)
//	+ 4                                        once deltas are marked (Delta(true))
//	+ 8                                        SGD with momentum: the row's momentum stamp
//	+ 32                                       the id map
//
// e.g. 168 bytes for Dim 16 with Adagrad, 304 for Dim 64 with RowWiseAdagrad after a mark.
// The eviction then compacts the table, rebuilding the id map smaller where it holds more than
// 32 bytes an id, so that Stats().Bytes falls (blocks are whole, so it lands within a block of
// rows of the budget), and gives the freed memory back to the system as Compact does. If the
// compaction cannot get its memory, the eviction still stands and the table stays uncompacted
// until a Compact succeeds.
func MemoryBudget(bytes int64) EvictPolicy { return EvictPolicy{ctable.EvictBytes, bytes, true} }

// String names the policy as it was built: "TTL(5)", "KeepRecent(1000)", "KeepFrequent(1000)",
// "MemoryBudget(1048576)", or "EvictPolicy{}".
func (p EvictPolicy) String() string {
	if !p.set {
		return "EvictPolicy{}"
	}
	name := map[ctable.EvictPolicy]string{ctable.EvictTTL: "TTL", ctable.EvictLRU: "KeepRecent",
		ctable.EvictLFU: "KeepFrequent", ctable.EvictBytes: "MemoryBudget"}[p.kind]
	return fmt.Sprintf("%s(%d)", name, p.param)
}

// Keeps reports what KeepRecent and KeepFrequent keep: n rows, ranked by frequency first
// (KeepFrequent) or by last step first (KeepRecent); ok is false for the other policies. A
// sharded table (package dist) ranks the rows of all its shards this way.
func (p EvictPolicy) Keeps() (n int64, byFrequency, ok bool) {
	if !p.set || (p.kind != ctable.EvictLRU && p.kind != ctable.EvictLFU) {
		return 0, false, false
	}
	return p.param, p.kind == ctable.EvictLFU, true
}

// Evicted are the ids an eviction removed, ascending, with their rows as they were (nil
// tensors unless rows were asked for).
type Evicted struct {
	N    int
	IDs  *cgotorch.Tensor // int64 [N]
	Rows *cgotorch.Tensor // float32 [N, Dim]
}

// Close releases the tensors.
func (e *Evicted) Close() {
	if e != nil {
		e.IDs.Close()
		e.Rows.Close()
	}
}

// Evict removes the rows p selects, with all their optimizer state and metadata; with rows,
// their ids and rows come back. It chooses the rows while lookups, reads and exports go on
// (holding the table's lock shared: this part reads every row's metadata) and then takes the
// lock alone only to check each chosen row again and remove it: a row trained meanwhile is
// kept (TTL: its age at the current step; KeepRecent, KeepFrequent, MemoryBudget: its rank
// against the last one the keep admitted), rows inserted meanwhile are not candidates, and
// after a delete, removal, Clear, compaction or another eviction meanwhile it chooses again
// under the exclusive lock. Row memory is reused by later inserts; Compact returns it
// (MemoryBudget compacts by itself, in the same exclusive section). The eviction is one call
// into the table: ctx is checked before it starts (a done ctx gives an error wrapping ctx.Err()
// and removes nothing); once started it runs to its end.
func (t *Table) Evict(ctx context.Context, p EvictPolicy, rows bool) (*Evicted, error) {
	if t == nil {
		return nil, errNilTable
	}
	if !p.set {
		return nil, badInput("evict", t.name, "EvictPolicy{} is no policy: build one with TTL, KeepRecent, KeepFrequent or MemoryBudget")
	}
	if err := stopped(ctx, "evict", t.name); err != nil {
		return nil, err
	}
	ids, r, n, err := t.t.Evict(p.kind, p.param, rows)
	if err != nil {
		return nil, wrap("evict", t.name, err)
	}
	return &Evicted{N: int(n), IDs: ids, Rows: r}, nil
}

// EvictIf calls evict with every row's metadata (exported in one consistent pass) and removes,
// in one batch, the rows it returns true for whose metadata is still what evict saw, returning
// their ids (ascending) and rows as they were when removed: a row trained between the export
// and the removal stays, as with Evict. evict runs with no lock held and may use the table.
// ctx is checked before the export, every 4096 calls of evict and before the removal: once it
// is done EvictIf returns an error wrapping ctx.Err() and removes nothing.
func (t *Table) EvictIf(ctx context.Context, evict func(id, lastStep, frequency int64) bool) (*Evicted, error) {
	if t == nil {
		return nil, errNilTable
	}
	const op = "evict"
	if err := stopped(ctx, op, t.name); err != nil {
		return nil, err
	}
	ids, last, freq, err := t.metadata(op, true)
	if err != nil {
		return nil, err
	}
	var victims [3][]int64 // ids, last steps, frequencies
	for i, id := range ids {
		if i%4096 == 4095 {
			if err := stopped(ctx, op, t.name); err != nil {
				return nil, err
			}
		}
		if evict(id, last[i], freq[i]) {
			victims[0] = append(victims[0], id)
			victims[1] = append(victims[1], last[i])
			victims[2] = append(victims[2], freq[i])
		}
	}
	return t.evictUnchanged(ctx, op, victims[0], victims[1], victims[2])
}

// EvictUnchanged removes, in one batch, the rows of ids whose last step and frequency are still
// lastStep and frequency (what Metadata or MetadataUnsorted returned for them), returning their
// ids (ascending, whatever the order of ids) and rows as they were when removed: a row trained
// since stays, as with EvictIf, and an id not in the table is skipped (of an id given twice, the
// first occurrence's metadata decides). It is EvictIf's removal, for callers that choose the
// rows from the metadata themselves (a sharded table ranking the rows of every shard). ctx is
// checked before the removal.
func (t *Table) EvictUnchanged(ctx context.Context, ids, lastStep, frequency []int64) (*Evicted, error) {
	if t == nil {
		return nil, errNilTable
	}
	const op = "evict"
	if len(lastStep) != len(ids) || len(frequency) != len(ids) {
		return nil, badInput(op, t.name, "%d ids with %d last steps and %d frequencies", len(ids), len(lastStep), len(frequency))
	}
	ids, lastStep, frequency = byID(ids, lastStep, frequency)
	return t.evictUnchanged(ctx, op, ids, lastStep, frequency)
}

// byID returns ids, lastStep and frequency ordered by id (copies, unless ids are ascending
// already: the removal returns the ids in the order it gets them). Repeated ids keep their
// order.
func byID(ids, lastStep, frequency []int64) ([]int64, []int64, []int64) {
	if slices.IsSorted(ids) {
		return ids, lastStep, frequency
	}
	r := make([]idMeta, len(ids))
	for i, id := range ids {
		r[i] = idMeta{id, lastStep[i], frequency[i]}
	}
	r = sortByID(r)
	ids, lastStep, frequency = make([]int64, len(r)), make([]int64, len(r)), make([]int64, len(r))
	for i, x := range r {
		ids[i], lastStep[i], frequency[i] = x.id, x.last, x.freq
	}
	return ids, lastStep, frequency
}

// idMeta is an id with its last step and frequency.
type idMeta struct{ id, last, freq int64 }

// sortByID sorts r by id, stably, and returns it (r or a slice of the same length): from 256
// rows on by a least-significant-digit radix sort, a byte a pass, which skips the bytes that all
// ids share, as the table's C sort does (524k ids below 2^33 on a 2-vCPU Zen 5: 5 passes, 11 ms,
// where slices.SortFunc took 100).
func sortByID(r []idMeta) []idMeta {
	if len(r) < 256 {
		slices.SortStableFunc(r, func(a, b idMeta) int { return cmp.Compare(a.id, b.id) })
		return r
	}
	digit := func(x idMeta, d int) uint8 { return uint8((uint64(x.id) ^ 1<<63) >> (8 * d)) } // signed order
	var count [8][256]int
	for _, x := range r {
		for d := range 8 {
			count[d][digit(x, d)]++
		}
	}
	tmp := make([]idMeta, len(r))
	for d := range 8 {
		c := &count[d]
		if c[digit(r[0], d)] == len(r) { // one value of this byte for every id: the order stands
			continue
		}
		sum := 0
		for v, n := range c { // counts -> where each value's ids start
			c[v], sum = sum, sum+n
		}
		for _, x := range r {
			tmp[c[digit(x, d)]] = x
			c[digit(x, d)]++
		}
		r, tmp = tmp, r
	}
	return r
}

func (t *Table) evictUnchanged(ctx context.Context, op string, ids, lastStep, frequency []int64) (*Evicted, error) {
	var k [3]*cgotorch.Tensor
	var err error
	for j, v := range [][]int64{ids, lastStep, frequency} {
		if k[j], err = t.idsTensor(op, v); err != nil {
			break
		}
		defer k[j].Close()
	}
	if err != nil {
		return nil, err
	}
	if err := stopped(ctx, op, t.name); err != nil {
		return nil, err
	}
	gone, rows, err := t.t.RemoveUnchanged(k[0], k[1], k[2])
	if err != nil {
		return nil, wrap(op, t.name, err)
	}
	return &Evicted{N: int(gone.Size(0)), IDs: gone, Rows: rows}, nil
}

// Metadata returns every id (ascending) with its last step and frequency. A row stores them
// in 32 bits each: last steps are exact within the last 2^31 steps (an older row may report a
// later step, still more than 2^31 steps back; see cgotorch.h) and frequencies saturate at
// 2^32 - 1.
func (t *Table) Metadata() (ids, lastStep, frequency []int64, err error) {
	if t == nil {
		return nil, nil, nil, errNilTable
	}
	return t.metadata("metadata", true)
}

// MetadataUnsorted is Metadata in no particular order: the rows come in the order of their
// storage, which is not the order of their ids and changes as rows come and go. It skips
// Metadata's sort by id, most of Metadata's time (524k rows: 5 ms against 42), for callers that
// choose rows by their metadata and need no order (EvictUnchanged takes ids in any order).
func (t *Table) MetadataUnsorted() (ids, lastStep, frequency []int64, err error) {
	if t == nil {
		return nil, nil, nil, errNilTable
	}
	return t.metadata("metadata", false)
}

// metadata is Metadata (sorted) or MetadataUnsorted, its errors named op.
func (t *Table) metadata(op string, sorted bool) (ids, lastStep, frequency []int64, err error) {
	read := t.t.Metadata
	if !sorted {
		read = t.t.MetadataUnsorted
	}
	a, b, c, err := read()
	if err != nil {
		return nil, nil, nil, wrap(op, t.name, err)
	}
	defer a.Close()
	defer b.Close()
	defer c.Close()
	out := make([][]int64, 3)
	for i, x := range []*cgotorch.Tensor{a, b, c} {
		if out[i], err = cgotorch.ToSlice[int64](x); err != nil {
			return nil, nil, nil, wrap(op, t.name, err)
		}
	}
	return out[0], out[1], out[2], nil
}

// Compact moves the live rows into the lowest row indices and frees the storage blocks above them,
// so that Stats().Bytes falls after evictions, and returns the freed memory to the system: the
// cached tensor buffers and the scratch vectors every thread's table calls keep are freed (as
// cgotorch.ReleaseCachedMemory does), and on glibc the C heap is trimmed (malloc_trim), where the
// per-row metadata, the id map and that scratch were freed: without that, glibc kept about 110 MB
// of a 2M-id table in its free lists after evicting 90% of it. Only the rows at or above the new
// Len move (into indices freed below it), so its cost follows the deletions, not the table; the id
// map is rebuilt smaller when it has room for over twice the ids it holds (after a quarter or more
// of them went; a Capacity reserved in the Config goes then too). Row indices (Indices) change.
func (t *Table) Compact() error {
	if t == nil {
		return errNilTable
	}
	return wrap("compact", t.name, t.t.Compact())
}

// SetAdmission makes a new id wait for its k-th training lookup (occurrences counted exactly,
// across batches) before it gets a row: until then lookups give zero rows, the gradient of a
// Forward that kept it out is dropped (also when the id is admitted by a later lookup or
// between the backward pass and the Step: that gradient was taken against a zero row, not the
// id's; a later lookup that found its row carries its own) and Update ignores it. k <= 1 admits
// every id at once (the default) and forgets the counts. The counts are part of checkpoints
// and of deltas.
func (t *Table) SetAdmission(k int) error {
	if t == nil {
		return errNilTable
	}
	return wrap("set admission", t.name, t.t.SetAdmission(int64(k)))
}

// Admission returns the admission threshold and how many ids are being counted.
func (t *Table) Admission() (k, counted int, err error) {
	if t == nil {
		return 0, 0, errNilTable
	}
	a, b, err := t.t.Admission()
	return int(a), int(b), wrap("admission", t.name, err)
}

// SetAdmissionCounts sets the admission counts of ids, as if each had been seen counts[i]
// times: ids that have no row, counts >= 1, with admission on (SetAdmission with k > 1). The
// counts of other ids stay. All or none: bad input changes nothing. It restores counts read
// from a Delta (CountIDs, Counts), as a load does.
func (t *Table) SetAdmissionCounts(ids, counts []int64) error {
	if t == nil {
		return errNilTable
	}
	return wrap("set admission counts", t.name, t.t.ImportCounts(ids, counts))
}

// Delta is what changed in a table since a mark: the rows inserted, written or updated (with
// their optimizer states and metadata) and the ids deleted and not present any more.
type Delta struct {
	IDs     []int64     // ascending
	Rows    []float32   // [len(IDs), Dim]
	States  [][]float32 // one per optimizer state, [len(IDs), width]
	Meta    []int64     // [len(IDs), 3]: last step, frequency, stamp
	Deleted []int64     // ascending
	Step    int64
	// Optimizer names the optimizer of the delta's table as checkpoints do ("sgd", "adagrad",
	// "rowwise_adagrad", "sparse_adam", "adamw", "ftrl", "none"); "" in a file of a gorec
	// older than the field. ApplyDelta refuses a delta of another optimizer: the states of SGD
	// with momentum and of Adagrad, or of SparseAdam, AdamW and FTRL, have the same shapes.
	Optimizer string

	// The delta's place in its table's chain of deltas. A table has a lineage (a random
	// non-zero id) and counts its marks in it; a delta follows mark Base (0: the delta is the
	// whole table) and brings a copy to mark Seq (Base + 1 if the delta set a mark, else
	// Base). The first mark of a table that tracks no changes (new, or loaded) starts a new
	// lineage. Lineage 0: a delta without a chain (a file of version 1, an older gorec).
	Lineage   uint64
	Base, Seq int64

	// The table-wide state the next operations read: the optimizer's parameters as
	// checkpoints store them (OptParams[0] is the learning rate, SetLR's), the admission
	// threshold, and the admission counts changed since Base (Counts[i] of CountIDs[i], ids
	// ascending; 0: the id is no longer counted), or, with CountsReplace, every count of the
	// table (before the first mark, say).
	OptParams     [8]float64
	AdmitAfter    int64
	CountsReplace bool
	CountIDs      []int64
	Counts        []int64
}

// Delta returns the changes since the last mark (before the first mark: the whole table);
// with mark, a new mark is set in the same critical section, so that successive deltas miss
// nothing. Base + deltas applied in order with ApplyDelta reproduce the table: rows, states,
// step, and the metadata of every row a delta carries (a row only looked up since the mark
// keeps its older metadata in the copy).
//
// Rows and States are the rows as stored. With SGD momentum that is not what a read returns:
// a row keeps moving with its momentum at every step after its last update, and the table
// applies those moves lazily (see SGD), from the step in the row's Meta stamp. So a copy of
// such a table must be a table kept by ApplyDelta, which catches its rows up the same way; a
// plain copy of the rows (a key-value store) would serve the rows nobody trained since the
// mark as they were at their last update. Tables of the other optimizers have no lazy state:
// Rows are the values.
func (t *Table) Delta(mark bool) (*Delta, error) {
	const op = "delta"
	d, err := t.t.Delta(mark)
	if err != nil {
		return nil, wrap(op, t.name, err)
	}
	defer d.Close()
	cc, err := t.t.Config()
	if err != nil {
		return nil, wrap(op, t.name, err)
	}
	out := &Delta{Step: d.Step, Optimizer: optNames[cc.Optimizer], Lineage: d.Chain.Lineage, Base: d.Chain.Base, Seq: d.Chain.Seq,
		OptParams: d.State.OptParams, AdmitAfter: d.State.AdmitAfter, CountsReplace: d.State.CountsReplace,
		CountIDs: d.State.CountIDs, Counts: d.State.Counts}
	if out.IDs, err = cgotorch.ToSlice[int64](d.IDs); err == nil {
		if out.Rows, err = cgotorch.ToSlice[float32](d.Rows); err == nil {
			if out.Meta, err = cgotorch.ToSlice[int64](d.Meta); err == nil {
				out.Deleted, err = cgotorch.ToSlice[int64](d.Deleted)
			}
		}
	}
	for _, s := range d.States {
		if err != nil {
			break
		}
		var v []float32
		v, err = cgotorch.ToSlice[float32](s)
		out.States = append(out.States, v)
	}
	if err != nil {
		return nil, wrap(op, t.name, err)
	}
	return out, nil
}

// ApplyDelta applies d to t (a copy of the delta's table at mark d.Base, with the same
// configuration), all or nothing: the deletions, then the rows with their states and metadata,
// the step, the optimizer's parameters (the learning rate of SetLR too), the admission
// threshold and counts, and t's place in the chain (d.Lineage, d.Seq). So base + deltas, then
// the same operations on both, stay bit for bit the table.
//
// Deltas apply in the order they were taken, each once: one that does not follow t's mark in
// its lineage (skipped, repeated, reordered, or of another table) is refused with
// ErrIncompatible; a whole-table delta (Base 0) applies only to a table at mark 0 (new, or
// loaded from a checkpoint taken before its table's first mark), whose contents it replaces
// (ids it lacks go: it has no deletions). A copy takes its place in the
// chain from the deltas it applies and from the checkpoint it was loaded from. Unmarked deltas
// (Delta(false)) do not move the mark: any number of them, then the next marked one, apply.
// A delta without a chain (Lineage 0: version 1 files) is applied with no chain check, only
// refused if older than t (its Step below t's step counter, ErrBadInput), and leaves the
// parameters, admission state and chain of t as they are. Malformed input is ErrBadInput; a
// delta of another optimizer (Delta.Optimizer, when set) ErrIncompatible; t is then unchanged.
func (t *Table) ApplyDelta(d *Delta) error {
	const op = "apply delta"
	if d == nil {
		return badInput(op, t.name, "nil delta")
	}
	if d.Optimizer != "" {
		cc, err := t.t.Config()
		if err != nil {
			return wrap(op, t.name, err)
		}
		if own := optNames[cc.Optimizer]; d.Optimizer != own {
			return &Error{Op: op, Table: t.name, Kind: ErrIncompatible,
				Err: fmt.Errorf("a delta of a table with optimizer %q, this one has %q", d.Optimizer, own)}
		}
	}
	n := len(d.IDs)
	if len(d.Meta) != 3*n {
		return badInput(op, t.name, "meta has %d values for %d ids", len(d.Meta), n)
	}
	last, freq, stamp := make([]int64, n), make([]int64, n), make([]int64, n)
	for i := 0; i < n; i++ {
		last[i], freq[i], stamp[i] = d.Meta[3*i], d.Meta[3*i+1], d.Meta[3*i+2]
	}
	r := ctable.Rows{IDs: d.IDs, Rows: d.Rows, States: d.States, LastStep: last, Frequency: freq, Stamp: stamp}
	chain := ctable.DeltaChain{Lineage: d.Lineage, Base: d.Base, Seq: d.Seq}
	st := ctable.DeltaState{OptParams: d.OptParams, AdmitAfter: d.AdmitAfter, CountsReplace: d.CountsReplace, CountIDs: d.CountIDs, Counts: d.Counts}
	err := t.t.ApplyDelta(d.Step, d.Deleted, r, chain, st)
	if err == nil && d.Lineage != 0 {
		t.refresh() // (the learning rate may have changed)
	}
	return wrap(op, t.name, err)
}
