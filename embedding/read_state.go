package embedding

import (
	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// RowStates are the rows of a few ids with their optimizer states (ReadState).
type RowStates struct {
	Rows   *cgotorch.Tensor // float32, the ids' shape + [Dim]
	States []State          // as Export's: the ids' shape + [Dim] (+ [1] for RowWiseAdagrad's "sum")
	Found  *cgotorch.Tensor // bool, the ids' shape: which ids are in the table
}

// Close releases the tensors.
func (r *RowStates) Close() {
	if r == nil {
		return
	}
	r.Rows.Close()
	r.Found.Close()
	for _, s := range r.States {
		s.Values.Close()
	}
}

// ReadState returns the rows of ids and their optimizer states as Export gives them (SGD
// momentum caught up), without exporting the table or inserting anything: one batched call,
// under the table's shared lock, so rows and states are of one moment. Ids not in the table
// give zeros and false in Found. Results are on the ids' device.
func (t *Table) ReadState(ids *cgotorch.Tensor) (*RowStates, error) {
	if t == nil {
		return nil, errNilTable
	}
	const op = "read state"
	s, err := t.flatIDs(op, ids)
	if err != nil {
		return nil, err
	}
	defer s.close()
	rows, states, found, err := t.t.ReadState(s.flat)
	if err != nil {
		return nil, wrap(op, t.name, err)
	}
	st, err := t.t.Stats() // (a table's optimizer never changes: its states' names neither)
	if err != nil {
		rows.Close()
		found.Close()
		for _, v := range states {
			v.Close()
		}
		return nil, wrap(op, t.name, err)
	}
	out := &RowStates{}
	out.Rows, _ = s.back(rows, nil)
	out.Found, _ = s.back(found, nil)
	for i, v := range states {
		v, _ = s.back(v, nil)
		out.States = append(out.States, State{Name: ctable.StateName(st.Optimizer, i), Values: v})
	}
	return out, nil
}

// ReadStateIDs is ReadState for ids given as a slice.
func (t *Table) ReadStateIDs(ids []int64) (*RowStates, error) {
	if t == nil {
		return nil, errNilTable
	}
	k, err := t.idsTensor("read state", ids)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	return t.ReadState(k)
}
