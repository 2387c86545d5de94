package embedding

import (
	"sync"
	"sync/atomic"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// Table is a handle to a dynamic hash embedding table, named (NewNamed) or not (New). All
// methods are safe for concurrent use. Ids are int64 tensors of any shape (contiguous, on any
// device); rows, values and gradients are float32 tensors of the ids' shape + [Dim]
// (contiguous); results come back on the ids' device. Empty ids are fine and give [0, Dim]
// results.
type Table struct {
	t    *ctable.Table
	name string
	st   *tableState // shared by every handle of the table (New, Get, a load)
}

// tableState is what the handles of one table share: its resolved Config, which a load into the
// table (LoadInto) and SetLR replace while other goroutines read it.
type tableState struct{ cfg atomic.Pointer[Config] }

func newState(cfg Config) *tableState {
	s := &tableState{}
	s.cfg.Store(&cfg)
	return s
}

// conf is the table's resolved Config.
func (t *Table) conf() Config { return *t.st.cfg.Load() }

// configs keeps the state of the named tables this package created, for Get; mu also orders
// table creation with updates of the map.
var configs = struct {
	sync.Mutex
	m map[string]*tableState
}{m: map[string]*tableState{}}

// New creates an unnamed table: it is in no registry (Get and Names do not see it, it takes no
// name) and its Name is "". Name a table (NewNamed) to look it up by name or to save it in a
// checkpoint. With the default Seed (0) an unnamed table's rows start from f(0, id) (see
// Config.Seed).
func New(cfg Config) (*Table, error) { return create("", cfg) }

// NewNamed creates a table and registers it under name (ErrNameTaken if an open table has it):
// 1 to 255 bytes, no control characters or NUL bytes (ErrBadInput). The name is how Get finds
// the table and how checkpoints know it, and with the default Seed it keys the table's initial
// rows (Config.Seed).
func NewNamed(name string, cfg Config) (*Table, error) {
	if name == "" {
		return nil, badInput("new", name, "the name is empty (New makes an unnamed table)")
	}
	return create(name, cfg)
}

func create(name string, cfg Config) (*Table, error) {
	cfg, cc, err := cfg.resolve(name)
	if err != nil {
		return nil, err
	}
	configs.Lock()
	defer configs.Unlock()
	t, err := ctable.New(name, cc)
	if err != nil {
		return nil, wrap("new", name, err)
	}
	st := newState(cfg)
	if name != "" {
		configs.m[name] = st
	}
	tbl := &Table{t: t, name: name, st: st}
	tbl.refresh() // the optimizer's defaults and the derived seed filled in
	return tbl, nil
}

// Get returns a new handle to the open table of that name. Closing any handle closes the table.
func Get(name string) (*Table, bool) {
	t, err := ctable.Open(name)
	if err != nil {
		return nil, false
	}
	configs.Lock()
	s, ok := configs.m[name]
	configs.Unlock()
	if !ok {
		// Created through the binding directly: what the table itself can tell.
		st, err := t.Stats()
		if err != nil {
			t.Close()
			return nil, false
		}
		s = newState(Config{Dim: int(st.Dim), Optimizer: NoOptimizer{}})
	}
	return &Table{t: t, name: name, st: s}, true
}

// Names lists the open tables, sorted.
func Names() []string { return ctable.Names() }

// UpdateByName applies one optimizer step to the open table of that name (see Table.Update).
func UpdateByName(name string, ids, grads *cgotorch.Tensor) error {
	return wrap("update", name, ctable.UpdateByName(name, ids, grads))
}

// Name is the table's name ("" for a table made by New).
func (t *Table) Name() string {
	if t == nil {
		return ""
	}
	return t.name
}

// Dim is the width of the table's rows.
func (t *Table) Dim() int {
	if t == nil {
		return 0
	}
	return t.conf().Dim
}

// Config is the table's configuration with the defaults filled in, and the optimizer's learning
// rate as it is now (SetLR). The initializer, seed and optimizer are read from the table itself,
// so they stay true after anything that replaces its contents (LoadInto, a swap of its rows).
func (t *Table) Config() Config {
	if t == nil {
		return Config{}
	}
	t.refresh()
	return t.conf()
}

// refresh sets the shared Config's initializer, seed and optimizer from the C table's (every
// parameter, the defaults filled in, the learning rate as it is now); a closed table keeps what
// it had.
func (t *Table) refresh() {
	cc, err := t.t.Config()
	if err != nil {
		return
	}
	cfg := t.conf()
	cfg.Initializer = initializerOf(cc.Init, cc.InitParams)
	cfg.Seed = cc.Seed
	cfg.Optimizer = optimizerOf(cc.Optimizer, cc.OptParams)
	t.st.cfg.Store(&cfg)
}

// Len is the number of ids in the table (0 once it is closed).
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	st, err := t.t.Stats()
	if err != nil {
		return 0
	}
	return int(st.Size)
}

// Stats describes a table.
type Stats struct {
	Len      int   // ids stored
	Capacity int   // rows the allocated blocks hold
	Bytes    int64 // memory held by the blocks, the id map and per-row bookkeeping
	Dim      int
	Step     int64 // optimizer steps taken (Update calls)
}

// Stats describes the table.
func (t *Table) Stats() (Stats, error) {
	if t == nil {
		return Stats{}, errNilTable
	}
	st, err := t.t.Stats()
	if err != nil {
		return Stats{}, wrap("stats", t.name, err)
	}
	return Stats{Len: int(st.Size), Capacity: int(st.Capacity), Bytes: st.Bytes, Dim: int(st.Dim), Step: st.Step}, nil
}

