package ctable_test

import (
	"math/rand"
	"runtime"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// A thread's table calls reuse their per-call vectors (the distinct ids, rows, counts and
// gradient pointers of a lookup and an update): once a few training steps have run, further
// steps of the same batch size allocate none, and what the thread keeps stays within the pool's
// bound. Before, every call allocated them (each through glibc's one arena, see scratch.h).
func TestTableCallsReuseScratch(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tbl, err := ctable.New("ctable-scratch", ctable.Config{Dim: 16, Init: ctable.InitNormal,
		InitParams: [4]float64{0, 0.01}, Optimizer: ctable.OptSparseAdam, OptParams: [8]float64{0.01, 0.9, 0.999, 1e-8}})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	rng := rand.New(rand.NewSource(1))
	const batch, ids = 1024, 5000
	step := func() {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			v := make([]int64, batch)
			for i := range v {
				v[i] = rng.Int63n(ids)
			}
			keys := cgotorch.MustFromSlice(v)
			// A fused training lookup and its backward pass (the table's update), then an
			// update through Update (its ids repeat: the sums path).
			out, err := tbl.Forward(keys, ctable.ForwardOptions{Train: true, Fused: true}, ctable.ReadZeros)
			if err != nil {
				t.Fatal(err)
			}
			out.Square().Sum().Backward()
			if err := tbl.Update(keys, cgotorch.Ones([]int64{batch, 16})); err != nil {
				t.Fatal(err)
			}
		})
	}
	for i := 0; i < 5; i++ {
		step()
	}
	_, before, err := ctable.ScratchStats()
	if err != nil {
		t.Fatal(err)
	}
	const steps = 20
	for i := 0; i < steps; i++ {
		step()
	}
	kept, after, err := ctable.ScratchStats()
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("%d scratch vectors allocated in %d warm steps, want 0", after-before, steps)
	}
	if kept <= 0 || kept > scratchThreadBytes {
		t.Errorf("the thread keeps %d bytes of scratch vectors, want some and at most 9 MiB", kept)
	}
}

// scratchThreadBytes is the most a thread keeps: its pools' vectors (scratch.h,
// kScratchThreadBytes: 8 MiB) and its distinct-id table (up to 1 MiB), which ScratchStats
// counts too.
const scratchThreadBytes = 8<<20 + 1<<20

// bagCall runs a training call over large bags (200k ids of 7.5k distinct: 1.6 MB of row
// pointers alone) and its backward pass, on the calling thread.
func bagCall(tbl *ctable.Table, rng *rand.Rand) (err error) {
	const bags, per = 1000, 200
	ids, offsets, weights := make([]int64, 0, bags*per), make([]int64, 0, bags), make([]float32, 0, bags*per)
	for b := 0; b < bags; b++ {
		offsets = append(offsets, int64(len(ids)))
		for range per {
			ids, weights = append(ids, rng.Int63n(7500)), append(weights, 0.1)
		}
	}
	cgotorch.WithScope(func(*cgotorch.Scope) {
		var out *cgotorch.Tensor
		out, err = ctable.ForwardBags([]ctable.BagFeature{{Table: tbl, Mode: ctable.BagSum, Opts: ctable.ForwardOptions{Train: true}}},
			1, cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offsets), cgotorch.MustFromSlice(weights), ctable.BagOffsets)
		if err == nil {
			out.Sum().Backward()
		}
	})
	return err
}

func newScratchTable(t *testing.T, name string) *ctable.Table {
	t.Helper()
	tbl, err := ctable.New(name, ctable.Config{Dim: 16, Init: ctable.InitZeros, Optimizer: ctable.OptSGD, OptParams: [8]float64{0.1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	return tbl
}

// The bags' per-call buffers (row pointers, weights, ids) come from the thread's scratch pool:
// a thread that ran a call over large bags keeps them there (more than the 1 MiB the pool kept
// at most before its size-aware bound; the bags kept theirs apart), and further calls of the
// same size allocate none.
func TestBagCallsKeepBuffersInThePool(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tbl := newScratchTable(t, "ctable-scratch-bags")
	rng := rand.New(rand.NewSource(2))
	calls := func() {
		for range 3 {
			if err := bagCall(tbl, rng); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls()
	_, before, err := ctable.ScratchStats()
	if err != nil {
		t.Fatal(err)
	}
	calls()
	kept, after, err := ctable.ScratchStats()
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("%d scratch vectors allocated in 3 warm bag calls, want 0", after-before)
	}
	if kept <= 1<<20 || kept > scratchThreadBytes {
		t.Errorf("the thread keeps %d bytes of scratch after bag calls of 200k ids, want over 1 MiB and at most 9 MiB", kept)
	}
}

// Releasing the cached memory (cgotorch.ReleaseCachedMemory, and a table's Compact) frees the
// scratch every thread keeps, not only the caller's: here a thread that ran table calls and
// then waits, as Go's idle OS threads do. Before, neither release touched the scratch.
func TestReleaseFreesEveryThreadsScratch(t *testing.T) {
	tbl := newScratchTable(t, "ctable-scratch-release")
	for _, release := range []struct {
		name string
		run  func() error
	}{
		{"ReleaseCachedMemory", func() error { cgotorch.ReleaseCachedMemory(); return nil }},
		{"Compact", tbl.Compact},
	} {
		ran, released, done := make(chan int64), make(chan struct{}), make(chan int64)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := bagCall(tbl, rand.New(rand.NewSource(3))); err != nil {
				t.Error(err)
			}
			kept, _, _ := ctable.ScratchStats()
			ran <- kept
			<-released
			kept, _, _ = ctable.ScratchStats()
			done <- kept
		}()
		if kept := <-ran; kept <= 0 {
			t.Errorf("%s: the thread keeps %d bytes after a bag call, want some", release.name, kept)
		}
		if err := release.run(); err != nil { // (on this goroutine's thread, not the other's)
			t.Fatal(err)
		}
		close(released)
		if kept := <-done; kept != 0 {
			t.Errorf("after %s, the other thread keeps %d bytes of scratch, want 0", release.name, kept)
		}
	}
}

// A reused vector holds what its last call left in it: an update of a table with admission on
// (which sets no new-row flags: its ids have rows) must not take another call's flags for its
// own. Here table a's update inserts its ids (flags 1) just before b's update on the same
// thread; b's rows must be stepped from their values, not re-initialised first.
func TestAdmittingUpdateAfterAnInsertingOne(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cfg := ctable.Config{Dim: 2, Init: ctable.InitZeros, Optimizer: ctable.OptSGD, OptParams: [8]float64{1}}
	a, err := ctable.New("ctable-scratch-a", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ctable.New("ctable-scratch-b", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SetAdmission(2); err != nil {
		t.Fatal(err)
	}
	keys := cgotorch.MustFromSlice([]int64{1, 2})
	if err := b.Write(keys, cgotorch.MustFromSlice([]float32{5, 5, 5, 5}, 2, 2)); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(cgotorch.MustFromSlice([]int64{10, 11, 12, 13}), cgotorch.Ones([]int64{4, 2})); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(keys, cgotorch.Ones([]int64{2, 2})); err != nil {
		t.Fatal(err)
	}
	rows, _, err := b.Read(keys, ctable.ReadZeros)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := cgotorch.ToSlice[float32](rows); !slices.Equal(v, []float32{4, 4, 4, 4}) {
		t.Errorf("b's rows after a step of lr 1 and gradient 1 from 5: %v, want 4s", v)
	}
}
