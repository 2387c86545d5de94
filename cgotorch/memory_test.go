package cgotorch

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorec/gorec/internal/procstat"
)

// waitForCounters collects until the live counters are back at (or below) the given values.
func waitForCounters(t *testing.T, handles, bytes int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for LiveTensors() > handles || LiveBytes() > bytes {
		if time.Now().After(deadline) {
			t.Fatalf("live tensors %d (want %d), live bytes %d (want %d)", LiveTensors(), handles, LiveBytes(), bytes)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// A loop that creates 100,000 tensors of 1 MiB and never frees one keeps its peak RSS under
// 1 GiB, because the live-bytes counter forces collections. Not timed: it asserts memory only.
func TestUnclosedLoopKeepsMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("100 GiB of allocations")
	}
	runtime.GC()
	handles, bytes := LiveTensors(), LiveBytes()
	gcs := ForcedGCs()
	// Reset the peak RSS (VmHWM) of this process; fall back to sampling if not allowed.
	resetOK := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	var peak, maxLive int64
	const n, elems = 100_000, (1 << 20) / 4
	for i := 0; i < n; i++ {
		x := Full([]int64{elems}, 1)
		_ = x
		if i%500 == 0 {
			peak = max(peak, procstat.KB("VmRSS"))
			maxLive = max(maxLive, LiveBytes())
		}
	}
	if resetOK {
		peak = max(peak, procstat.KB("VmHWM"))
	}
	t.Logf("peak RSS %d MiB, peak live C bytes sampled %d MiB, %d forced collections, peak measured by VmHWM: %v",
		peak>>10, maxLive>>20, ForcedGCs()-gcs, resetOK)
	if peak == 0 {
		t.Skip("no /proc/self/status")
	}
	if peak >= 1<<20 {
		t.Fatalf("peak RSS %d MiB, want under 1024 MiB", peak>>10)
	}
	if ForcedGCs() == gcs {
		t.Fatal("no collection was forced")
	}
	waitForCounters(t, handles, bytes)
}

// Closing everything brings the counters back to exactly where they started.
func TestCountersReturnAfterClose(t *testing.T) {
	handles, bytes := LiveTensors(), LiveBytes()
	var ts []*Tensor
	for i := 0; i < 100; i++ {
		ts = append(ts, Ones([]int64{int64(i + 1), 3}))
		ts = append(ts, ts[len(ts)-1].Share())
	}
	if LiveTensors() != handles+200 || LiveBytes() <= bytes {
		t.Fatalf("live tensors %d bytes %d", LiveTensors(), LiveBytes())
	}
	for _, x := range ts {
		x.Close()
	}
	if LiveTensors() != handles || LiveBytes() != bytes {
		t.Fatalf("after close: tensors %d (want %d) bytes %d (want %d)", LiveTensors(), handles, LiveBytes(), bytes)
	}
}

func TestGCThreshold(t *testing.T) {
	old := SetGCThreshold(1 << 20)
	defer SetGCThreshold(old)
	gcs := ForcedGCs()
	for i := 0; i < 64; i++ {
		_ = Zeros([]int64{64 << 10}) // 256 KiB each, never closed
	}
	if ForcedGCs() == gcs {
		t.Fatal("a 1 MiB threshold forced no collection over 16 MiB of garbage")
	}
	SetGCThreshold(0)
	gcs = ForcedGCs()
	for i := 0; i < 64; i++ {
		Zeros([]int64{64 << 10}).Close()
	}
	if ForcedGCs() != gcs {
		t.Fatal("collections forced with the threshold off")
	}
}

// Tensors made, shared, used and dropped by many goroutines at once; finalizers run meanwhile.
func TestManyGoroutines(t *testing.T) {
	runtime.GC()
	handles := LiveTensors()
	shared := Ones([]int64{32})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				x := MustFromSlice([]float32{float32(g), float32(i)})
				y := shared.Share()
				if i%2 == 0 {
					x.Close()
					y.Close()
				}
				if i%50 == 0 {
					runtime.GC()
				}
				v, err := ToSlice[float32](shared)
				if err != nil || v[0] != 1 {
					t.Errorf("shared tensor changed: %v %v", v, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	shared.Close()
	waitForCounters(t, handles, 1<<62)
}

// Close racing the collector: Close must cancel the cleanup before the Tensor can become
// unreachable, or the handle is freed twice (a heap corruption, or a live count below the
// baseline). Found by TestManyGoroutines under -race; this test fails more often without the fix.
func TestCloseWhileCollecting(t *testing.T) {
	runtime.GC()
	waitForCounters(t, LiveTensors(), 1<<62)
	handles := LiveTensors()
	shared := Ones([]int64{4})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				shared.Share().Close()
				if i%25 == 0 {
					runtime.GC()
				}
			}
		}()
	}
	wg.Wait()
	shared.Close()
	waitForCounters(t, handles, 1<<62)
	if got := LiveTensors(); got != handles {
		t.Fatalf("live tensors %d after the loop, want exactly %d (a handle freed twice?)", got, handles)
	}
}

// A freed tensor's buffer stays cached for reuse (CachedBytes, not LiveBytes), and
// ReleaseCachedMemory frees the calling thread's cache and the central pool at once.
func TestReleaseCachedMemory(t *testing.T) {
	if os.Getenv("GOREC_TENSOR_CACHE") == "0" {
		t.Skip("GOREC_TENSOR_CACHE=0: no cache")
	}
	runtime.GC()
	waitForCounters(t, LiveTensors(), LiveBytes())
	runtime.LockOSThread() // Close frees on this thread, into its cache
	defer runtime.UnlockOSThread()
	ReleaseCachedMemory()
	const size = 256 << 10
	live := LiveBytes()
	for i := 0; i < 4; i++ {
		Full([]int64{size / 4}, 1).Close()
	}
	if got := LiveBytes(); got != live {
		t.Errorf("live bytes %d after closing, want %d", got, live)
	}
	cached := CachedBytes()
	ReleaseCachedMemory()
	after := CachedBytes()
	t.Logf("cached bytes %d before the release, %d after", cached, after)
	if cached-after < size {
		t.Errorf("the release freed %d cached bytes, want at least %d", cached-after, size)
	}
}
