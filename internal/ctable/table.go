package ctable

// #include <stdlib.h>
// #include "../../cgotorch/cgotorch.h"
import "C"

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctensor"
)

// Init selects the initializer of new rows (see Config.InitParams).
type Init int32

// The initializers; a new row's value depends only on (seed, id). New refuses
// (ErrInvalidArgument) parameters that are not finite or with which a row value could be beyond
// float32's range (see ct_table_initializer in cgotorch.h for the bounds).
const (
	InitZeros           Init = C.CT_INIT_ZEROS
	InitConstant        Init = C.CT_INIT_CONSTANT         // value
	InitUniform         Init = C.CT_INIT_UNIFORM          // low, high
	InitNormal          Init = C.CT_INIT_NORMAL           // mean, std
	InitTruncatedNormal Init = C.CT_INIT_TRUNCATED_NORMAL // mean, std, low, high
	InitXavierUniform   Init = C.CT_INIT_XAVIER_UNIFORM   // gain, fan in, fan out (0: dim)
	InitXavierNormal    Init = C.CT_INIT_XAVIER_NORMAL    // gain, fan in, fan out (0: dim)
)

// Optimizer selects the optimizer a table applies in Update (see Config.OptParams).
type Optimizer int32

// The optimizers and the order of their parameters.
const (
	OptNone           Optimizer = C.CT_OPT_NONE
	OptSGD            Optimizer = C.CT_OPT_SGD             // lr, momentum, dampening, nesterov (0/1)
	OptAdagrad        Optimizer = C.CT_OPT_ADAGRAD         // lr, lr decay, initial accumulator, eps
	OptRowWiseAdagrad Optimizer = C.CT_OPT_ROWWISE_ADAGRAD // lr, lr decay, initial accumulator, eps
	OptSparseAdam     Optimizer = C.CT_OPT_SPARSE_ADAM     // lr, beta1, beta2, eps
	OptAdamW          Optimizer = C.CT_OPT_ADAMW           // lr, beta1, beta2, eps, weight decay
	OptFTRL           Optimizer = C.CT_OPT_FTRL            // alpha, beta, l1, l2, initial accumulator
)

// Layout says where optimizer states live relative to the embedding.
type Layout int32

// The layouts: separate block arrays per state (the default, the faster one in gorec's
// measurements) or interleaved (a block row holds the embedding and its states side by side).
const (
	LayoutSeparate    Layout = C.CT_LAYOUT_SEPARATE
	LayoutInterleaved Layout = C.CT_LAYOUT_INTERLEAVED
)

// ReadDefault is the row Read and Prefetch give for ids not in the table.
type ReadDefault int32

// The defaults: zeros, or the initializer's value for the id (what Lookup would insert).
const (
	ReadZeros   ReadDefault = C.CT_READ_ZEROS
	ReadInitial ReadDefault = C.CT_READ_INITIAL
)

// Config describes a new table. Zero BlockRows means 4096.
type Config struct {
	Dim        int64
	Capacity   int64 // rows and ids to allocate up front
	BlockRows  int64
	Init       Init
	InitParams [4]float64
	Optimizer  Optimizer
	OptParams  [8]float64
	Device     cgotorch.Device
	Seed       uint64
	Layout     Layout
	// TensorKernels runs the tensor-op kernels of CUDA tables on a CPU table (for tests).
	TensorKernels bool
	// TrackAccess keeps each row's last step and frequency (8 bytes a row), which Metadata and
	// Evict need (CT_TABLE_TRACK_ACCESS).
	TrackAccess bool
	// SeedFromName derives the seed from the table's name (CT_TABLE_SEED_FROM_NAME); Config
	// then reports the derived seed.
	SeedFromName bool
}

// Stats describes a table.
type Stats struct {
	Size      int64 // ids stored
	Capacity  int64 // rows the allocated blocks hold
	Bytes     int64 // memory held by blocks, id map and bookkeeping
	Dim       int64
	Step      int64 // optimizer steps taken
	NumStates int
	Optimizer Optimizer
}

