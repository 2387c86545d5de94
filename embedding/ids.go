package embedding

import (
	"fmt"

	"github.com/gorec/gorec/cgotorch"
)

// The forms of the table operations that take ids as a Go slice. They copy the ids into a
// tensor, call the tensor form and free that tensor.

func (t *Table) idsTensor(op string, ids []int64) (*cgotorch.Tensor, error) {
	k, err := cgotorch.FromSlice(ids)
	if err != nil {
		return nil, wrap(op, t.name, err)
	}
	return k, nil
}

func (t *Table) rowsTensor(op string, n int, v []float32) (*cgotorch.Tensor, error) {
	if len(v) != n*t.conf().Dim {
		return nil, badInput(op, t.name, "%d values for %d ids of dim %d (want %d)", len(v), n, t.conf().Dim, n*t.conf().Dim)
	}
	r, err := cgotorch.FromSlice(v, int64(n), int64(t.conf().Dim))
	if err != nil {
		return nil, wrap(op, t.name, err)
	}
	return r, nil
}

// LookupIDs is Lookup for ids given as a slice.
func (t *Table) LookupIDs(ids []int64) (*cgotorch.Tensor, error) {
	if t == nil {
		return nil, errNilTable
	}
	k, err := t.idsTensor("lookup", ids)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	return t.Lookup(k)
}

// IndicesIDs is Indices for ids given as a slice.
func (t *Table) IndicesIDs(ids []int64, insert bool) ([]int64, error) {
	if t == nil {
		return nil, errNilTable
	}
	k, err := t.idsTensor("indices", ids)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	r, err := t.Indices(k, insert)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out, err := cgotorch.ToSlice[int64](r)
	return out, wrap("indices", t.name, err)
}

// ReadIDs is Read for ids given as a slice; found comes back as a slice.
func (t *Table) ReadIDs(ids []int64) (rows *cgotorch.Tensor, found []bool, err error) {
	if t == nil {
		return nil, nil, errNilTable
	}
	k, err := t.idsTensor("read", ids)
	if err != nil {
		return nil, nil, err
	}
	defer k.Close()
	rows, f, err := t.Read(k)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	found, err = cgotorch.ToSlice[bool](f)
	if err != nil {
		rows.Close()
		return nil, nil, wrap("read", t.name, err)
	}
	return rows, found, nil
}

// WriteIDs is Write for ids and row-major values (len(ids) * Dim) given as slices.
func (t *Table) WriteIDs(ids []int64, values []float32) error {
	if t == nil {
		return errNilTable
	}
	k, err := t.idsTensor("write", ids)
	if err != nil {
		return err
	}
	defer k.Close()
	v, err := t.rowsTensor("write", len(ids), values)
	if err != nil {
		return err
	}
	defer v.Close()
	return t.Write(k, v)
}

// UpdateIDs is Update for ids and row-major gradients (len(ids) * Dim) given as slices.
func (t *Table) UpdateIDs(ids []int64, grads []float32) error {
	if t == nil {
		return errNilTable
	}
	k, err := t.idsTensor("update", ids)
	if err != nil {
		return err
	}
	defer k.Close()
	g, err := t.rowsTensor("update", len(ids), grads)
	if err != nil {
		return err
	}
	defer g.Close()
	return t.Update(k, g)
}

// DeleteIDs is Delete for ids given as a slice.
func (t *Table) DeleteIDs(ids []int64) (int, error) {
	if t == nil {
		return 0, errNilTable
	}
	k, err := t.idsTensor("delete", ids)
	if err != nil {
		return 0, err
	}
	defer k.Close()
	return t.Delete(k)
}

// PrefetchIDs is Prefetch for ids given as a slice.
func (t *Table) PrefetchIDs(ids []int64) (*Prefetch, error) {
	if t == nil {
		return nil, errNilTable
	}
	k, err := t.idsTensor("prefetch", ids)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	return t.Prefetch(k)
}

// Rows copies a float32 [N, Dim] tensor into a slice of N rows (a helper for small results).
func Rows(t *cgotorch.Tensor) ([][]float32, error) {
	if t.Closed() {
		return nil, fmt.Errorf("%w: nil or closed tensor", ErrBadInput)
	}
	shape := t.Shape()
	if len(shape) != 2 {
		return nil, fmt.Errorf("%w: rows tensor has shape %v", ErrBadInput, shape)
	}
	flat, err := cgotorch.ToSlice[float32](t)
	if err != nil {
		return nil, fmt.Errorf("%w: rows: %w", ErrBadInput, err)
	}
	n, d := int(shape[0]), int(shape[1])
	out := make([][]float32, n)
	for i := range out {
		out[i] = flat[i*d : (i+1)*d : (i+1)*d]
	}
	return out, nil
}
