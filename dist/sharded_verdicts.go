package dist

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/cdist"
)

// settle tells every rank whether the owners applied a change the ranks had agreed on (an
// owner whose shard fails, a closed one say, is the only way they do not): it returns local
// itself, or an ErrMismatch naming the ranks that failed.
func (s *ShardedTable) settle(op string, local error) error {
	return settleParts(op, []*ShardedTable{s}, []error{local})[0]
}

// settleParts is settle for several parts of one group at once, in one exchange (collective:
// every rank passes the same tables): locals[k] is this rank's verdict on applying part k
// (tables[k]'s). It returns, for each part, its local verdict itself, or an ErrMismatch naming
// the ranks that failed it, or the exchange's error.
func settleParts(op string, tables []*ShardedTable, locals []error) []error {
	g := tables[0].g
	out := make([]error, len(tables))
	failed := make([]int64, (len(tables)+62)/63) // bit k%63 of word k/63: part k failed here
	for k, e := range locals {
		if e != nil {
			failed[k/63] |= 1 << (k % 63)
		}
	}
	what := tablesOf(partsOf(tables))
	all, err := gatherInt64s(g, what, op, failed)
	for k, t := range tables {
		switch {
		case err != nil:
			out[k] = errors.Join(err, locals[k])
		case locals[k] != nil:
			out[k] = locals[k]
		default:
			var ranks []int
			for r := 0; r < g.WorldSize(); r++ {
				if all[r*len(failed)+k/63]&(1<<(k%63)) != 0 {
					ranks = append(ranks, r)
				}
			}
			if ranks != nil {
				out[k] = &Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("table %q: rank(s) %v failed to apply it on their shard", t.name, ranks)}
			}
		}
	}
	return out
}

// partsOf makes empty parts of tables (to name them: tablesOf).
func partsOf(tables []*ShardedTable) []part {
	out := make([]part, len(tables))
	for k, t := range tables {
		out[k].t = t
	}
	return out
}

// verdicts exchanges every rank's verdict (local: nil or its error) and flag (has) on an
// operation of what (a table, a checkpoint), in one exchange (they ride in the ranks'
// agreement headers: gatherInt64s): it returns local itself, or an ErrMismatch naming
// the ranks that failed, and whether any rank had the flag set.
func verdicts(g *Group, what, op string, local error, has bool, failed string) (anyHas bool, err error) {
	flags, err := verdictsAnd(g, what, op, local, boolInt(has), failed)
	return slices.ContainsFunc(flags, func(f int64) bool { return f != 0 }), err
}

// verdictsAnd exchanges every rank's verdict (local) and a value, in one exchange: it returns
// local itself, or an ErrMismatch naming the ranks that failed (failed: how), or every rank's
// value, in rank order.
func verdictsAnd(g *Group, what, op string, local error, value int64, failed string) ([]int64, error) {
	all, err := gatherInt64s(g, what, op, []int64{boolInt(local != nil), value})
	if err != nil || local != nil {
		return nil, errors.Join(err, local)
	}
	var refused []int
	values := make([]int64, g.WorldSize())
	for r := range values {
		if all[2*r] != 0 {
			refused = append(refused, r)
		}
		values[r] = all[2*r+1]
	}
	if refused != nil {
		return nil, &Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("%s: rank(s) %v %s", what, refused, failed)}
	}
	return values, nil
}

// agree fails on every rank unless every rank accepts the call (local: its verdict) and passes
// the same value (what: what the value is), in one exchange.
func (s *ShardedTable) agree(op string, local error, value int64, what string) error {
	values, err := verdictsAnd(s.g, fmt.Sprintf("table %q", s.name), op, local, value, "refused")
	for r, v := range values {
		if v != values[0] {
			return &Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("table %q: rank %d's %s differs from rank 0's", s.name, r, what)}
		}
	}
	return err
}

// settleCount settles a change every owner applied to its shard (local: its error) and sums
// count, what it changed, over the ranks, in one exchange.
func (s *ShardedTable) settleCount(op string, local error, count int) (int, error) {
	counts, err := verdictsAnd(s.g, fmt.Sprintf("table %q", s.name), op, local, int64(count), "failed to apply it on their shard")
	total := 0
	for _, c := range counts {
		total += int(c)
	}
	return total, err
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

// sumInt64s returns the element-wise sum of v over every rank (collective).
func (s *ShardedTable) sumInt64s(op string, v []int64) ([]int64, error) {
	t, err := cgotorch.FromSlice(v)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	sum, err := s.g.AllReduce(t, Sum)
	if err != nil {
		return nil, fmt.Errorf("table %q: %s: %w", s.name, op, err)
	}
	defer sum.Close()
	return cgotorch.ToSlice[int64](sum)
}
