// Package clookup times table lookups made from C, through the C ABI, as a C program would
// make them: the baseline against which ctable's BenchmarkTableLookupGo measures the cost of the
// Go layers. Only that benchmark imports it; it is no part of the production binding.
package clookup

/*
#include <stdlib.h>
#include <time.h>
#include "../../../cgotorch/cgotorch.h"

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
	"unsafe"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctensor"
)

// Loop times n lookups of keys (cycled) in the open table of that name, made from C. The
// benchmark runs it in the same process as the Go calls it compares, alternating with them.
func Loop(table string, keys []*cgotorch.Tensor, n int) (time.Duration, error) {
	const op = "table lookup"
	if len(keys) == 0 || n <= 0 {
		return 0, &cgotorch.Error{Op: op, Msg: "no keys or no lookups", Kind: cgotorch.ErrInvalidArgument}
	}
	ks := make([]C.ct_tensor, len(keys)) // C pointers only: cgo lets C read this Go memory
	for i, k := range keys {
		p, err := ctensor.Handle(op, "keys", k)
		if err != nil {
			return 0, err
		}
		ks[i] = C.ct_tensor(p)
	}
	name := C.CString(table)
	defer C.free(unsafe.Pointer(name))
	var t C.ct_table
	if err := ctensor.Error(op, unsafe.Pointer(C.ct_table_open(&t, name))); err != nil {
		return 0, err
	}
	defer C.ct_table_free(t)
	var e C.ct_error
	ns := C.ct_lookup_loop_ns(t, &ks[0], C.int(len(ks)), C.int(n), &e)
	runtime.KeepAlive(keys)
	if err := ctensor.Error(op, unsafe.Pointer(e)); err != nil {
		return 0, err
	}
	return time.Duration(ns), nil
}