// Snapshot is a consistent copy of a table: ids sorted ascending, their rows and optimizer
// states (named as in StateName), and the step counter.
type Snapshot struct {
	IDs        *cgotorch.Tensor
	Rows       *cgotorch.Tensor
	States     []*cgotorch.Tensor
	StateNames []string
	Step       int64
}

// Close releases the snapshot's tensors.
func (s *Snapshot) Close() {
	if s == nil {
		return
	}
	s.IDs.Close()
	s.Rows.Close()
	for _, t := range s.States {
		t.Close()
	}
}

// Table is a handle to a named dynamic hash embedding table living on the C side (see
// cgotorch.h, "Embedding tables"). Every method returns an error instead of panicking (see
// the package doc); errors wrap ErrInvalidArgument (bad input: nothing changed), ErrClosed,
// ErrNameTaken, ErrNotFound, ErrUnknownPrefetch, ErrIncompatible or ErrTorch.
//
// Close closes the table itself, for every handle (including those from Open), after the
// operations in flight; it is idempotent and safe to call concurrently with other methods, which
// then fail with ErrClosed. An open table is registered by name, so a handle that becomes
// unreachable does not close it: its cleanup only releases the handle.
type Table struct {
	mu      sync.RWMutex // held shared by every call, exclusively by Close (which frees p)
	p       C.ct_table
	name    string
	cleanup runtime.Cleanup
}

func newTableHandle(p C.ct_table, name string) *Table {
	t := &Table{p: p, name: name}
	t.cleanup = runtime.AddCleanup(t, freeTableHandle, p)
	return t
}

func freeTableHandle(p C.ct_table) { C.ct_table_free(p) }

// tensorArg is the handle of a tensor argument; nil or closed tensors are bad input.
func tensorArg(op, what string, t *cgotorch.Tensor) (C.ct_tensor, error) {
	p, err := ctensor.Handle(op, what, t)
	return C.ct_tensor(p), err
}

// newTensor wraps a handle the C ABI returned (nil for NULL).
func newTensor(p C.ct_tensor) *cgotorch.Tensor {
	return ctensor.Wrap(unsafe.Pointer(p)).(*cgotorch.Tensor)
}

// toError converts (and frees) an error of the C ABI with cgotorch's conversion: its code
// gives the sentinel; nil stays nil.
func toError(op string, e C.ct_error) error { return ctensor.Error(op, unsafe.Pointer(e)) }

// acquire returns the handle with t.mu held shared; release with t.mu.RUnlock.
func (t *Table) acquire(op string) (C.ct_table, error) {
	if t == nil {
		return nil, &cgotorch.Error{Op: op, Msg: "nil *Table", Kind: cgotorch.ErrClosed}
	}
	t.mu.RLock()
	return t.held(op)
}

// tryAcquire is acquire, except that it gives up at once (ok false, no error) where acquire
// would wait: while a Close holds or waits for the lock.
func (t *Table) tryAcquire(op string) (p C.ct_table, ok bool, err error) {
	if t == nil {
		_, err = t.acquire(op) // its error for a nil handle
		return nil, false, err
	}
	if !t.mu.TryRLock() {
		return nil, false, nil
	}
	p, err = t.held(op)
	return p, err == nil, err
}

// held returns the handle once t.mu is held shared, or releases it if the table is closed.
func (t *Table) held(op string) (C.ct_table, error) {
	if t.p == nil {
		t.mu.RUnlock()
		return nil, &cgotorch.Error{Op: op, Msg: "table \"" + t.name + "\" is closed", Kind: cgotorch.ErrClosed}
	}
	return t.p, nil
}

// MaxNameBytes is the longest table name, in bytes.
const MaxNameBytes = 255

// tableName is name as a C string (the caller frees it), refused (ErrInvalidArgument) when it
// holds a NUL byte, which C would take for its end (the table would get the name's prefix),
// or is longer than MaxNameBytes. (The C side checks the rest: empty, control bytes.)
func tableName(op, name string) (*C.char, error) {
	switch {
	case strings.IndexByte(name, 0) >= 0:
		return nil, &cgotorch.Error{Op: op, Msg: fmt.Sprintf("invalid argument: table name %q contains a NUL byte", name), Kind: cgotorch.ErrInvalidArgument}
	case len(name) > MaxNameBytes:
		return nil, &cgotorch.Error{Op: op, Msg: fmt.Sprintf("invalid argument: table name is longer than %d bytes", MaxNameBytes), Kind: cgotorch.ErrInvalidArgument}
	}
	return C.CString(name), nil
}

