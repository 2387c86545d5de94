package dist

import (
	"errors"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// Lookup returns the rows of ids (int64, any shape) as float32 [N, Dim] (N ids, in order),
// inserting the ids not yet in the table on their owners (collective).
func (s *ShardedTable) Lookup(ids *cgotorch.Tensor) (*cgotorch.Tensor, error) {
	rows, _, err := s.lookupRows("lookup", ids, true)
	return rows, err
}

// Read returns the rows of ids without inserting anything (ids not in the table get the
// Config's ReadDefault row), and found (bool [N]): which ids were present (collective).
func (s *ShardedTable) Read(ids *cgotorch.Tensor) (rows, found *cgotorch.Tensor, err error) {
	return s.lookupRows("read", ids, false)
}

// lookupRows is Lookup (insert) and Read.
func (s *ShardedTable) lookupRows(op string, ids *cgotorch.Tensor, insert bool) (rows, found *cgotorch.Tensor, err error) {
	v, err := s.idsOf(op, ids)
	u, pos := distinct(v)
	rows, ufound, err := s.fetch(op, u, err, insert, !insert, slices.Clone(pos))
	if err != nil || insert {
		return rows, nil, err
	}
	f := make([]bool, len(v))
	for i := range f {
		k := i
		if pos != nil {
			k = int(pos[i])
		}
		f[i] = ufound[k] != 0
	}
	if found, err = cgotorch.FromSlice(f); err != nil {
		rows.Close()
		return nil, nil, err
	}
	return rows, found, nil
}

// distinct returns ids ascending without repeats (u) and the position in u of each of ids
// (pos), or, when ids are ascending and distinct already, ids itself and a nil pos.
func distinct(ids []int64) (u, pos []int64) {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			u = uniqueIDs(ids, false, 0)
			return u, positions(ids, u)
		}
	}
	return ids, nil
}

// positions returns the position in u (ascending, without repeats) of each of ids.
func positions(ids, u []int64) []int64 {
	pos := make([]int64, len(ids))
	for i, id := range ids {
		k, _ := slices.BinarySearch(u, id)
		pos[i] = int64(k)
	}
	return pos
}

// fetch returns the rows of ids (unique; float32 [len(ids), Dim], or in the order pos gives:
// back) from their owners, which insert absent ids (insert) or read them; with found, also
// whether each was present (1, in the order of ids). local is this rank's verdict on its
// input: the ranks agree on theirs as the ids go out.
func (s *ShardedTable) fetch(op string, ids []int64, local error, insert, found bool, pos []int64) (*cgotorch.Tensor, []int64, error) {
	r, got, present, err := s.fetchRouted(op, ids, local, insert, pos)
	if err != nil || !found {
		return got, nil, err
	}
	flags := make([]int64, len(present))
	for i, p := range present {
		flags[i] = boolInt(p)
	}
	ft, err := cgotorch.FromSlice(flags, int64(len(flags)), 1)
	if err != nil {
		got.Close()
		return nil, nil, err
	}
	defer ft.Close()
	back, err := s.back(r, ft, 1, nil)
	if err != nil {
		got.Close()
		return nil, nil, err
	}
	defer back.Close()
	v, err := cgotorch.ToSlice[int64](back)
	return got, v, err
}

// fetchRouted is fetch's exchange of the ids and rows: it also returns the ids as routed (what
// this rank received as an owner: TrainPipeline patches those rows) and, when reading, whether
// each id the owner received was present.
func (s *ShardedTable) fetchRouted(op string, ids []int64, local error, insert bool, pos []int64) (*routed, *cgotorch.Tensor, []bool, error) {
	r, _, _, err := s.route(op, ids, nil, 0, local, false, false)
	if err != nil {
		return nil, nil, nil, err
	}
	var rows *cgotorch.Tensor
	var present []bool
	if insert {
		rows, err = s.shard.LookupIDs(r.ids)
	} else {
		rows, present, err = s.shard.ReadIDs(r.ids)
	}
	got, berr := s.back(r, rows, int64(s.cfg.Dim), pos) // (rows nil: this owner failed)
	rows.Close()
	return r, got, present, errors.Join(err, berr)
}

// Write sets the rows of ids (int64 [N]) to values (float32 [N, Dim], finite), inserting
// absent ids (collective). For an id given more than once the last occurrence wins: on a rank,
// its last position; across ranks, the highest rank.
func (s *ShardedTable) Write(ids, values *cgotorch.Tensor) error {
	const op = "write"
	v, err := s.idsOf(op, ids)
	if err == nil {
		err = s.rowsOf(op, "values", values, len(v))
	}
	u, pos := distinct(v)
	urows := values
	if err == nil && pos != nil {
		last := make([]int64, len(u))
		for i, k := range pos {
			last[k] = int64(i)
		}
		urows, err = selectRows(values, last)
		defer urows.Close()
	}
	r, got, _, err := s.route(op, u, urows, int64(s.cfg.Dim), err, false, false)
	if err != nil {
		return err
	}
	defer got.Close()
	return s.settle(op, s.onShard(r.ids, got, s.shard.Write))
}

