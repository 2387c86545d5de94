package ctable_test

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
	"github.com/gorec/gorec/internal/procstat"
)

// onThread runs calls on one goroutine locked to its OS thread: the first; then release, on
// the calling goroutine, while that thread waits (as Go's idle threads do); then the others.
// What each call returns comes back in order.
func onThread(t *testing.T, release func(), calls ...func() int64) []int64 {
	t.Helper()
	ran, released, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	out := make([]int64, len(calls))
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(done)
		out[0] = calls[0]()
		close(ran)
		<-released
		for i := 1; i < len(calls); i++ {
			out[i] = calls[i]()
		}
	}()
	<-ran
	release()
	close(released)
	<-done
	return out
}

// unsafeTable is an Adagrad table (dim 16, eps 1e-25) holding ids [0, n) at zero, their keys,
// and gradients of 1e18 for them: the bound of an update's step (lr g / eps) passes
// FLT_MAX / 4, so each update copies its rows aside to put them back should one overflow
// (ops.cc.h, step_raw), though none does (each step moves a weight by lr / sqrt(k)).
func unsafeTable(t *testing.T, name string, n int) (tbl *ctable.Table, keys, grads *cgotorch.Tensor) {
	t.Helper()
	tbl, err := ctable.New(name, ctable.Config{Dim: 16, Init: ctable.InitZeros, Optimizer: ctable.OptAdagrad,
		OptParams: [8]float64{0.1, 0, 0, 1e-25}, Device: cgotorch.CPU})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	t.Cleanup(cgotorch.ReleaseCachedMemory) // (the threads' kept copies: later tests see empty pools)
	keys, grads = cgotorch.MustFromSlice(idRange(n)), cgotorch.Full([]int64{int64(n), 16}, 1e18)
	t.Cleanup(keys.Close)
	t.Cleanup(grads.Close)
	if err := tbl.Write(keys, cgotorch.Zeros([]int64{int64(n), 16})); err != nil {
		t.Fatal(err)
	}
	return tbl, keys, grads
}

// Releasing the cached memory (ReleaseCachedMemory, and a table's Compact) frees what every
// thread keeps for its table calls besides the scratch pools: its distinct-id table (up to
// 1 MiB) and the copy an update that may overflow keeps of its rows. Here a thread that ran
// such calls and then waits: what it keeps shows in ScratchStats, goes with the release, and
// the same calls on it work again after it (the table grows afresh). Before, both were
// thread_local vectors apart from the pools: neither counted nor released (the thread kept
// them until it exited); the stats could not see them.
func TestReleaseFreesEveryThreadsDistinctTableAndUndo(t *testing.T) {
	// 30k distinct ids: a table of 2^17 slots; the copy of their rows (weights and sums), 3.84
	// MB, within the 4 MiB a kept vector may have.
	const n = 30_000
	tbl, keys, grads := unsafeTable(t, "ctable-release-tables", n)
	for _, release := range []struct {
		name string
		run  func() error
	}{
		{"ReleaseCachedMemory", func() error { cgotorch.ReleaseCachedMemory(); return nil }},
		{"Compact", tbl.Compact},
	} {
		call := func() int64 {
			if err := tbl.Update(keys, grads); err != nil {
				t.Error(err)
			}
			kept, _, err := ctable.ScratchStats()
			if err != nil {
				t.Error(err)
			}
			return kept
		}
		stats := func() int64 { kept, _, _ := ctable.ScratchStats(); return kept }
		got := onThread(t, func() {
			if err := release.run(); err != nil {
				t.Error(err)
			}
		}, call, stats, call)
		t.Logf("%s: kept %d bytes after the update, %d after the release, %d after the update again", release.name, got[0], got[1], got[2])
		// The distinct-id table, the rows' copy, and the pool's other vectors (uids, inverse, ...).
		const slots, undo = 4 << 17, n * 32 * 4
		if got[0] < slots+undo {
			t.Errorf("%s: a thread keeps %d bytes after an update of %d ids, want at least %d (its distinct-id table and the rows' copy)",
				release.name, got[0], n, slots+undo)
		}
		if got[1] != 0 {
			t.Errorf("after %s, the other thread keeps %d bytes, want 0", release.name, got[1])
		}
		if got[2] < slots+undo {
			t.Errorf("%s: after the release, the thread keeps %d bytes after the same update, want at least %d", release.name, got[2], slots+undo)
		}
	}
	// Every update applied: 4 steps, the k-th of -0.1 / sqrt(k), from 0.
	rows, _, err := tbl.Read(keys, ctable.ReadZeros)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := -0.1 * (1 + 1/math.Sqrt(2) + 1/math.Sqrt(3) + 0.5)
	v, _ := cgotorch.ToSlice[float32](rows)
	for i, x := range v {
		if math.Abs(float64(x)-want) > 1e-5 {
			t.Fatalf("row value %d is %v, want %.6f", i, x, want)
		}
	}
}

