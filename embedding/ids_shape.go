package embedding

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
)

// ids_shape.go: ids of any shape. The C layer takes ids [N]; the table operations view ids of
// another shape as [N] and give their results the ids' shape (+ [Dim] for rows), as
// torch.nn.Embedding and Table.Forward do.

// shaped is ids viewed as [N] for the C layer, with the shape to give the results back.
type shaped struct {
	flat  *cgotorch.Tensor // ids itself when it is [N] (or nil, or closed: the C layer says so)
	shape []int64          // nil when ids is [N]
}

// flatIDs views ids as [N] (ErrBadInput for ids that cannot be viewed: not contiguous).
func (t *Table) flatIDs(op string, ids *cgotorch.Tensor) (shaped, error) {
	if ids == nil || ids.Closed() || ids.Dim() == 1 {
		return shaped{flat: ids}, nil
	}
	s := shaped{shape: append([]int64{}, ids.Shape()...)} // (not nil for 0-dimensional ids)
	if err := cgotorch.Try(func() { s.flat = ids.View(-1) }); err != nil {
		return shaped{}, &Error{Op: op, Table: t.name, Kind: ErrBadInput, Err: errors.Join(errors.New("ids must be contiguous"), err)}
	}
	return s, nil
}

// close releases the [N] view (not the caller's ids).
func (s shaped) close() {
	if s.shape != nil {
		s.flat.Close()
	}
}

// rows views values or gradients of the ids' shape + [Dim] as [N, Dim] (ErrBadInput for
// another shape); for ids [N] they are passed on as they are, for the C layer to check. release
// closes what rows made.
func (s shaped) rows(op, table, what string, v *cgotorch.Tensor) (out *cgotorch.Tensor, release func(), err error) {
	if s.shape == nil || v == nil || v.Closed() {
		return v, func() {}, nil
	}
	if sh := v.Shape(); len(sh) != len(s.shape)+1 || !slices.Equal(sh[:len(s.shape)], s.shape) {
		return nil, nil, badInput(op, table, "%s of shape %v for ids of shape %v (want the ids' shape + [Dim])", what, sh, s.shape)
	}
	if err := cgotorch.Try(func() { out = v.View(-1, v.Size(-1)) }); err != nil {
		return nil, nil, &Error{Op: op, Table: table, Kind: ErrBadInput, Err: errors.Join(fmt.Errorf("%s must be contiguous", what), err)}
	}
	return out, out.Close, nil
}

// withRows calls f with ids viewed as [N] and rows (values or gradients, what) as [N, Dim].
func (t *Table) withRows(op string, ids *cgotorch.Tensor, what string, rows *cgotorch.Tensor, f func(ids, rows *cgotorch.Tensor) error) error {
	s, err := t.flatIDs(op, ids)
	if err != nil {
		return err
	}
	defer s.close()
	r, release, err := s.rows(op, t.name, what, rows)
	if err != nil {
		return err
	}
	defer release()
	return wrap(op, t.name, f(s.flat, r))
}

// back gives a result x ([N] + tail) the ids' shape + tail, closing x.
func (s shaped) back(x *cgotorch.Tensor, err error) (*cgotorch.Tensor, error) {
	if s.shape == nil || x == nil || err != nil {
		return x, err
	}
	tail := x.Shape()[1:]
	y := x.View(append(slices.Clone(s.shape), tail...)...)
	x.Close()
	return y, nil
}
