package dist

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/cdist"
)

// routed is a batch of ids sent to their owners: what this rank sent, and what it received as
// an owner.
type routed struct {
	perm []int64 // perm[k]: the position in the caller's ids of the k-th id sent
	send []int64 // how many ids went to each rank
	ids  []int64 // the ids this rank received, in rank order
	recv []int64 // how many came from each rank
}

// settle tells every rank whether the owners applied a change the ranks had agreed on (an
// owner whose shard fails, a closed one say, is the only way they do not): it returns local
// itself, or an ErrMismatch naming the ranks that failed.
func (s *ShardedTable) settle(op string, local error) error {
	_, err := verdicts(s.g, fmt.Sprintf("table %q", s.name), op, local, false, "failed to apply it on their shard")
	return err
}

// verdicts exchanges every rank's verdict (local: nil or its error) and flag (has) on an
// operation of what (a table, a checkpoint), in one exchange (they ride in the ranks'
// agreement headers: gatherInt64s): it returns local itself, or an ErrMismatch naming
// the ranks that failed, and whether any rank had the flag set.
func verdicts(g *Group, what, op string, local error, has bool, failed string) (anyHas bool, err error) {
	all, err := gatherInt64s(g, what, op, []int64{boolInt(local != nil), boolInt(has)})
	if err != nil {
		return false, errors.Join(err, local)
	}
	if local != nil {
		return false, local
	}
	var refused []int
	for r := 0; r < g.WorldSize(); r++ {
		if all[2*r] != 0 {
			refused = append(refused, r)
		}
		anyHas = anyHas || all[2*r+1] != 0
	}
	if refused != nil {
		return false, &Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("%s: rank(s) %v %s", what, refused, failed)}
	}
	return anyHas, nil
}

// gatherInt64s returns every rank's v (the same length on every rank), in rank order: in the
// ranks' agreement headers (allGatherInts) when v is that short, else in an AllGather.
func (s *ShardedTable) gatherInt64s(op string, v []int64) ([]int64, error) {
	return gatherInt64s(s.g, fmt.Sprintf("table %q", s.name), op, v)
}

func gatherInt64s(g *Group, what, op string, v []int64) ([]int64, error) {
	if len(v) <= cdist.GatherIntsMax { // in the agreement headers: one exchange, not two
		all, err := g.allGatherInts(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", what, op, err)
		}
		return all, nil
	}
	t, err := cgotorch.FromSlice(v)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	all, err := g.AllGather(t)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", what, op, err)
	}
	defer all.Close()
	return cgotorch.ToSlice[int64](all)
}

// The header that leads each rank's block of ids to each peer in route.
const (
	headerRefused = 1 // the rank refused its input
	headerHas     = 2 // the rank has data (Step: pending gradients)
)

