package dist

import (
	"fmt"
	"math"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

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
