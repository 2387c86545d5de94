package ctable

// #include "../../cgotorch/cgotorch.h"
import "C"

import "github.com/gorec/gorec/cgotorch"

// LookupCounted is Lookup counting keys[i] counts[i] times (int64 [N], each >= 1) in the rows'
// access frequency and the admission counts, as a lookup of a batch holding keys[i] counts[i]
// times would. Counts of another length or below 1 are ErrInvalidArgument, and nothing changes.
func (t *Table) LookupCounted(keys, counts *cgotorch.Tensor) (*cgotorch.Tensor, error) {
	var out C.ct_tensor
	if err := t.keysRows("table lookup counted", keys, counts, "counts", func(p C.ct_table, k, c C.ct_tensor) C.ct_error {
		return C.ct_table_lookup_counted(&out, p, k, c)
	}); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}