// New creates and registers a table; the name must not be taken. An empty name gives an
// unnamed table, which is not registered.
func New(name string, cfg Config) (*Table, error) {
	if err := ctensor.CheckDevice(cfg.Device); err != nil {
		return nil, err
	}
	c := C.ct_table_config{
		dim:         C.int64_t(cfg.Dim),
		capacity:    C.int64_t(cfg.Capacity),
		block_rows:  C.int64_t(cfg.BlockRows),
		initializer: C.int32_t(cfg.Init),
		optimizer:   C.int32_t(cfg.Optimizer),
		device:      C.ct_device{_type: C.int32_t(cfg.Device.Type), index: C.int32_t(cfg.Device.Index)}, // checked above
		seed:        C.uint64_t(cfg.Seed),
		layout:      C.int32_t(cfg.Layout),
	}
	for i, v := range cfg.InitParams {
		c.init_params[i] = C.double(v)
	}
	for i, v := range cfg.OptParams {
		c.opt_params[i] = C.double(v)
	}
	if cfg.TensorKernels {
		c.flags |= C.CT_TABLE_TENSOR_KERNELS
	}
	if cfg.TrackAccess {
		c.flags |= C.CT_TABLE_TRACK_ACCESS
	}
	if cfg.SeedFromName {
		c.flags |= C.CT_TABLE_SEED_FROM_NAME
	}
	cname, err := tableName("new table", name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	var p C.ct_table
	if err := toError("new table", C.ct_table_new(&p, cname, &c)); err != nil {
		return nil, err
	}
	return newTableHandle(p, name), nil
}

// Open returns a new handle to the open table of that name (ErrNotFound if none).
func Open(name string) (*Table, error) {
	cname, err := tableName("open table", name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	var p C.ct_table
	if err := toError("open table", C.ct_table_open(&p, cname)); err != nil {
		return nil, err
	}
	return newTableHandle(p, name), nil
}

// Names lists the open tables, sorted.
func Names() []string {
	var s *C.char
	if err := toError("table names", C.ct_table_names(&s)); err != nil {
		return nil
	}
	defer C.ct_string_free(s)
	g := C.GoString(s)
	if g == "" {
		return []string{}
	}
	names := strings.Split(g, "\n")
	sort.Strings(names)
	return names
}

// StateName is the name of optimizer state i of a table using opt ("" if none).
func StateName(opt Optimizer, i int) string {
	s := C.ct_table_state_name(C.int32_t(opt), C.int32_t(i))
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// UpdateByName applies one optimizer step to the open table of that name.
func UpdateByName(name string, keys, grads *cgotorch.Tensor) error {
	k, err := tensorArg("update", "keys", keys)
	if err != nil {
		return err
	}
	g, err := tensorArg("update", "grads", grads)
	if err != nil {
		return err
	}
	cname, err := tableName("update", name)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cname))
	err = toError("update", C.ct_table_update_by_name(cname, k, g))
	runtime.KeepAlive(keys)
	runtime.KeepAlive(grads)
	return err
}

// Name is the table's name.
func (t *Table) Name() string { return t.name }

// Close closes the table (for every handle) and releases this handle. Idempotent.
func (t *Table) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p == nil {
		return nil
	}
	err := toError("close", C.ct_table_close(t.p))
	t.cleanup.Stop()
	C.ct_table_free(t.p)
	t.p = nil
	return err
}