// residentGrowth is how much the resident size (KiB) grows when threads goroutines, each
// locked to its OS thread, run call and then wait (as Go's idle threads do) while the cached
// memory is released: the figure after the release against the one before the calls. It
// skips without /proc or under the race detector (its shadow memory hides the figures).
func residentGrowth(t *testing.T, threads int, call func() error) int64 {
	t.Helper()
	if procstat.ResidentKB() == 0 || raceEnabled {
		t.Skip("no /proc/self/status, or the race detector's shadow memory")
	}
	measure := func() int64 {
		runtime.GC()
		cgotorch.ReleaseCachedMemory()
		debug.FreeOSMemory()
		return procstat.ResidentKB()
	}
	before := measure()
	ran, released, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	for range threads {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := call(); err != nil {
				t.Error(err)
			}
			ran <- struct{}{}
			<-released
			done <- struct{}{}
		}()
	}
	for range threads {
		<-ran
	}
	after := measure()
	close(released)
	for range threads {
		<-done
	}
	t.Logf("resident %d MiB -> %d MiB (%d threads' calls, then a release)", before>>10, after>>10, threads)
	return after - before
}

// An update that may overflow copies its rows aside: the copy of a large one is freed after
// it, not kept by its thread. Before, each thread kept the copy of its largest such update
// (8 threads x 25.6 MB here: weights and Adagrad sums) until it exited, whatever the release.
func TestUndoOfLargeUpdatesIsNotKept(t *testing.T) {
	const n, threads = 200_000, 8
	tbl, keys, grads := unsafeTable(t, "ctable-release-undo", n)
	grew := residentGrowth(t, threads, func() error { return tbl.Update(keys, grads) })
	const copies = threads * n * 32 * 4 >> 10 // KiB (weights and sums)
	if grew > copies/4 {
		t.Errorf("resident memory grew by %d MiB, want under %d MiB (a quarter of the rows' copies, %d MiB)", grew>>10, copies/4>>10, copies>>10)
	}
}

// The distinct-id tables of idle threads go with a release: 32 threads that each ran an update
// of 60k distinct ids (a table of 2^18 slots, 1 MiB, the most a thread keeps) and then wait.
// Before, each kept its table until it exited: the resident size stayed 32 MiB up.
func TestReleaseReturnsIdleThreadsDistinctTables(t *testing.T) {
	const n, threads = 60_000, 32
	tbl, err := ctable.New("ctable-release-slots", ctable.Config{Dim: 1, Init: ctable.InitZeros, Optimizer: ctable.OptSGD,
		OptParams: [8]float64{0.1}, Device: cgotorch.CPU})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	keys, grads := cgotorch.MustFromSlice(idRange(n)), cgotorch.Ones([]int64{n, 1})
	defer keys.Close()
	defer grads.Close()
	if err := tbl.Update(keys, grads); err != nil {
		t.Fatal(err)
	}
	grew := residentGrowth(t, threads, func() error { return tbl.Update(keys, grads) })
	const tables = threads << 10 // KiB
	if grew > tables/2 {
		t.Errorf("resident memory grew by %d KiB, want under %d KiB (half the threads' tables)", grew, tables/2)
	}
}

// idRange is the ids [0, n).
func idRange(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
}
