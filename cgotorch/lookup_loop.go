package cgotorch

/*
#include <time.h>
#include "cgotorch.h"

// Wall-clock nanoseconds of n lookups of keys[i % nk] made from C through the C ABI, each
// result freed, exactly as a C program would make them; -1 with *err set on a failure.
static double ct_lookup_loop_ns(ct_table t, ct_tensor *keys, int nk, int n, ct_error *err) {
	struct timespec a, z;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++) {
		ct_tensor r = NULL;
		*err = ct_table_lookup(&r, t, keys[i % nk]);
		if (*err) return -1;
		ct_tensor_free(r);
	}
	clock_gettime(CLOCK_MONOTONIC, &z);
	return (double)(z.tv_sec - a.tv_sec) * 1e9 + (double)(z.tv_nsec - a.tv_nsec);
}
*/
import "C"

import (
	"runtime"
	"time"
)

// lookupLoopC times n lookups of keys (cycled) made from C: the baseline that the benchmark of
// Table.Lookup from Go runs in the same process, alternating with the Go calls (tests reach it
// through export_test.go).
func lookupLoopC(t *Table, keys []*Tensor, n int) (time.Duration, error) {
	const op = "table lookup"
	if len(keys) == 0 || n <= 0 {
		return 0, &Error{Op: op, Msg: "no keys or no lookups", Kind: ErrInvalidArgument}
	}
	ks := make([]C.ct_tensor, len(keys)) // C pointers only: cgo lets C read this Go memory
	for i, k := range keys {
		p, err := tensorArg(op, "keys", k)
		if err != nil {
			return 0, err
		}
		ks[i] = p
	}
	p, err := t.acquire(op)
	if err != nil {
		return 0, err
	}
	defer t.mu.RUnlock()
	var e C.ct_error
	ns := C.ct_lookup_loop_ns(p, &ks[0], C.int(len(ks)), C.int(n), &e)
	runtime.KeepAlive(keys)
	runtime.KeepAlive(t)
	if err := toError(op, e); err != nil {
		return 0, err
	}
	return time.Duration(ns), nil
}