// Lookup returns the rows of keys (int64 [N]) as float32 [N, dim] on the keys' device,
// inserting and initialising absent ids.
func (t *Table) Lookup(keys *cgotorch.Tensor) (*cgotorch.Tensor, error) {
	const op = "table lookup"
	var out C.ct_tensor
	if err := t.withKeys(op, keys, func(p C.ct_table, k C.ct_tensor) C.ct_error {
		return C.ct_table_lookup(&out, p, k)
	}); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// Indices returns the row indices of keys (int64 [N]): with insert, absent ids are inserted;
// without, they give -1.
func (t *Table) Indices(keys *cgotorch.Tensor, insert bool) (*cgotorch.Tensor, error) {
	const op = "table indices"
	ins := C.int32_t(0)
	if insert {
		ins = 1
	}
	var out C.ct_tensor
	if err := t.withKeys(op, keys, func(p C.ct_table, k C.ct_tensor) C.ct_error {
		return C.ct_table_indices(&out, p, k, ins)
	}); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// Read returns the rows of keys without inserting: absent ids get the default row; found
// (bool [N]) says which ids were present.
func (t *Table) Read(keys *cgotorch.Tensor, def ReadDefault) (rows, found *cgotorch.Tensor, err error) {
	const op = "table read"
	var r, f C.ct_tensor
	if err := t.withKeys(op, keys, func(p C.ct_table, k C.ct_tensor) C.ct_error {
		return C.ct_table_read(&r, &f, p, k, C.int32_t(def))
	}); err != nil {
		return nil, nil, err
	}
	return newTensor(r), newTensor(f), nil
}

// Write sets the rows of keys to values (float32 [N, dim]), inserting absent ids; for a
// repeated id the last occurrence wins.
func (t *Table) Write(keys, values *cgotorch.Tensor) error {
	return t.keysRows("table write", keys, values, "values", func(p C.ct_table, k, v C.ct_tensor) C.ct_error {
		return C.ct_table_write(p, k, v)
	})
}

// Update applies one optimizer step from grads (float32 [N, dim]); gradients of repeated ids
// are summed first. Gradients with NaN or Inf are rejected as a whole (ErrInvalidArgument).
func (t *Table) Update(keys, grads *cgotorch.Tensor) error {
	return t.keysRows("table update", keys, grads, "grads", func(p C.ct_table, k, g C.ct_tensor) C.ct_error {
		return C.ct_table_update(p, k, g)
	})
}

// withKeys runs f with the table's handle (held shared) and the handle of keys, a tensor
// argument checked first, and converts its error.
func (t *Table) withKeys(op string, keys *cgotorch.Tensor, f func(p C.ct_table, k C.ct_tensor) C.ct_error) error {
	k, err := tensorArg(op, "keys", keys)
	if err != nil {
		return err
	}
	err = t.call(op, func(p C.ct_table) C.ct_error { return f(p, k) })
	runtime.KeepAlive(keys)
	return err
}

func (t *Table) keysRows(op string, keys, rows *cgotorch.Tensor, what string, f func(C.ct_table, C.ct_tensor, C.ct_tensor) C.ct_error) error {
	k, err := tensorArg(op, "keys", keys)
	if err != nil {
		return err
	}
	r, err := tensorArg(op, what, rows)
	if err != nil {
		return err
	}
	p, err := t.acquire(op)
	if err != nil {
		return err
	}
	defer t.mu.RUnlock()
	err = toError(op, f(p, k, r))
	runtime.KeepAlive(keys)
	runtime.KeepAlive(rows)
	runtime.KeepAlive(t)
	return err
}

// Prefetch starts an asynchronous Read of keys on a worker thread and returns its id.
func (t *Table) Prefetch(keys *cgotorch.Tensor, def ReadDefault) (int64, error) {
	const op = "table prefetch"
	var id C.int64_t
	err := t.withKeys(op, keys, func(p C.ct_table, k C.ct_tensor) C.ct_error {
		return C.ct_table_prefetch(&id, p, k, C.int32_t(def))
	})
	return int64(id), err
}

// PrefetchWait waits up to timeout (negative: without limit) for prefetch id. ready reports
// whether it finished: then rows and found are set and the prefetch is consumed (waiting again
// gives ErrUnknownPrefetch); otherwise wait again later. One wait at a time: a concurrent second
// wait gives ErrUnknownPrefetch, and so does a wait during which the prefetch is discarded
// (at once). While a Close of this handle waits for its other calls (a long export, say), a
// wait with a timeout gives not ready after it, so that a caller polling in time slices can
// give up; once the Close is done it gives ErrClosed.
func (t *Table) PrefetchWait(id int64, timeout time.Duration) (rows, found *cgotorch.Tensor, ready bool, err error) {
	const op = "table prefetch wait"
	var p C.ct_table
	if timeout < 0 {
		p, err = t.acquire(op)
	} else {
		var ok bool
		if p, ok, err = t.tryAcquire(op); err == nil && !ok {
			time.Sleep(timeout) // a Close holds or waits for the lock
			return nil, nil, false, nil
		}
	}
	if err != nil {
		return nil, nil, false, err
	}
	defer t.mu.RUnlock()
	us := C.int64_t(-1)
	if timeout >= 0 {
		us = C.int64_t(timeout.Microseconds())
	}
	var r, f C.ct_tensor
	var rd C.int32_t
	err = toError(op, C.ct_table_prefetch_wait(&r, &f, &rd, p, C.int64_t(id), us))
	runtime.KeepAlive(t)
	if err != nil || rd == 0 {
		return nil, nil, false, err
	}
	return newTensor(r), newTensor(f), true, nil
}

// PrefetchDiscard forgets a prefetch that will not be waited for, also one that another
// goroutine is waiting for (that PrefetchWait then gives ErrUnknownPrefetch). An id not pending
// (never issued, consumed or discarded) gives ErrUnknownPrefetch.
func (t *Table) PrefetchDiscard(id int64) error {
	const op = "table prefetch discard"
	p, err := t.acquire(op)
	if err != nil {
		return err
	}
	defer t.mu.RUnlock()
	err = toError(op, C.ct_table_prefetch_discard(p, C.int64_t(id)))
	runtime.KeepAlive(t)
	return err
}

// Delete removes keys and returns how many were present. Their state is reset before their
// row indices are reused.
func (t *Table) Delete(keys *cgotorch.Tensor) (int64, error) {
	const op = "table delete"
	var n C.int64_t
	err := t.withKeys(op, keys, func(p C.ct_table, k C.ct_tensor) C.ct_error {
		return C.ct_table_delete(&n, p, k)
	})
	return int64(n), err
}

// Clear removes every id and the admission counts (allocated blocks and the step counter are
// kept).
func (t *Table) Clear() error {
	const op = "table clear"
	p, err := t.acquire(op)
	if err != nil {
		return err
	}
	defer t.mu.RUnlock()
	err = toError(op, C.ct_table_clear(p))
	runtime.KeepAlive(t)
	return err
}

// Stats describes the table.
func (t *Table) Stats() (Stats, error) {
	const op = "table stats"
	p, err := t.acquire(op)
	if err != nil {
		return Stats{}, err
	}
	defer t.mu.RUnlock()
	var s C.ct_table_stats
	err = toError(op, C.ct_table_stats_get(&s, p))
	runtime.KeepAlive(t)
	if err != nil {
		return Stats{}, err
	}
	return Stats{
		Size: int64(s.size), Capacity: int64(s.capacity), Bytes: int64(s.bytes), Dim: int64(s.dim),
		Step: int64(s.step), NumStates: int(s.num_states), Optimizer: Optimizer(s.optimizer),
	}, nil
}

// Export returns a consistent snapshot of the table (on the table's device).
func (t *Table) Export() (*Snapshot, error) {
	const op = "table export"
	p, err := t.acquire(op)
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	var ids, rows C.ct_tensor
	var states [2]C.ct_tensor
	var step C.int64_t
	var s C.ct_table_stats
	if err := toError(op, C.ct_table_stats_get(&s, p)); err != nil {
		return nil, err
	}
	err = toError(op, C.ct_table_export(&ids, &rows, &states[0], 2, &step, p))
	runtime.KeepAlive(t)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{IDs: newTensor(ids), Rows: newTensor(rows), Step: int64(step)}
	for i := 0; i < int(s.num_states); i++ {
		snap.States = append(snap.States, newTensor(states[i]))
		snap.StateNames = append(snap.StateNames, StateName(Optimizer(s.optimizer), i))
	}
	return snap, nil
}
