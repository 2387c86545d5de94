package ctable

// #include "../../cgotorch/cgotorch.h"
import "C"

// ScratchStats reports the calling OS thread's scratch vectors of the table calls
// (ct_table_scratch_stats): the bytes it keeps for reuse (its pools' vectors and its distinct-id
// table, which cgotorch.ReleaseCachedMemory frees), and how many vectors its table calls
// have had to allocate since the thread began. The caller locks its goroutine to its thread
// (runtime.LockOSThread) for the figures to be one thread's. For tests.
func ScratchStats() (keptBytes, allocated int64, err error) {
	var k, a C.int64_t
	err = toError("table scratch stats", C.ct_table_scratch_stats(&k, &a))
	return int64(k), int64(a), err
}
