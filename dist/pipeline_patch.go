package dist

import (
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// The patch of a TrainPipeline: after a Step, the owners send again the fetched rows it
// changed.

// movesAll says whether a step of opt moves rows absent from it: SGD with momentum does (a
// row keeps moving with its momentum after its last update), so that every fetched row may
// change.
func movesAll(opt embedding.Optimizer) bool {
	switch o := opt.(type) {
	case embedding.SGD:
		return o.Momentum != 0
	case *embedding.SGD:
		return o.Momentum != 0
	}
	return false
}

// patch sends, in one all-to-all for every lookup of next, the current rows of the ids this
// owner received for each lookup and that changed since (changed(f): ascending) back to the
// ranks that asked for them, and keeps those this rank receives in each lookup's patch
// (collective). The block to each rank holds, for each lookup in order, a header (how many of
// its ids follow) and those ids with their rows, zero-padded to the widest lookup's Dim.
func patch(next []*fetched, changed func(*fetched) []int64) error {
	if len(next) == 0 {
		return nil
	}
	g := next[0].p.Table.g
	w := g.WorldSize()
	width := int64(0)
	for _, f := range next {
		width = max(width, int64(f.p.Table.cfg.Dim))
	}
	// by lookup k and rank j, the ids this owner sends j and where their rows are among ids[k]
	byRank, at := make([][][]int64, len(next)), make([][][]int64, len(next))
	ids := make([][]int64, len(next)) // by lookup, the ids whose rows this owner reads
	for k, f := range next {
		up := changed(f)
		byRank[k], at[k] = make([][]int64, w), make([][]int64, w)
		from := int64(0)
		for j := 0; j < w; j++ {
			for _, id := range f.routed.ids[from : from+f.routed.recv[j]] {
				if _, ok := slices.BinarySearch(up, id); ok {
					byRank[k][j], at[k][j] = append(byRank[k][j], id), append(at[k][j], int64(len(ids[k])))
					ids[k] = append(ids[k], id)
				}
			}
			from += f.routed.recv[j]
		}
	}
	var sent, slot []int64
	send := make([]int64, w)
	for j := 0; j < w; j++ {
		start, base := len(sent), int64(0)
		for k := range next {
			sent, slot = append(sent, int64(len(byRank[k][j]))), append(slot, 0)
			sent = append(sent, byRank[k][j]...)
			for _, i := range at[k][j] {
				slot = append(slot, base+i)
			}
			base += int64(len(ids[k]))
		}
		send[j] = int64(len(sent) - start)
	}
	rows, err := patchRows(next, ids, width)
	if err != nil {
		return err
	}
	defer rows.Close()
	t, err := packRows(sent, slot, rows, width)
	if err != nil {
		return err
	}
	defer t.Close()
	got, recv, err := g.AllToAll(t, send)
	if err != nil {
		return fmt.Errorf("train pipeline: patch: %w", err)
	}
	defer got.Close()
	return unpatch(next, got, recv)
}

// patchRows returns the current rows of ids (by lookup, from its table's shard), each padded
// with zeros to width, concatenated: nil when there are none.
func patchRows(next []*fetched, ids [][]int64, width int64) (out *cgotorch.Tensor, err error) {
	cgotorch.WithScope(func(sc *cgotorch.Scope) {
		var parts []*cgotorch.Tensor
		for k, f := range next {
			if len(ids[k]) == 0 {
				continue
			}
			var rows *cgotorch.Tensor
			if rows, _, err = f.p.Table.shard.ReadIDs(ids[k]); err != nil {
				return
			}
			if d := int64(f.p.Table.cfg.Dim); d < width {
				err = cgotorch.Try(func() {
					rows = cgotorch.Cat([]*cgotorch.Tensor{rows, cgotorch.Zeros([]int64{int64(len(ids[k])), width - d})}, 1)
				})
			}
			parts = append(parts, rows)
		}
		if parts != nil && err == nil {
			if err = cgotorch.Try(func() { out = cgotorch.Cat(parts, 0) }); err == nil {
				sc.Keep(out)
			}
		}
	})
	return out, err
}

// unpatch reads the patch's all-to-all as received (recv[j] rows from rank j) into each
// lookup's patchIDs and patchRows.
func unpatch(next []*fetched, got *cgotorch.Tensor, recv []int64) error {
	all, err := unpackIDs(got)
	if err != nil {
		return err
	}
	data := make([][]int64, len(next)) // by lookup, the rows of got that patch it
	at := int64(0)
	for j := range recv {
		end := at + recv[j]
		for k, f := range next {
			if at >= end {
				return &Error{Op: "train pipeline", Kind: ErrMismatch, Err: fmt.Errorf("rank %d's patch is short", j)}
			}
			n := all[at]
			at++
			for i := at; i < at+n && i < end; i++ {
				f.patchIDs, data[k] = append(f.patchIDs, all[i]), append(data[k], i)
			}
			at += n
		}
		if at != end {
			return &Error{Op: "train pipeline", Kind: ErrMismatch, Err: fmt.Errorf("rank %d's patch does not match the lookups", j)}
		}
	}
	for k, f := range next {
		if len(data[k]) > 0 {
			if f.patchRows, err = unpackRows(got, data[k], int64(f.p.Table.cfg.Dim)); err != nil {
				return err
			}
		}
	}
	return nil
}

// sum is the sum of v.
func sum(v []int64) int64 {
	s := int64(0)
	for _, x := range v {
		s += x
	}
	return s
}
