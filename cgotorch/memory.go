package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The Go garbage collector sees a few dozen bytes per Tensor, not the tensor memory behind it.
// The C layer counts the bytes its CPU allocator holds (every tensor, temporaries included);
// each tensor creation compares that figure with the lowest one seen since the last collection
// this package forced, and forces a collection (runtime.GC) when the growth passes the
// threshold, so that the cleanups of unreachable Tensors run and free their memory.

// DefaultGCThreshold is the initial growth of live C bytes that forces a collection.
const DefaultGCThreshold = 256 << 20

var (
	liveBytesCounter = (*int64)(unsafe.Pointer(C.ct_live_bytes_counter()))
	gcThreshold      atomic.Int64
	gcFloor          atomic.Int64 // lowest live byte count seen since the last forced collection
	gcMu             sync.Mutex   // one forced collection at a time
	forcedGCs        atomic.Int64
)

func init() {
	gcThreshold.Store(DefaultGCThreshold)
	gcFloor.Store(LiveBytes())
}

// SetGCThreshold sets how many bytes of C tensor memory may be added since the last forced
// collection before the next one; 0 or less turns forced collections off. It returns the
// previous value.
func SetGCThreshold(bytes int64) int64 { return gcThreshold.Swap(bytes) }

// LiveBytes is the number of bytes of CPU tensor memory libtorch holds now.
func LiveBytes() int64 { return atomic.LoadInt64(liveBytesCounter) }

// LiveTensors is the number of tensor handles not yet freed (by Close or a cleanup).
func LiveTensors() int64 { return int64(C.ct_live_handles()) }

// ForcedGCs is the number of collections this package has forced.
func ForcedGCs() int64 { return forcedGCs.Load() }

// noteAllocation runs after every tensor creation.
func noteAllocation() {
	threshold := gcThreshold.Load()
	if threshold <= 0 {
		return
	}
	live := LiveBytes()
	floor := gcFloor.Load()
	for live < floor {
		if gcFloor.CompareAndSwap(floor, live) {
			return
		}
		floor = gcFloor.Load()
	}
	if live-floor < threshold || !gcMu.TryLock() {
		return
	}
	defer gcMu.Unlock()
	runtime.GC()
	forcedGCs.Add(1)
	// Cleanups run on their own goroutine after the collection; the floor starts from the
	// current figure and follows it down as they free memory.
	gcFloor.Store(LiveBytes())
}
