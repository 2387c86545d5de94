package cgotorch

// #include "cgotorch.h"
import "C"

// The C allocator keeps freed tensor buffers of 64 B to 4 MiB for reuse, in a cache per OS
// thread (up to 8 MiB each, 64 MiB all together) and a central pool (up to 32 MiB) through which buffers freed on
// other threads come back, so that threads training side by side do not serialize on the C
// library's allocator lock (docs/design.md, "Ownership and memory"). GOREC_TENSOR_CACHE=0 in
// the environment when the process starts turns the cache off.

// CachedBytes is the number of bytes of freed tensor buffers the allocator keeps for reuse (its
// per-thread caches and central pool). They are not counted in LiveBytes.
func CachedBytes() int64 { return int64(C.ct_tensor_cache_bytes()) }

// ReleaseCachedMemory frees the allocator's central pool and the calling thread's cache now,
// has every other thread free its cache at its next tensor allocation or free, frees the
// scratch vectors that the embedding tables' calls keep on every thread (up to 8 MiB a thread),
// and returns the heap's free memory to the system. Compacting an embedding table does it too.
func ReleaseCachedMemory() { must("release cached memory", C.ct_tensor_cache_release()) }
