package dist

import (
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
)

// back returns the owners' answers to the ranks that sent the ids of parts, in one all-to-all
// for every part (collective). rows[k] holds this rank's answers, as an owner, for part k
// ([len(rs[k].ids), widths[k]] in the order received, one dtype for every part); a nil one
// means this owner failed: it then sends nothing at all, and the peers see it. Part k's answers
// come back in the order of the caller's ids, or, when pos[k] is not nil, in the order it
// gives them (row i: the answer for the caller's pos[k][i]-th id; pos[k] is overwritten).
func back(tables []*ShardedTable, rs []*routed, rows []*cgotorch.Tensor, widths []int64, pos [][]int64) (out []*cgotorch.Tensor, err error) {
	g := tables[0].g
	w := g.WorldSize()
	send, want := make([]int64, w), make([]int64, w) // values to each rank, and from each
	for k, r := range rs {
		for j := 0; j < w; j++ {
			send[j] += r.recv[j] * widths[k]
			want[j] += r.send[j] * widths[k]
		}
	}
	t, err := answers(rs, rows, send)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	got, recv, err := g.AllToAll(t, send)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tablesOf(partsOf(tables)), err)
	}
	defer got.Close()
	for j := range recv {
		if recv[j] != want[j] {
			return nil, &Error{Op: "sharded rows", Kind: ErrMismatch, Err: fmt.Errorf("%s: rank %d sent %d values, want %d (an owner failed)", tablesOf(partsOf(tables)), j, recv[j], want[j])}
		}
	}
	err = cgotorch.Try(func() {
		for k := range rs {
			out = append(out, answerOf(got, rs, k, widths, pos[k]))
		}
	})
	if err != nil {
		closeAll(out)
		return nil, err
	}
	return out, nil
}

// answers lays this owner's answers out for back's all-to-all: to each rank in turn, each
// part's rows for the ids that rank sent, flattened. When an answer is nil (this owner
// failed) it is empty and every count of send is set to 0.
func answers(rs []*routed, rows []*cgotorch.Tensor, send []int64) (t *cgotorch.Tensor, err error) {
	err = cgotorch.Try(func() {
		if slices.Contains(rows, nil) {
			dtype := cgotorch.Float32
			for _, r := range rows {
				if r != nil {
					dtype = r.DType()
				}
			}
			clear(send)
			t = cgotorch.Zeros([]int64{0}, cgotorch.WithDType(dtype))
			return
		}
		if len(rows) == 1 { // in rank order already
			t = rows[0].Reshape(-1)
			return
		}
		var pieces []*cgotorch.Tensor
		defer func() { closeAll(pieces) }()
		start := make([]int64, len(rows))
		for j := range send {
			for k, r := range rs {
				pieces = append(pieces, rows[k].Narrow(0, start[k], r.recv[j]).Reshape(-1))
				start[k] += r.recv[j]
			}
		}
		t = cgotorch.Cat(pieces, 0)
	})
	return t, err
}

// answerOf cuts part k's answers out of what back received (got: from each rank in turn, each
// part's answers) and puts them in the caller's order (pos, as back's). It panics as tensor
// operations do.
func answerOf(got *cgotorch.Tensor, rs []*routed, k int, widths, pos []int64) *cgotorch.Tensor {
	flat := got // one part: its answers only, in rank order
	if len(rs) > 1 {
		var pieces []*cgotorch.Tensor
		defer func() { closeAll(pieces) }()
		at := int64(0)
		for j := range rs[k].send {
			for q, r := range rs {
				if q == k {
					pieces = append(pieces, got.Narrow(0, at, r.send[j]*widths[q]))
				}
				at += r.send[j] * widths[q]
			}
		}
		flat = cgotorch.Cat(pieces, 0)
		defer flat.Close()
	}
	rows := flat.View(int64(len(rs[k].perm)), widths[k])
	defer rows.Close()
	inv := make([]int64, len(rs[k].perm))
	for i, p := range rs[k].perm {
		inv[p] = int64(i)
	}
	if pos != nil {
		for i, p := range pos {
			pos[i] = inv[p]
		}
		inv = pos
	}
	idx := cgotorch.MustFromSlice(inv)
	defer idx.Close()
	return rows.IndexSelect(0, idx)
}

// closeAll closes every tensor of ts (nil ones included).
func closeAll(ts []*cgotorch.Tensor) {
	for _, t := range ts {
		t.Close()
	}
}

// back1 is back of one table's answers.
func (s *ShardedTable) back1(r *routed, rows *cgotorch.Tensor, width int64, pos []int64) (*cgotorch.Tensor, error) {
	out, err := back([]*ShardedTable{s}, []*routed{r}, []*cgotorch.Tensor{rows}, []int64{width}, [][]int64{pos})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// selectRows returns rows[idx] (along the first dimension), a new tensor.
func selectRows(rows *cgotorch.Tensor, idx []int64) (out *cgotorch.Tensor, err error) {
	it, err := cgotorch.FromSlice(idx)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	err = cgotorch.Try(func() { out = rows.IndexSelect(0, it) })
	return out, err
}