// Close closes the table for every handle: it waits for the operations in flight, frees the
// table's memory and its name; later calls fail with ErrClosed. Closing twice is fine.
func (t *Table) Close() error {
	if t == nil {
		return nil
	}
	err := t.t.Close() // (not under configs' lock: it waits for the operations in flight)
	if t.name == "" {
		return wrap("close", t.name, err)
	}
	configs.Lock()
	defer configs.Unlock()
	if !isOpen(t.name) { // (a table created after this one was closed by another handle keeps it)
		delete(configs.m, t.name)
	}
	return wrap("close", t.name, err)
}

// isOpen reports whether a table of that name is open.
func isOpen(name string) bool {
	for _, n := range ctable.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// Lookup returns the rows of ids, inserting (and initialising) the ids not yet in the table.
func (t *Table) Lookup(ids *cgotorch.Tensor) (*cgotorch.Tensor, error) {
	if t == nil {
		return nil, errNilTable
	}
	s, err := t.flatIDs("lookup", ids)
	if err != nil {
		return nil, err
	}
	defer s.close()
	r, err := t.t.Lookup(s.flat)
	return s.back(r, wrap("lookup", t.name, err))
}

// Indices returns the row indices of ids (int64, the ids' shape). With insert, absent ids are inserted
// (as Lookup does); without, they give -1. Indices are contiguous from 0; those of deleted ids
// are reused.
func (t *Table) Indices(ids *cgotorch.Tensor, insert bool) (*cgotorch.Tensor, error) {
	if t == nil {
		return nil, errNilTable
	}
	s, err := t.flatIDs("indices", ids)
	if err != nil {
		return nil, err
	}
	defer s.close()
	r, err := t.t.Indices(s.flat, insert)
	return s.back(r, wrap("indices", t.name, err))
}

// Read returns the rows of ids without inserting anything: ids not in the table get the
// Config's ReadDefault row. found (bool, the ids' shape) says which ids were present.
func (t *Table) Read(ids *cgotorch.Tensor) (rows, found *cgotorch.Tensor, err error) {
	if t == nil {
		return nil, nil, errNilTable
	}
	s, err := t.flatIDs("read", ids)
	if err != nil {
		return nil, nil, err
	}
	defer s.close()
	rows, found, err = t.t.Read(s.flat, t.conf().ReadDefault.c())
	if err != nil {
		return nil, nil, wrap("read", t.name, err)
	}
	rows, _ = s.back(rows, nil)
	found, _ = s.back(found, nil)
	return rows, found, nil
}

// Write sets the rows of ids to values, inserting absent ids (their optimizer state starts
// fresh; present ids keep theirs). For a repeated id the last occurrence wins. Values with NaN
// or Inf, or of magnitude 2^64 (1.8446744e19) or more, are rejected (ErrBadInput): below that
// bound a value's square is a finite float32, as optimizer steps and norms need.
func (t *Table) Write(ids, values *cgotorch.Tensor) error {
	if t == nil {
		return errNilTable
	}
	return t.withRows("write", ids, "values", values, t.t.Write)
}

// Update applies one step of the table's optimizer with grads for ids: the gradients of
// repeated ids are summed first, ids not in the table are inserted first. A batch holding a NaN
// or Inf gradient is rejected as a whole (ErrBadInput) and changes nothing: one bad example
// must not poison the rows of a batch, and no partial update is hidden from the caller. So is
// one whose result would overflow float32 (a row or an optimizer state NaN or Inf: Adagrad's
// sum after a gradient of 1e20, say), which no checkpoint could hold. Every Update counts one
// step, also one with no ids (the package doc's Steps).
func (t *Table) Update(ids, grads *cgotorch.Tensor) error {
	if t == nil {
		return errNilTable
	}
	return t.withRows("update", ids, "grads", grads, t.t.Update)
}

// Delete removes ids and returns how many were present. A deleted id's row and optimizer state
// are gone: if it comes back, it starts from its initial value with fresh state.
func (t *Table) Delete(ids *cgotorch.Tensor) (int, error) {
	if t == nil {
		return 0, errNilTable
	}
	s, err := t.flatIDs("delete", ids)
	if err != nil {
		return 0, err
	}
	defer s.close()
	n, err := t.t.Delete(s.flat)
	return int(n), wrap("delete", t.name, err)
}

// Clear removes every id and the admission counts. The allocated blocks and the step counter
// are kept.
func (t *Table) Clear() error {
	if t == nil {
		return errNilTable
	}
	return wrap("clear", t.name, t.t.Clear())
}

// State is one optimizer state of an Export.
type State struct {
	Name   string           // PyTorch's name: "momentum_buffer", "sum", "exp_avg", ...
	Values *cgotorch.Tensor // [N, Dim], or [N, 1] for RowWiseAdagrad's "sum"
}

// Snapshot is a consistent copy of a table.
type Snapshot struct {
	IDs    *cgotorch.Tensor // int64 [N], ascending
	Rows   *cgotorch.Tensor // float32 [N, Dim]
	States []State
	Step   int64
}

// Close releases the snapshot's tensors.
func (s *Snapshot) Close() {
	if s == nil {
		return
	}
	s.IDs.Close()
	s.Rows.Close()
	for _, st := range s.States {
		st.Values.Close()
	}
}

// Export returns a consistent snapshot: every id (ascending), its row and optimizer states, as
// of one moment between operations. Tensors are on the table's device.
func (t *Table) Export() (*Snapshot, error) {
	if t == nil {
		return nil, errNilTable
	}
	s, err := t.t.Export()
	if err != nil {
		return nil, wrap("export", t.name, err)
	}
	snap := &Snapshot{IDs: s.IDs, Rows: s.Rows, Step: s.Step}
	for i, v := range s.States {
		snap.States = append(snap.States, State{Name: s.StateNames[i], Values: v})
	}
	return snap, nil
}
