package dist

import (
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// Ids a training lookup kept out, under admission (SetAdmission with k > 1). One table gives an
// id that its lookup keeps out a zero row that is no row of the table, and drops that lookup's
// gradient of it, even when a later lookup of the step admits the id before the Step. A sharded
// table does the same: for a table that admits late, the owners answer a training lookup with
// each id's row and whether the id has a row after their lookup (one more value a row, a flag
// column; nothing more travels for tables without admission). The rank writes into its cache
// the rows of the ids that have one only; the cache (which admits nothing: cacheAdmission) gives
// the others zero rows and drops their gradients, as one table does, so that the Step sends only
// the gradients of lookups that found a row. A later lookup of the step that admits the id
// writes its row into the cache then, and its gradient goes to the owner.

// cacheAdmission is the caches' admission threshold: never reached, so that a training lookup of
// an id the cache has no row for gives a zero row and no gradient. The cache holds a row for every
// id of a lookup but those the owners kept out, so that this costs nothing without admission.
const cacheAdmission = 1 << 62

// lookupPart is the part of one lookup of the table (train: a training one): counted when the
// owners' lookups count (counting), flagged when they admit late. It asks the shard's threshold
// once, and not at all for an inference lookup.
func (s *ShardedTable) lookupPart(train bool) part {
	admits := train && s.admitting()
	return part{t: s, counted: admits || (train && s.cfg.TrackAccess), flagged: admits}
}

// withRowFlags returns an owner's answer to a flagged lookup of ids (rows: its shard's rows of
// them, [len(ids), Dim], closed here): rows with a column that holds 1 for each id that has a row
// after the lookup, 0 for those it kept out, and which ids have one (has, in order).
func withRowFlags(shard *embedding.Table, ids []int64, rows *cgotorch.Tensor) (out *cgotorch.Tensor, has []bool, err error) {
	defer rows.Close()
	at, err := shard.IndicesIDs(ids, false)
	if err != nil {
		return nil, nil, err
	}
	has, flags := make([]bool, len(at)), make([]float32, len(at))
	for i, r := range at {
		has[i], flags[i] = r >= 0, float32(boolInt(r >= 0))
	}
	col, err := cgotorch.FromSlice(flags, int64(len(flags)), 1)
	if err != nil {
		return nil, nil, err
	}
	defer col.Close()
	err = cgotorch.Try(func() { out = cgotorch.Cat([]*cgotorch.Tensor{rows, col}, 1) })
	return out, has, err
}

// splitRowFlags splits an answer of withRowFlags, as received ([n, dim+1], closed here), into
// the rows ([n, dim]) and whether each id has a row.
func splitRowFlags(got *cgotorch.Tensor, dim int64) (rows *cgotorch.Tensor, has []bool, err error) {
	defer got.Close()
	var col *cgotorch.Tensor
	err = cgotorch.Try(func() {
		col = got.Narrow(1, dim, 1).Contiguous()
		rows = got.Narrow(1, 0, dim).Contiguous()
	})
	defer col.Close()
	if err != nil {
		rows.Close()
		return nil, nil, err
	}
	flags, err := cgotorch.ToSlice[float32](col)
	if err != nil {
		rows.Close()
		return nil, nil, err
	}
	has = make([]bool, len(flags))
	for i, f := range flags {
		has[i] = f != 0
	}
	return rows, has, nil
}

// cacheRows writes the fetched rows of a lookup's distinct ids (rows: [len(ids), Dim]) into
// into (a cache or a view), but those of the ids the owners kept out (has[i] false; has nil:
// none), which the cache's lookup then gives as zero rows without gradient.
func (s *ShardedTable) cacheRows(into *embedding.Table, ids []int64, rows *cgotorch.Tensor, has []bool) error {
	if slices.Contains(has, false) {
		var keep, kept []int64 // the rows kept, their ids
		for i, h := range has {
			if h {
				keep, kept = append(keep, int64(i)), append(kept, ids[i])
			}
		}
		if len(keep) == 0 {
			return nil
		}
		sel, err := selectRows(rows, keep)
		if err != nil {
			return err
		}
		defer sel.Close()
		ids, rows = kept, sel
	}
	return s.onShard(ids, rows, into.Write)
}

// keptOut returns the ids of recv (those an owner received for a flagged lookup) that have no
// row after it (has[i] false), ascending without repeats.
func keptOut(recv []int64, has []bool) []int64 {
	var out []int64
	for i, h := range has {
		if !h {
			out = append(out, recv[i])
		}
	}
	return uniqueIDs(out, false, 0)
}
