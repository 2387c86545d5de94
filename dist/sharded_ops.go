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
	if _, err := s.agree(op, err, false); err != nil {
		return nil, nil, err
	}
	u := uniqueIDs(v, false, 0)
	urows, ufound, err := s.fetch(op, u, insert)
	if err != nil {
		return nil, nil, err
	}
	d := s.cfg.Dim
	out := make([]float32, len(v)*d)
	f := make([]bool, len(v))
	for i, id := range v {
		k, _ := slices.BinarySearch(u, id)
		copy(out[i*d:(i+1)*d], urows[k*d:(k+1)*d])
		f[i] = ufound[k]
	}
	if rows, err = cgotorch.FromSlice(out, int64(len(v)), int64(d)); err != nil {
		return nil, nil, err
	}
	if found, err = cgotorch.FromSlice(f); err != nil {
		rows.Close()
		return nil, nil, err
	}
	return rows, found, nil
}

// fetch returns the rows of ids (unique) from their owners, which insert absent ids (insert)
// or read them, and whether each was present.
func (s *ShardedTable) fetch(op string, ids []int64, insert bool) ([]float32, []bool, error) {
	r, _, err := s.owners(ids, nil, 0, false)
	if err != nil {
		return nil, nil, err
	}
	d := s.cfg.Dim
	ans, err := s.ownerRows(r.ids, insert) // [n, Dim+1]: the row and whether it was present
	got, berr := s.back(r, ans, d+1)
	if err = errors.Join(err, berr); err != nil {
		return nil, nil, err
	}
	rows := make([]float32, len(ids)*d)
	found := make([]bool, len(ids))
	for i := range ids {
		copy(rows[i*d:(i+1)*d], got[i*(d+1):i*(d+1)+d])
		found[i] = got[i*(d+1)+d] != 0
	}
	return rows, found, nil
}

// ownerRows is the owner's part of fetch: the rows of ids, each followed by 1 if it was
// present, else 0. On failure it returns no rows (the peers then see too few).
func (s *ShardedTable) ownerRows(ids []int64, insert bool) ([]float32, error) {
	var rows *cgotorch.Tensor
	found := make([]bool, len(ids))
	var err error
	if insert {
		var idx []int64
		idx, err = s.shard.IndicesIDs(ids, false)
		for i, x := range idx {
			found[i] = x >= 0
		}
		if err == nil {
			rows, err = s.shard.LookupIDs(ids)
		}
	} else {
		rows, found, err = s.shard.ReadIDs(ids)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	v, err := cgotorch.ToSlice[float32](rows)
	if err != nil {
		return nil, err
	}
	d := s.cfg.Dim
	out := make([]float32, len(ids)*(d+1))
	for i := range ids {
		copy(out[i*(d+1):], v[i*d:(i+1)*d])
		out[i*(d+1)+d] = float32(boolInt(found[i]))
	}
	return out, nil
}

// Write sets the rows of ids (int64 [N]) to values (float32 [N, Dim], finite), inserting
// absent ids (collective). For an id given more than once the last occurrence wins: on a rank,
// its last position; across ranks, the highest rank.
func (s *ShardedTable) Write(ids, values *cgotorch.Tensor) error {
	const op = "write"
	v, err := s.idsOf(op, ids)
	var rows []float32
	if err == nil {
		rows, err = s.rowsOf(op, "values", values, len(v))
	}
	if _, err := s.agree(op, err, false); err != nil {
		return err
	}
	d := s.cfg.Dim
	last := map[int64]int{}
	for i, id := range v {
		last[id] = i
	}
	u := uniqueIDs(v, false, 0)
	urows := make([]float32, len(u)*d)
	for k, id := range u {
		i := last[id]
		copy(urows[k*d:(k+1)*d], rows[i*d:(i+1)*d])
	}
	r, got, err := s.owners(u, urows, d, false)
	if err != nil {
		return err
	}
	return s.settle(op, s.shard.WriteIDs(r.ids, got))
}

// Update applies one step of the table's optimizer with grads (float32 [N, Dim], finite) for
// ids (int64 [N]), on every shard (collective): the gradients of an id, from every rank, are
// summed on its owner. Every shard counts the step, as embedding.Table.Update does.
func (s *ShardedTable) Update(ids, grads *cgotorch.Tensor) error {
	const op = "update"
	v, err := s.idsOf(op, ids)
	var g []float32
	if err == nil {
		g, err = s.rowsOf(op, "gradients", grads, len(v))
	}
	if _, err := s.agree(op, err, false); err != nil {
		return err
	}
	u, sums := sumByID(v, g, s.cfg.Dim)
	return s.applyGrads(op, u, sums)
}

// sumByID returns the ids ascending without repeats, and the sum of each one's rows.
func sumByID(ids []int64, rows []float32, d int) ([]int64, []float32) {
	u := uniqueIDs(ids, false, 0)
	sums := make([]float32, len(u)*d)
	for i, id := range ids {
		k, _ := slices.BinarySearch(u, id)
		for j := 0; j < d; j++ {
			sums[k*d+j] += rows[i*d+j]
		}
	}
	return u, sums
}

// applyGrads sends the gradients of ids (unique on this rank) to their owners, which sum them
// per id and step (every owner steps, even with no ids); every rank learns whether they all
// did.
func (s *ShardedTable) applyGrads(op string, ids []int64, grads []float32) error {
	d := s.cfg.Dim
	if s.fault == faultLostGradient && len(ids) > 0 {
		ids, grads = ids[1:], grads[d:]
	}
	r, got, err := s.owners(ids, grads, d, true)
	if err != nil {
		return err
	}
	recv := r.ids
	if s.fault == faultNoSum {
		recv, got = firstOfEach(recv, got, d)
	}
	return s.settle(op, s.shard.UpdateIDs(recv, got))
}

// firstOfEach keeps the first row of each id (the deliberate defect faultNoSum).
func firstOfEach(ids []int64, rows []float32, d int) ([]int64, []float32) {
	seen := map[int64]bool{}
	var outIDs []int64
	var outRows []float32
	for i, id := range ids {
		if !seen[id] {
			seen[id] = true
			outIDs = append(outIDs, id)
			outRows = append(outRows, rows[i*d:(i+1)*d]...)
		}
	}
	return outIDs, outRows
}

// Delete removes ids (int64, any shape) from their owners and returns how many distinct ids
// were present in the whole table (collective).
func (s *ShardedTable) Delete(ids *cgotorch.Tensor) (int, error) {
	const op = "delete"
	v, err := s.idsOf(op, ids)
	if _, err := s.agree(op, err, false); err != nil {
		return 0, err
	}
	r, _, err := s.owners(uniqueIDs(v, false, 0), nil, 0, false)
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
