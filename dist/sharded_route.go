package dist

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// routed is a batch of ids sent to their owners: what this rank sent, and what it received as
// an owner.
type routed struct {
	perm []int   // perm[k]: the position in the caller's ids of the k-th id sent
	send []int64 // how many ids went to each rank
	ids  []int64 // the ids this rank received, in rank order
	recv []int64 // how many came from each rank
}

// agree exchanges every rank's verdict on its input (local: nil or its error) before anything
// changes: it returns local itself, or an ErrMismatch naming the ranks that refused theirs.
// has, for each rank, is what it reported (Step: whether it has gradients).
func (s *ShardedTable) agree(op string, local error, has bool) (anyHas bool, err error) {
	return s.verdicts(op, local, has, "refused their input; no shard changed")
}

// settle tells every rank whether the owners applied a change the ranks had agreed on (an
// owner whose shard fails, a closed one say, is the only way they do not): it returns local
// itself, or an ErrMismatch naming the ranks that failed.
func (s *ShardedTable) settle(op string, local error) error {
	_, err := s.verdicts(op, local, false, "failed to apply it on their shard")
	return err
}

func (s *ShardedTable) verdicts(op string, local error, has bool, failed string) (anyHas bool, err error) {
	all, err := s.gatherInt64s(op, []int64{boolInt(local != nil), boolInt(has)})
	if err != nil {
		return false, errors.Join(err, local)
	}
	if local != nil {
		return false, local
	}
	var refused []int
	for r := 0; r < s.g.WorldSize(); r++ {
		if all[2*r] != 0 {
			refused = append(refused, r)
		}
		anyHas = anyHas || all[2*r+1] != 0
	}
	if refused != nil {
		return false, &Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("table %q: rank(s) %v %s", s.name, refused, failed)}
	}
	return anyHas, nil
}

// gatherInt64s returns every rank's v (the same length on every rank), in rank order.
func (s *ShardedTable) gatherInt64s(op string, v []int64) ([]int64, error) {
	t, err := cgotorch.FromSlice(v)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	all, err := s.g.AllGather(t)
	if err != nil {
		return nil, fmt.Errorf("table %q: %s: %w", s.name, op, err)
	}
	defer all.Close()
	return cgotorch.ToSlice[int64](all)
}

// owners sends ids (and rows, [len(ids), width] floats, when width > 0) to their owners; grads
// says the rows are gradients.
func (s *ShardedTable) owners(ids []int64, rows []float32, width int, grads bool) (*routed, []float32, error) {
	w := s.g.WorldSize()
	owner := make([]int, len(ids))
	r := &routed{send: make([]int64, w), perm: make([]int, len(ids))}
	for i, id := range ids {
		owner[i] = Owner(id, w)
		if s.fault == faultWrongOwner && grads {
			owner[i] = (owner[i] + 1) % w
		}
		r.send[owner[i]]++
	}
	start := make([]int64, w)
	for j := 1; j < w; j++ {
		start[j] = start[j-1] + r.send[j-1]
	}
	sent := make([]int64, len(ids))
	for i := range ids {
		k := start[owner[i]]
		start[owner[i]]++
		r.perm[k], sent[k] = i, ids[i]
	}
	var err error
	if r.ids, r.recv, err = allToAllOf(s.g, s.name, sent, r.send, 1); err != nil {
		return nil, nil, err
	}
	if width == 0 {
		return r, nil, nil
	}
	out := make([]float32, len(rows))
	for k, i := range r.perm {
		copy(out[k*width:(k+1)*width], rows[i*width:(i+1)*width])
	}
	got, _, err := allToAllOf(s.g, s.name, out, r.send, width)
	return r, got, err
}

// back returns the owners' answers (rows, [len(r.ids), width], in the order received) to the
// ranks that sent the ids, in the order of the caller's ids.
func (s *ShardedTable) back(r *routed, rows []float32, width int) ([]float32, error) {
	send, n := r.recv, 0
	for _, c := range send {
		n += int(c)
	}
	if len(rows) != n*width { // this owner failed: it sends nothing, and the peers see it
		rows, send = nil, make([]int64, len(send))
	}
	got, _, err := allToAllOf(s.g, s.name, rows, send, width)
	if err != nil {
		return nil, err
	}
	if len(got) != len(r.perm)*width {
		return nil, &Error{Op: "sharded rows", Kind: ErrMismatch, Err: fmt.Errorf("table %q: %d values came back, want %d (an owner failed)", s.name, len(got), len(r.perm)*width)}
	}
	out := make([]float32, len(got))
	for k, i := range r.perm {
		copy(out[i*width:(i+1)*width], got[k*width:(k+1)*width])
	}
	return out, nil
}

// allToAllOf sends v ([sum(send), width]) with splits send and returns what came, with the
// receive splits.
func allToAllOf[T cgotorch.Element](g *Group, name string, v []T, send []int64, width int) ([]T, []int64, error) {
	shape := []int64{int64(len(v) / width)}
	if width > 1 {
		shape = append(shape, int64(width))
	}
	t, err := cgotorch.FromSlice(v, shape...)
	if err != nil {
		return nil, nil, err
	}
	defer t.Close()
	out, recv, err := g.AllToAll(t, send)
	if err != nil {
		return nil, nil, fmt.Errorf("table %q: %w", name, err)
	}
	defer out.Close()
	got, err := cgotorch.ToSlice[T](out)
	return got, recv, err
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

// rowsOf checks that rows is a finite float32 CPU tensor of n rows of Dim and returns its
// elements.
func (s *ShardedTable) rowsOf(op, what string, rows *cgotorch.Tensor, n int) ([]float32, error) {
	if rows == nil || rows.Closed() {
		return nil, s.badInput(op, "%s are nil or closed", what)
	}
	if rows.DType() != cgotorch.Float32 || rows.Device().Type != cgotorch.DeviceCPU {
		return nil, s.badInput(op, "%s must be float32 on the CPU, got %v on %v", what, rows.DType(), rows.Device())
	}
	if sh := rows.Shape(); len(sh) != 2 || sh[0] != int64(n) || sh[1] != int64(s.cfg.Dim) {
		return nil, s.badInput(op, "%s have shape %v, want [%d %d]", what, sh, n, s.cfg.Dim)
	}
	v, err := cgotorch.ToSlice[float32](rows)
	if err != nil {
		return nil, err
	}
	if err := s.finite(op, what, v); err != nil {
		return nil, err
	}
	return v, nil
}

// finite returns ErrBadInput when v holds a NaN or an Inf.
func (s *ShardedTable) finite(op, what string, v []float32) error {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return s.badInput(op, "%s hold NaN or Inf", what)
		}
	}
	return nil
}

// badInput is an error of this rank's input, wrapping embedding.ErrBadInput.
func (s *ShardedTable) badInput(op, format string, args ...any) error {
	return fmt.Errorf("%w: sharded table %q: %s: %s", embedding.ErrBadInput, s.name, op, fmt.Sprintf(format, args...))
}