// route sends ids to their owners in one all-to-all, each rank's block to each peer led by a
// header: whether this rank refused its input (local: its error, or nil) and whether it has
// data (has). Every rank thus learns every verdict before anything changes, without a
// collective of their own: route returns local itself, or an ErrMismatch naming the ranks
// that refused theirs, before any shard changes; and whether any rank had data. With width >
// 0 (the same on every rank), rows (float32 [len(ids), width], in the order of ids; nil on a
// rank that refused its input) travel with their ids in the same all-to-all (packRows), and
// route returns those this rank received as an owner, in the order of r.ids. grads says the
// ids are gradients' (the defect faultWrongOwner moves those).
func (s *ShardedTable) route(op string, ids []int64, rows *cgotorch.Tensor, width int64, local error, has, grads bool) (*routed, *cgotorch.Tensor, bool, error) {
	w := s.g.WorldSize()
	if local != nil {
		ids, rows = nil, nil
	}
	owner := make([]int, len(ids))
	r := &routed{send: make([]int64, w), recv: make([]int64, w), perm: make([]int64, len(ids))}
	for i, id := range ids {
		owner[i] = Owner(id, w)
		if s.fault == faultWrongOwner && grads {
			owner[i] = (owner[i] + 1) % w
		}
		r.send[owner[i]]++
	}
	// sent: for each rank j, the header, then the ids j owns; start[j]: where they go next
	sent := make([]int64, len(ids)+w)
	start, blocks := make([]int64, w), make([]int64, w)
	header := boolInt(local != nil)*headerRefused | boolInt(has)*headerHas
	for j, at := 0, int64(0); j < w; j++ {
		sent[at], start[j], blocks[j] = header, at+1, r.send[j]+1
		at += blocks[j]
	}
	slot := make([]int64, len(sent)) // slot[k]: the position in ids of the k-th sent (0: a header)
	for i := range ids {
		k := start[owner[i]]
		start[owner[i]]++
		sent[k], slot[k] = ids[i], int64(i)
		r.perm[k-int64(owner[i])-1] = int64(i) // its position among the ids alone
	}
	all, got, recv, err := s.exchange(sent, slot, rows, width, blocks)
	if err != nil {
		return nil, nil, false, errors.Join(err, local)
	}
	var refused []int
	anyHas := false
	data := make([]int64, 0, len(all))
	for j, at := 0, int64(0); j < w; j++ {
		if recv[j] < 1 {
			got.Close()
			return nil, nil, false, errors.Join(&Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("table %q: rank %d sent no header", s.name, j)}, local)
		}
		h := all[at]
		if h&headerRefused != 0 {
			refused = append(refused, j)
		}
		anyHas = anyHas || h&headerHas != 0
		r.recv[j] = recv[j] - 1
		r.ids = append(r.ids, all[at+1:at+recv[j]]...)
		for k := at + 1; k < at+recv[j]; k++ {
			data = append(data, k)
		}
		at += recv[j]
	}
	switch {
	case local != nil:
		err = local
	case refused != nil:
		err = &Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("table %q: rank(s) %v refused their input; no shard changed", s.name, refused)}
	}
	if err != nil || got == nil {
		got.Close()
		return r, nil, anyHas, err
	}
	defer got.Close()
	out, err := unpackRows(got, data, width)
	return r, out, anyHas, err
}

