package dist

import "github.com/gorec/gorec/cgotorch"

// Rows travel with their ids in one float32 all-to-all: each row of the packed tensor holds
// the id in its first idColumns columns, as three integers of at most 22 bits (exact in
// float32, so no bit of the id depends on how a copy treats a float), then the row's values.
const idColumns = 3

// packRows returns the float32 tensor [len(sent), idColumns+width] whose row k holds sent[k]
// (an id or a header) and, for an id, its row of rows (rows[slot[k]]; a header's values are
// not read). rows is nil, or [n, width] with n > 0 when any id is sent.
func packRows(sent, slot []int64, rows *cgotorch.Tensor, width int64) (out *cgotorch.Tensor, err error) {
	n := int64(len(sent))
	cols := make([]float32, 0, idColumns*len(sent))
	for _, v := range sent {
		u := uint64(v)
		cols = append(cols, float32(u&(1<<22-1)), float32(u>>22&(1<<21-1)), float32(u>>43))
	}
	err = cgotorch.Try(func() {
		ids := cgotorch.MustFromSlice(cols, n, idColumns)
		defer ids.Close()
		var vals *cgotorch.Tensor
		if rows == nil || rows.Shape()[0] == 0 {
			vals = cgotorch.Zeros([]int64{n, width})
		} else {
			idx := cgotorch.MustFromSlice(slot)
			defer idx.Close()
			vals = rows.IndexSelect(0, idx)
		}
		defer vals.Close()
		out = cgotorch.Cat([]*cgotorch.Tensor{ids, vals}, 1)
	})
	return out, err
}

// unpackIDs returns the ids (and headers) of a packed tensor.
func unpackIDs(t *cgotorch.Tensor) ([]int64, error) {
	var cols []float32
	err := cgotorch.TryWithScope(func() (err error) {
		cols, err = cgotorch.ToSlice[float32](t.Narrow(1, 0, idColumns).Contiguous())
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(cols)/idColumns)
	for k := range out {
		c := cols[idColumns*k:]
		out[k] = int64(uint64(c[0]) | uint64(c[1])<<22 | uint64(c[2])<<43)
	}
	return out, nil
}

// unpackRows returns the values of the packed tensor's rows at data: [len(data), width].
func unpackRows(t *cgotorch.Tensor, data []int64, width int64) (out *cgotorch.Tensor, err error) {
	err = cgotorch.Try(func() {
		idx := cgotorch.MustFromSlice(data)
		defer idx.Close()
		vals := t.Narrow(1, idColumns, width)
		defer vals.Close()
		out = vals.IndexSelect(0, idx)
	})
	return out, err
}
