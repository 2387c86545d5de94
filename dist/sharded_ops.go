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
	p := part{t: s, ids: u, local: err, counted: insert && s.counting()}
	if p.counted {
		p.counts = occurrences(pos, len(u))
	}
	rows, ufound, err := s.fetch(op, p, insert, !insert, slices.Clone(pos))
	if err != nil || insert {
		return rows, nil, err
	}
	f := make([]bool, len(v))
	for i := range f {
		k := i
		if pos != nil {
			k = int(pos[i])
		}
		f[i] = ufound[k]
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

// fetch returns the rows of p's ids (unique; float32 [len(ids), Dim], or in the order pos
// gives: back) from their owners, which insert absent ids (insert) or read them; with found,
// also whether each was present (in the order of ids); p flagged, whether each has a row after
// the owners' lookup (in the order of the rows; else nil). p.local is this rank's verdict on
// its input: the ranks agree on theirs as the ids go out.
func (s *ShardedTable) fetch(op string, p part, insert, found bool, pos []int64) (*cgotorch.Tensor, []bool, error) {
	rs, rows, present, err := fetchParts(op, []part{p}, insert, [][]int64{pos})
	if err != nil {
		return nil, nil, err
	}
	r, got := rs[0], rows[0]
	if !found {
		return got, r.has, nil
	}
	flags := make([]int64, len(present[0]))
	for i, p := range present[0] {
		flags[i] = boolInt(p)
	}
	ft, err := cgotorch.FromSlice(flags, int64(len(flags)), 1)
	if err != nil {
		got.Close()
		return nil, nil, err
	}
	defer ft.Close()
	back, err := s.back1(r, ft, 1, nil)
	if err != nil {
		got.Close()
		return nil, nil, err
	}
	defer back.Close()
	v, err := cgotorch.ToSlice[int64](back)
	if err != nil {
		got.Close()
		return nil, nil, err
	}
	has := make([]bool, len(v))
	for i, x := range v {
		has[i] = x != 0
	}
	return got, has, nil
}

// fetchParts is the exchange of several lookups' ids and rows: one all-to-all of the ids of
// every part (its table and distinct ids, this rank's verdict on them and, counted, their
// counts, which the owners' lookups count), one of the rows of every part (collective). For
// each part it returns the ids as routed, the rows (in the order of its ids, or of pos[k] when
// not nil: see back) and, when reading (not insert), whether each id the owner received was
// present; a flagged part, whether each id the owner received has a row after its lookup, and
// (in the routed's has) whether each of this rank's has one. An error fails every part, on every
// rank.
func fetchParts(op string, parts []part, insert bool, pos [][]int64) ([]*routed, []*cgotorch.Tensor, [][]bool, error) {
	kind := routeRead
	if insert {
		kind = routeLookup
	}
	as, err := route(op, kind, parts, 0, false)
	if err != nil {
		return nil, nil, nil, err
	}
	tables, rs, widths := make([]*ShardedTable, len(as)), make([]*routed, len(as)), make([]int64, len(as))
	var refused []error
	for k, a := range as {
		tables[k], rs[k], widths[k] = parts[k].t, a.r, int64(parts[k].t.cfg.Dim)+boolInt(parts[k].flagged)
		refused = append(refused, a.err)
	}
	if err := errors.Join(refused...); err != nil { // every rank knows: none answers
		return nil, nil, nil, err
	}
	rows, present := make([]*cgotorch.Tensor, len(as)), make([][]bool, len(as))
	defer func() { closeAll(rows) }()
	var failed []error // this owner's (then it answers nothing: rows[k] nil)
	for k, t := range tables {
		var err error
		switch {
		case insert && parts[k].counted:
			rows[k], err = t.shard.LookupCounted(rs[k].ids, rs[k].counts)
			if err == nil && parts[k].flagged { // before the next part's lookup
				rows[k], present[k], err = withRowFlags(t.shard, rs[k].ids, rows[k])
			}
		case insert:
			rows[k], err = t.shard.LookupIDs(rs[k].ids)
		default:
			rows[k], present[k], err = t.shard.ReadIDs(rs[k].ids)
		}
		failed = append(failed, err)
	}
	got, err := back(tables, rs, rows, widths, pos)
	for k, p := range parts {
		if err == nil && p.flagged {
			got[k], rs[k].has, err = splitRowFlags(got[k], int64(p.t.cfg.Dim))
		}
	}
	if err = errors.Join(append(failed, err)...); err != nil {
		closeAll(got)
		return nil, nil, nil, err
	}
	return rs, got, present, nil
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
	if err == nil {
		err = s.heldRows(op)
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
	r, got, err := s.route1(op, routeWrite, u, urows, err)
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
	_, errs := applyGrads(op, []part{{t: s, ids: u, rows: sums, local: err}}, true)
	return errs[0]
}

// applyGrads sends the gradients of every part (its table's distinct ids on this rank, their
// gradients, this rank's verdict on them) to their owners in one exchange, where they are
// summed per id and stepped once the ranks have agreed on their verdicts, and every rank then
// learns whether the owners all did, in one exchange for all parts (collective). A part's
// owners step, even with no ids, when always is set or any rank has gradients for it:
// stepped[k] says whether they did, errs[k] is part k's error.
func applyGrads(op string, parts []part, always bool) (stepped []bool, errs []error) {
	stepped, errs = make([]bool, len(parts)), make([]error, len(parts))
	width := int64(0)
	for k := range parts {
		p := &parts[k]
		width = max(width, int64(p.t.cfg.Dim))
		p.has = len(p.ids) > 0
		if p.t.fault == faultLostGradient && len(p.ids) > 0 && p.local == nil {
			rest, err := selectRows(p.rows, span(1, len(p.ids)))
			if err != nil {
				p.local = err
				continue
			}
			defer rest.Close()
			p.ids, p.rows = p.ids[1:], rest
		}
	}
	as, err := route(op, routeGrads, parts, width, true)
	if err != nil {
		for k := range errs {
			errs[k] = err
		}
		return stepped, errs
	}
	defer closeArrived(as)
	var applied []int // the parts whose owners step: the same on every rank
	var tables []*ShardedTable
	var locals []error
	for k, a := range as {
		if errs[k] = a.err; a.err != nil || !(always || a.anyHas) {
			continue
		}
		applied, tables = append(applied, k), append(tables, parts[k].t)
		locals = append(locals, parts[k].t.updateShard(a.r.ids, a.rows))
	}
	if applied == nil {
		return stepped, errs
	}
	for i, e := range settleParts(op, tables, locals) {
		stepped[applied[i]], errs[applied[i]] = true, e
	}
	return stepped, errs
}

// updateShard steps this owner's shard with the gradients it received (grads, one row per id
// of recv, several per id when several ranks sent one), summed per id by the shard's Update;
// in a TrainPipeline's Step, its hook records the ids (stepHook).
func (s *ShardedTable) updateShard(recv []int64, grads *cgotorch.Tensor) error {
	var keep []int64 // the rows of grads stepped, when not all of them
	if s.fault == faultNoSum {
		recv, keep = firstOfEach(recv)
	}
	if s.stepping != nil {
		s.stepping.record(recv)
	}
	if keep != nil {
		kept, err := selectRows(grads, keep)
		if err != nil {
			return err
		}
		defer kept.Close()
		grads = kept
	}
	return s.onShard(recv, grads, s.shard.Update)
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
	if err == nil {
		err = s.heldRows(op)
	}
	r, _, err := s.route1(op, routeDelete, uniqueIDs(v, false, 0), nil, err)
	if err != nil {
		return 0, err
	}
	// an id sent by several ranks is deleted once
	n, err := s.shard.DeleteIDs(uniqueIDs(r.ids, false, 0))
	return s.settleCount(op, err, n)
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
