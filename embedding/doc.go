// Package embedding provides dynamic hash embedding tables: tables that map raw int64
// feature ids (user ids, item ids, crossed features) to float32 rows, store only the ids they
// have seen, grow as new ids arrive, forget ids on request and update rows with sparse
// optimizers whose state lives next to each row. The tables live on the C side (cgotorch.h,
// "Embedding tables", compiled in package cgotorch); this package is their Go API, over a thin
// internal binding of that C ABI (internal/ctable), and has no cgo of its own.
//
// # Tables
//
// New creates an unnamed table; NewNamed creates one under a process-wide unique name, which
// is what Get (another handle to it), Names (the open ones) and checkpoints know it by. Close
// closes a table for all its handles: its name is free at once (a new table may take it), later
// operations fail with ErrClosed, and Close returns once the operations in flight have
// finished. An open table stays open even when no Go value refers to it any more: close tables
// you are done with.
//
//	users, err := embedding.NewNamed("user", embedding.Config{
//		Dim:       16,
//		Optimizer: embedding.SparseAdam{LR: 1e-3},
//	})
//	rows, err := users.LookupIDs([]int64{1180210, 42})   // [2, 16], inserting new ids
//	err = users.UpdateIDs([]int64{1180210, 42}, grads)   // one optimizer step
//
// # Operations
//
//   - Lookup: the rows of ids, inserting absent ids with their initial value (training).
//   - Read: the rows of ids without inserting; absent ids get a default row (inference).
//   - Write: set rows (insert or assign). Update: one optimizer step from gradients.
//   - Prefetch: an asynchronous Read on a worker thread; Wait(ctx) returns its rows.
//   - Delete, Clear, Len, Stats, Export (a consistent snapshot with optimizer states),
//     ExportEach (the same, streamed a chunk at a time) and ReadState (a few ids' rows and
//     optimizer states, without the whole table).
//
// Ids are int64 tensors of any shape (contiguous, any device), as in torch.nn.Embedding and
// nn.Embedding; rows, values and gradients are float32 of the ids' shape + [Dim] (found, of
// Read, and indices have the ids' shape). Each operation also has a form taking a []int64
// (LookupIDs, ...), and Lookup and Read one writing the rows into the caller's []float32
// (LookupInto, ReadInto: no tensor on either side, for serving loops that reuse their
// buffers). LookupCounted looks up distinct ids counting each as often as a batch holds it
// (frequencies, admission), for a caller that deduplicated the batch (a sharded table's owner).
// Results come back on the ids' device; empty ids give [0, Dim] results.
//
// # Autograd
//
// Forward and ForwardBag (PyTorch's Embedding and EmbeddingBag: sum, mean or max over bags
// given by offsets, per-sample weights, a padding id, max_norm) return rows that take part in
// libtorch's autograd graph when training: each distinct id of the batch is looked up once
// (inserted if new), and a backward pass hands the table the gradient of each row, summed over
// the id's occurrences. The table keeps it pending until Step applies one step of its optimizer
// (micro-batches accumulate; ZeroGrad drops them), or applies it at once with Fused. A step
// from pending gradients gives the numbers Update gives for the same ids and gradients.
// Inference lookups (Train false) read without inserting. The nn package wraps them in the
// Embedding and EmbeddingBag modules.
//
// # Values
//
// A new row's value depends only on the table's seed and the id (a counter-based generator, not
// libtorch's global one), so it does not depend on insertion order, batch composition, thread
// count or world size (dist.ShardedTable), and a deleted id that comes back starts again from
// the same value with fresh optimizer state. With the default Seed (0) a named table's seed is
// derived from its name, so tables do not start alike (user 42 and movie 42 get different rows)
// and a table of a given name starts the same in every run; a nonzero Seed is used as is, and an
// unnamed table uses its Seed as is (see Config.Seed). Index allocation is contiguous (0, 1,
// 2, ...), reusing the indices of deleted ids.
//
// # Steps
//
// One rule, PyTorch's (an optimizer steps a parameter that has a gradient, even one with no
// rows, and skips one whose gradient is None): a gradient is a step, no gradient is none.
// Update is a gradient, so every Update counts one step, also one with no ids (then no row or
// state changes, but the step counter, which Adam's bias corrections and Adagrad's lr decay
// read, moves on; SGD's momentum moves rows absent from a step, as in PyTorch). Step applies the
// gradient that backward passes left pending since the last Step or ZeroGrad: after a backward
// pass, even over no ids, it counts one step; with none (no backward pass since, or ZeroGrad)
// it does nothing at all. testdata/step_rule.py checks the rule against PyTorch. A sharded
// table relies on it: every owner steps at every step, with or without ids.
//
// # Optimizers
//
// SGD (with PyTorch's sparse momentum semantics), Adagrad, RowWiseAdagrad, SparseAdam, AdamW and
// FTRL; each type's doc gives its rule. SGD, Adagrad and SparseAdam give the numbers of the same
// PyTorch optimizer applied to an nn.Embedding(sparse=True) holding the same rows; the tests
// check this against fixtures produced by PyTorch, learning-rate schedules included: SetLR
// changes a table's rate between steps.
//
// # Lifecycle
//
// Save, SaveWith, SaveWithOptions, Load, LoadRenamed and LoadInto write and read checkpoints of
// named tables (a checkpoint knows its tables by name):
// directories of safetensors files and a JSON manifest (docs/checkpoint.md), exact to the bit,
// consistent per table, streamed in chunks, and crash-safe (the previous checkpoint stays loadable
// until the new one is durable). A staged save (SaveOptions.Staged) copies each table into memory
// first, so that training in other goroutines waits for the copy, not the disk. A table created
// with Config.TrackAccess keeps every row's last training step and frequency (Metadata, 8 bytes a
// row); its Evict removes rows by TTL, KeepRecent (LRU), KeepFrequent (LFU) or MemoryBudget,
// EvictIf by a predicate, and Compact gives the memory back. SetAdmission(k) gives an id a row only
// at its k-th training lookup. Delta and ApplyDelta ship the rows changed and the ids deleted since
// a mark, with the optimizer's parameters and the admission state, for serving or incremental
// checkpoints (ApplyDelta: all or nothing, each delta once and in order: ErrIncompatible
// otherwise). Check verifies a table's invariants; every load runs it.
//
// The long operations take a context.Context first, as database/sql's do: Save and its forms,
// Load, LoadRenamed and LoadInto check it between chunks of rows (a save stopped by it leaves
// the previous checkpoint as it was, a stopped load changes nothing), ExportEach before each
// chunk, Evict before it starts and EvictIf while it chooses, and Prefetch.Wait stops waiting
// when it is done. The error then wraps ctx.Err().
//
// # Errors
//
// Every method returns its failures as errors (the modules of package nn panic instead, as model
// math does); the backward pass through a lookup is tensor math and panics with a *cgotorch.Error
// if the table was closed meanwhile or (Fused) a gradient is NaN or Inf. Every error wraps one of
// ErrBadInput, ErrClosed, ErrNameTaken, ErrNotFound, ErrUnknownPrefetch, ErrDevice, ErrCorrupt,
// ErrIncompatible or ErrInternal (use errors.Is), and the *cgotorch.Error it came from when there
// is one. All but ErrCorrupt and ErrInternal are cgotorch's sentinels re-exported (ErrBadInput is
// cgotorch.ErrInvalidArgument). A failed call changes nothing: inputs are checked (dtype, rank, contiguity, sizes, NaN
// and Inf; an update whose result would overflow float32 is refused too) and every allocation
// is made before the table changes. Nil tables and tensors are ErrBadInput.
//
// # Concurrency
//
// Tables are safe for concurrent use. Each table has a reader/writer lock: lookups of ids that are
// all present, reads, exports and stats share it; inserting lookups, writes, updates, deletes and
// Clear take it alone. Evict chooses its rows under the shared lock and takes it alone only to
// remove them (see Table.Evict). Within one call, large batches are split over libtorch's intra-op
// threads (cgotorch.SetNumThreads): the id map's find from 32,768 ids, the gathers, new rows'
// initialisation and the optimizer's row updates from 16,384 rows (fewer for rows wider than 1,024
// floats); a smaller batch costs less on one thread than waking others. Where many goroutines call
// at once (serving), those calls already keep the cores busy: one intra-op thread avoids running
// several threads' teams on each core.
package embedding