// onShard runs f (the shard's Write or Update) on ids and rows.
func (s *ShardedTable) onShard(ids []int64, rows *cgotorch.Tensor, f func(ids, rows *cgotorch.Tensor) error) error {
	t, err := cgotorch.FromSlice(ids)
	if err != nil {
		return err
	}
	defer t.Close()
	return f(t, rows)
}

// Update applies one step of the table's optimizer with grads (float32 [N, Dim], finite) for
// ids (int64 [N]), on every shard (collective): the gradients of an id, from every rank, are
// summed on its owner. Every shard counts the step, as embedding.Table.Update does.
func (s *ShardedTable) Update(ids, grads *cgotorch.Tensor) error {
	const op = "update"
	v, err := s.idsOf(op, ids)
	if err == nil {
		err = s.rowsOf(op, "gradients", grads, len(v))
	}
	u, pos := distinct(v)
	sums := grads // summed per id, unless the ids are ascending and distinct already
	if err == nil && pos != nil {
		var summed *cgotorch.Tensor
		err = cgotorch.Try(func() {
			pt := cgotorch.MustFromSlice(pos)
			defer pt.Close()
			summed = cgotorch.Zeros([]int64{int64(len(u)), int64(s.cfg.Dim)}).IndexAddInPlace(0, pt, grads)
		})
		defer summed.Close()
		sums = summed
	}
	_, err = s.applyGrads(op, u, sums, err, true)
	return err
}

// applyGrads sends the gradients of ids (unique on this rank) to their owners, which sum them
// per id and step, once the ranks have agreed on their verdicts (local: this rank's); every
// rank learns whether the owners all did. Every owner steps, even with no ids, when always is
// set or any rank has gradients; stepped says whether they did.
func (s *ShardedTable) applyGrads(op string, ids []int64, grads *cgotorch.Tensor, local error, always bool) (stepped bool, err error) {
	if s.fault == faultLostGradient && len(ids) > 0 && local == nil {
		rest, err := selectRows(grads, span(1, len(ids)))
		if err != nil {
			return false, err
		}
		defer rest.Close()
		ids, grads = ids[1:], rest
	}
	r, got, anyHas, err := s.route(op, ids, grads, int64(s.cfg.Dim), local, len(ids) > 0, true)
	defer got.Close()
	if err != nil || !(always || anyHas) {
		return false, err
	}
	recv := r.ids
	if s.fault == faultNoSum {
		var keep []int64
		recv, keep = firstOfEach(recv)
		if got, err = selectRows(got, keep); err != nil {
			return false, err
		}
		defer got.Close()
	}
	if s.updated != nil {
		*s.updated = append(*s.updated, recv...)
	}
	return true, s.settle(op, s.onShard(recv, got, s.shard.Update))
}

// span is from, from+1, ..., to-1.
func span(from, to int) []int64 {
	out := make([]int64, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, int64(i))
	}
	return out
}

// firstOfEach returns the ids without repeats and the position of each one's first occurrence
// (the deliberate defect faultNoSum keeps only those rows).
func firstOfEach(ids []int64) (first, at []int64) {
	seen := map[int64]bool{}
	for i, id := range ids {
		if !seen[id] {
			seen[id] = true
			first, at = append(first, id), append(at, int64(i))
		}
	}
	return first, at
}

// Delete removes ids (int64, any shape) from their owners and returns how many distinct ids
// were present in the whole table (collective).
func (s *ShardedTable) Delete(ids *cgotorch.Tensor) (int, error) {
	const op = "delete"
	v, err := s.idsOf(op, ids)
	r, _, _, err := s.route(op, uniqueIDs(v, false, 0), nil, 0, err, false, false)
	if err != nil {
		return 0, err
	}
	// an id sent by several ranks is deleted once
	n, err := s.shard.DeleteIDs(uniqueIDs(r.ids, false, 0))
	if err := s.settle(op, err); err != nil {
		return 0, err
	}
	t, err := cgotorch.FromSlice([]int64{int64(n)})
	if err != nil {
		return 0, err
	}
	defer t.Close()
	sum, err := s.g.AllReduce(t, Sum)
	if err != nil {
		return 0, err
	}
	defer sum.Close()
	total, err := sum.Item()
	return int(total), err
}

// ExportShard is a consistent snapshot of this rank's shard (not collective).
func (s *ShardedTable) ExportShard() (*embedding.Snapshot, error) { return s.shard.Export() }

// Export returns the whole table on every rank (collective): every id (ascending), its row and
// optimizer states, gathered from the shards.
func (s *ShardedTable) Export() (*embedding.Snapshot, error) {
	const op = "export"
	snap, err := s.shard.Export()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	gat := &gatherer{s: s}
	ids, err := cgotorch.ToSlice[int64](snap.IDs)
	if err != nil {
		return nil, err
	}
	if err := gat.start(op, ids); err != nil {
		return nil, err
	}
	out := &embedding.Snapshot{Step: snap.Step}
	if out.IDs, err = cgotorch.FromSlice(gat.ids); err != nil {
		return nil, err
	}
	if out.Rows, err = gat.rows(op, snap.Rows); err != nil {
		out.Close()
		return nil, err
	}
	for _, st := range snap.States {
		v, err := gat.rows(op, st.Values)
		if err != nil {
			out.Close()
			return nil, err
		}
		out.States = append(out.States, embedding.State{Name: st.Name, Values: v})
	}
	return out, nil
}