// exchange is route's all-to-all of sent (ids and headers, blocks[j] to rank j), with the
// rows of slot (packRows) when width > 0: it returns the ids and headers received, the
// packed tensor received (nil when width is 0) and how many came from each rank.
func (s *ShardedTable) exchange(sent, slot []int64, rows *cgotorch.Tensor, width int64, blocks []int64) ([]int64, *cgotorch.Tensor, []int64, error) {
	var t *cgotorch.Tensor
	var err error
	if width > 0 {
		t, err = packRows(sent, slot, rows, width)
	} else {
		t, err = cgotorch.FromSlice(sent)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	defer t.Close()
	got, recv, err := s.allToAll(t, blocks)
	if err != nil {
		return nil, nil, nil, err
	}
	if width == 0 {
		defer got.Close()
		all, err := cgotorch.ToSlice[int64](got)
		return all, nil, recv, err
	}
	all, err := unpackIDs(got)
	if err != nil {
		got.Close()
		return nil, nil, nil, err
	}
	return all, got, recv, nil
}

// back returns the owners' answers (rows, [len(r.ids), ...] in the order received; nil: this
// owner failed) to the ranks that sent the ids, in the order of the caller's ids, or, when pos
// is not nil, in the order pos gives them (row i: the answer for the caller's pos[i]-th id).
func (s *ShardedTable) back(r *routed, rows *cgotorch.Tensor, width int64, pos []int64) (*cgotorch.Tensor, error) {
	send := r.recv
	if rows == nil { // this owner failed: it sends nothing, and the peers see it
		rows, send = cgotorch.Zeros([]int64{0, width}), make([]int64, len(send))
		defer rows.Close()
	}
	got, _, err := s.allToAll(rows, send)
	if err != nil {
		return nil, err
	}
	defer got.Close()
	if n := got.Shape()[0]; n != int64(len(r.perm)) {
		return nil, &Error{Op: "sharded rows", Kind: ErrMismatch, Err: fmt.Errorf("table %q: %d rows came back, want %d (an owner failed)", s.name, n, len(r.perm))}
	}
	inv := make([]int64, len(r.perm))
	for k, i := range r.perm {
		inv[i] = int64(k)
	}
	if pos != nil {
		for i, k := range pos {
			pos[i] = inv[k]
		}
		inv = pos
	}
	return selectRows(got, inv)
}

// allToAll is the group's AllToAll, its error naming the table.
func (s *ShardedTable) allToAll(t *cgotorch.Tensor, send []int64) (*cgotorch.Tensor, []int64, error) {
	out, recv, err := s.g.AllToAll(t, send)
	if err != nil {
		return nil, nil, fmt.Errorf("table %q: %w", s.name, err)
	}
	return out, recv, nil
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

// uniqueIDs returns ids ascending without repeats, leaving out the padding id when padding.
func uniqueIDs(ids []int64, padding bool, paddingID int64) []int64 {
	u := slices.Clone(ids)
	slices.Sort(u)
	u = slices.Compact(u)
	if padding {
		if i, ok := slices.BinarySearch(u, paddingID); ok {
			u = slices.Delete(u, i, i+1)
		}
	}
	return u
}

// idsOf checks that ids is an int64 CPU tensor and returns its elements.
func (s *ShardedTable) idsOf(op string, ids *cgotorch.Tensor) ([]int64, error) {
	if ids == nil || ids.Closed() {
		return nil, s.badInput(op, "ids are nil or closed")
	}
	if ids.DType() != cgotorch.Int64 || ids.Device().Type != cgotorch.DeviceCPU {
		return nil, s.badInput(op, "ids must be int64 on the CPU, got %v on %v", ids.DType(), ids.Device())
	}
	return cgotorch.ToSlice[int64](ids)
}

// rowsOf checks that rows is a finite float32 CPU tensor of n rows of Dim.
func (s *ShardedTable) rowsOf(op, what string, rows *cgotorch.Tensor, n int) error {
	if rows == nil || rows.Closed() {
		return s.badInput(op, "%s are nil or closed", what)
	}
	if rows.DType() != cgotorch.Float32 || rows.Device().Type != cgotorch.DeviceCPU {
		return s.badInput(op, "%s must be float32 on the CPU, got %v on %v", what, rows.DType(), rows.Device())
	}
	if sh := rows.Shape(); len(sh) != 2 || sh[0] != int64(n) || sh[1] != int64(s.cfg.Dim) {
		return s.badInput(op, "%s have shape %v, want [%d %d]", what, sh, n, s.cfg.Dim)
	}
	return s.finite(op, what, rows)
}

// finite returns ErrBadInput when t holds a NaN or an Inf. A NaN or an Inf makes t's sum NaN
// or infinite, so a finite sum (the common case: one pass, no copy) clears t; an infinite one
// may also be finite values that overflow, so it is checked exactly: x - x is 0 for every
// finite x, NaN for the others, so the sum of t - t is 0 exactly when t is finite.
func (s *ShardedTable) finite(op, what string, t *cgotorch.Tensor) error {
	ok := false
	err := cgotorch.TryWithScope(func() error {
		sum, err := t.Sum().Item()
		if ok = err == nil && !math.IsInf(sum, 0) && !math.IsNaN(sum); ok || err != nil {
			return err
		}
		sum, err = t.Sub(t).Sum().Item()
		ok = sum == 0
		return err
	})
	if err != nil {
		return err
	}
	if !ok {
		return s.badInput(op, "%s hold NaN or Inf", what)
	}
	return nil
}

// badInput is an error of this rank's input, wrapping embedding.ErrBadInput.
func (s *ShardedTable) badInput(op, format string, args ...any) error {
	return fmt.Errorf("%w: sharded table %q: %s: %s", embedding.ErrBadInput, s.name, op, fmt.Sprintf(format, args...))
}
