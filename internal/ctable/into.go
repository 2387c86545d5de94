package ctable

// #include "../../cgotorch/cgotorch.h"
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/gorec/gorec/cgotorch"
)

// LookupInto is Lookup of ids written into rows (len(ids)*dim floats, row after row) with no
// tensor on either side: the C side copies each row straight into the slice. A rows of
// another length is ErrInvalidArgument. On error the table is as Lookup leaves it and what
// rows holds is unspecified.
func (t *Table) LookupInto(rows []float32, ids []int64) error {
	return t.call("table lookup into", func(p C.ct_table) C.ct_error {
		e := C.ct_table_lookup_into(cFloats(rows), C.int64_t(len(rows)), p, cInt64s(ids), C.int64_t(len(ids)))
		runtime.KeepAlive(rows)
		runtime.KeepAlive(ids)
		return e
	})
}

// ReadInto is Read of ids written into rows (len(ids)*dim floats) and found (nil, or
// len(ids): whether each id was present), with no tensor on either side.
func (t *Table) ReadInto(rows []float32, found []bool, ids []int64, def ReadDefault) error {
	const op = "table read into"
	if found != nil && len(found) != len(ids) {
		return &cgotorch.Error{Op: op, Msg: "found must be nil or hold one bool per id", Kind: cgotorch.ErrInvalidArgument}
	}
	var f *C.uint8_t
	if len(found) > 0 {
		f = (*C.uint8_t)(unsafe.Pointer(&found[0])) // a Go bool is one byte, 0 or 1
	}
	return t.call(op, func(p C.ct_table) C.ct_error {
		e := C.ct_table_read_into(cFloats(rows), C.int64_t(len(rows)), f, p, cInt64s(ids), C.int64_t(len(ids)),
			C.int32_t(def))
		runtime.KeepAlive(rows)
		runtime.KeepAlive(found)
		runtime.KeepAlive(ids)
		return e
	})
}
