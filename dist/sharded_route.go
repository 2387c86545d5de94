package dist

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/gorec/gorec/cgotorch"
)

// routed is a batch of ids sent to their owners: what this rank sent, and what it received as
// an owner.
type routed struct {
	perm []int64 // perm[k]: the position in the caller's ids of the k-th id sent
	send []int64 // how many ids went to each rank
	ids  []int64 // the ids this rank received, in rank order
	recv []int64 // how many came from each rank
	// with a counted part: how often the sender's batch held each of ids
	counts []int64
	// with a flagged part (fetchParts): whether each of the caller's ids has a row after the
	// owners' lookup, in the order of the rows it got back
	has []bool
}

// routeKind is what the owners do with the ids of a routed exchange. It is part of every
// block's digest, so that ranks running different operations fail instead of mixing data.
type routeKind int64

const (
	routeLookup routeKind = iota + 1 // insert the absent ids and send their rows back
	routeRead                        // send their rows back, insert nothing
	routeWrite                       // set their rows
	routeGrads                       // sum their gradients per id and step
	routeDelete                      // delete them
)

// A part's entry in a block: how many of its ids follow (the bits above entryBits), whether
// the rank refused its input and whether it has data.
const (
	entryRefused = 1
	entryHas     = 2
	entryBits    = 2
)

// part is one table's share of a routed exchange: its ids (distinct on this rank), the rows
// that travel with them (float32 [len(ids), Dim], or nil), this rank's verdict on its input
// (local: its error, or nil) and whether it has data (has: Step's pending gradients). counted
// (the same on every rank: a training lookup of a table that counts) sends with each id its
// count: how often this rank's batch holds it (counts[i], or 1 when counts is nil). flagged
// (the same on every rank: a training lookup of a table that admits late, counted too) has the
// owners answer with each id's row whether the id has one after their lookup (sharded_kept_out.go).
type part struct {
	t       *ShardedTable
	ids     []int64
	rows    *cgotorch.Tensor
	local   error
	has     bool
	counted bool
	counts  []int64
	flagged bool
}

// arrived is what route gives back for a part: its ids as routed, the rows this rank received
// with them as an owner (in the order of r.ids; nil without rows or on err), whether any rank
// had data, and err: the part's local error itself, or an ErrMismatch naming the ranks that
// refused their input for it (then no shard may change for it).
type arrived struct {
	r      *routed
	rows   *cgotorch.Tensor
	anyHas bool
	err    error
}

// closeArrived frees the rows of every part.
func closeArrived(as []arrived) {
	for _, a := range as {
		a.rows.Close()
	}
}

// route sends every part's ids to their owners in one all-to-all (collective: every rank passes
// parts of the same tables, of one group, in the same order; a table may appear in several
// parts). The block to each rank starts with a digest of the operation (kind), width and the
// parts' tables, then holds for each part its entry and the ids that rank owns. Every rank
// thus learns every verdict before anything changes, without a collective of its own. With
// width > 0 (the widest part's Dim, the same on every rank) the parts' rows travel with their
// ids in the same all-to-all (packRows), zero-padded to width. grads says the ids are
// gradients' (the defect faultWrongOwner moves those). A counted part's ids to a rank are
// followed by their counts. route's own error (a broken group, or a rank running another
// operation or other tables) fails every part, on every rank, before any shard changes.
func route(op string, kind routeKind, parts []part, width int64, grads bool) ([]arrived, error) {
	g := parts[0].t.g
	w := g.WorldSize()
	rs := make([]*routed, len(parts))
	owners := make([][]int, len(parts))
	blocks := make([]int64, w) // per rank: the digest, then each part's entry and ids
	for j := range blocks {
		blocks[j] = 1 + int64(len(parts))
	}
	for k := range parts {
		p := &parts[k]
		if p.local != nil {
			p.ids, p.rows, p.counts = nil, nil, nil
		}
		rs[k] = &routed{send: make([]int64, w), recv: make([]int64, w), perm: make([]int64, len(p.ids))}
		owners[k] = make([]int, len(p.ids))
		for i, id := range p.ids {
			o := Owner(id, w)
			if p.t.fault == faultWrongOwner && grads {
				o = (o + 1) % w
			}
			owners[k][i] = o
			rs[k].send[o]++
			blocks[o] += 1 + boolInt(p.counted)
		}
	}
	digest := routeDigest(kind, parts, width)
	// sent: the blocks in rank order; slot[q]: for an id, its row among the parts' rows stacked
	sent := make([]int64, sum(blocks))
	slot := make([]int64, len(sent))
	first := make([][]int64, len(parts)) // first[k][j]: where part k's ids to rank j start in sent
	for k := range first {
		first[k] = make([]int64, w)
	}
	for j, at := 0, int64(0); j < w; j++ {
		sent[at] = digest
		at++
		for k, p := range parts {
			sent[at] = rs[k].send[j]<<entryBits | boolInt(p.local != nil)*entryRefused | boolInt(p.has)*entryHas
			first[k][j] = at + 1
			at += 1 + rs[k].send[j]*(1+boolInt(p.counted))
		}
	}
	base := int64(0)
	for k, p := range parts {
		next := first[k]
		done := make([]int64, w) // ids placed for each rank
		sentBefore := make([]int64, w)
		for j := 1; j < w; j++ {
			sentBefore[j] = sentBefore[j-1] + rs[k].send[j-1]
		}
		for i, id := range p.ids {
			o := owners[k][i]
			q := next[o] + done[o]
			sent[q], slot[q] = id, base+int64(i)
			if p.counted { // after the ids to rank o
				sent[q+rs[k].send[o]] = countOf(p.counts, i)
			}
			rs[k].perm[sentBefore[o]+done[o]] = int64(i)
			done[o]++
		}
		base += int64(len(p.ids))
	}
	rows, own, err := stackRows(parts, width)
	if err != nil {
		return nil, err
	}
	if own {
		defer rows.Close()
	}
	all, got, recv, err := exchange(g, sent, slot, rows, width, blocks)
	if err != nil {
		return nil, withLocals(fmt.Errorf("%s: %w", tablesOf(parts), err), parts)
	}
	defer got.Close()
	return arrive(op, parts, rs, all, got, recv, digest)
}

// routeDigest is what every block starts with: a hash of the operation, the width and the
// parts' tables (names, dims, whether counted and flagged), which the ranks must share.
func routeDigest(kind routeKind, parts []part, width int64) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d %d", kind, width)
	for _, p := range parts {
		fmt.Fprintf(h, " %q %d", p.t.name, p.t.cfg.Dim)
		if p.counted {
			fmt.Fprint(h, " counted")
		}
		if p.flagged {
			fmt.Fprint(h, " flagged")
		}
	}
	return int64(h.Sum64())
}

// countOf is the count of a part's i-th id: counts[i], or 1 when counts is nil.
func countOf(counts []int64, i int) int64 {
	if counts == nil {
		return 1
	}
	return counts[i]
}

// tablesOf names the parts' tables for an error: `table "a"` or `tables "a", "b"`.
func tablesOf(parts []part) string {
	names := make([]string, len(parts))
	for k, p := range parts {
		names[k] = fmt.Sprintf("%q", p.t.name)
	}
	if len(parts) == 1 {
		return "table " + names[0]
	}
	return "tables " + strings.Join(names, ", ")
}

// withLocals joins err with the parts' local errors (a rank's own refusal stays visible).
func withLocals(err error, parts []part) error {
	errs := []error{err}
	for _, p := range parts {
		errs = append(errs, p.local)
	}
	return errors.Join(errs...)
}

// stackRows returns the rows of the parts that send ids, in order, as one tensor [their ids,
// width], each zero-padded to width, and whether the caller owns it (a part's own rows are
// returned as they are when it is the only one): nil when width is 0 or no part sends rows.
func stackRows(parts []part, width int64) (out *cgotorch.Tensor, own bool, err error) {
	var sending []part
	for _, p := range parts {
		if width > 0 && len(p.ids) > 0 {
			sending = append(sending, p)
		}
	}
	if len(sending) == 0 {
		return nil, false, nil
	}
	if len(sending) == 1 && int64(sending[0].t.cfg.Dim) == width {
		return sending[0].rows, false, nil
	}
	err = cgotorch.Try(func() {
		rows := make([]*cgotorch.Tensor, len(sending))
		for k, p := range sending {
			rows[k] = padded(p.rows, width)
		}
		out = cgotorch.Cat(rows, 0)
		for k, p := range sending {
			if rows[k] != p.rows {
				rows[k].Close()
			}
		}
	})
	return out, err == nil, err
}

// padded returns rows ([n, d]) zero-padded to [n, width]: rows itself when d is width.
func padded(rows *cgotorch.Tensor, width int64) *cgotorch.Tensor {
	sh := rows.Shape()
	if sh[1] == width {
		return rows
	}
	zeros := cgotorch.Zeros([]int64{sh[0], width - sh[1]})
	defer zeros.Close()
	return cgotorch.Cat([]*cgotorch.Tensor{rows, zeros}, 1)
}

// exchange is route's all-to-all of sent (blocks[j] to rank j), with the rows of slot
// (packRows) when width > 0: it returns the integers received, the packed tensor received (nil
// when width is 0) and how many came from each rank.
func exchange(g *Group, sent, slot []int64, rows *cgotorch.Tensor, width int64, blocks []int64) ([]int64, *cgotorch.Tensor, []int64, error) {
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
	got, recv, err := g.AllToAll(t, blocks)
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

// arrive reads the blocks route received (all: their integers, recv[j] from rank j; got: the
// packed rows, or nil) into each part's ids, verdict and rows.
func arrive(op string, parts []part, rs []*routed, all []int64, got *cgotorch.Tensor, recv []int64, digest int64) ([]arrived, error) {
	out := make([]arrived, len(parts))
	refused := make([][]int, len(parts))
	data := make([][]int64, len(parts)) // by part, the rows of got that hold its ids' rows
	for j, at := 0, int64(0); j < len(recv); j++ {
		end := at + recv[j]
		bad := func(why string) error {
			return withLocals(&Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("%s: rank %d %s", tablesOf(parts), j, why)}, parts)
		}
		if recv[j] < 1 || all[at] != digest {
			return nil, bad("runs another operation or other tables (every rank must run the same, in the same order)")
		}
		at++
		for k, p := range parts {
			words := 1 + boolInt(p.counted) // an id's: the id, and its count when counted
			if at >= end || all[at] < 0 || at+1+(all[at]>>entryBits)*words > end {
				return nil, bad("sent a block that does not match its parts")
			}
			e, n := all[at], all[at]>>entryBits
			size := n * words
			if e&entryRefused != 0 {
				refused[k] = append(refused[k], j)
			}
			out[k].anyHas = out[k].anyHas || e&entryHas != 0
			rs[k].recv[j] = n
			rs[k].ids = append(rs[k].ids, all[at+1:at+1+n]...)
			if p.counted {
				rs[k].counts = append(rs[k].counts, all[at+1+n:at+1+size]...)
			}
			for q := at + 1; got != nil && q < at+1+n; q++ {
				data[k] = append(data[k], q)
			}
			at += 1 + size
		}
		if at != end {
			return nil, bad("sent a block that does not match its parts")
		}
	}
	for k, p := range parts {
		out[k].r = rs[k]
		switch {
		case p.local != nil:
			out[k].err = p.local
		case refused[k] != nil:
			out[k].err = &Error{Op: op, Kind: ErrMismatch, Err: fmt.Errorf("table %q: rank(s) %v refused their input; no shard changed", p.t.name, refused[k])}
		}
		if out[k].err != nil || got == nil {
			continue
		}
		var err error
		if out[k].rows, err = unpackRows(got, data[k], int64(p.t.cfg.Dim)); err != nil {
			closeArrived(out)
			return nil, err
		}
	}
	return out, nil
}

// route1 is route of one table's ids for a Write (its rows travel with them) or a Delete: the
// routed ids, the rows this rank received as an owner, and the error (the exchange's, or the
// part's).
func (s *ShardedTable) route1(op string, kind routeKind, ids []int64, rows *cgotorch.Tensor, local error) (*routed, *cgotorch.Tensor, error) {
	width := int64(0) // a write's rows travel with its ids (on every rank, refused or not)
	if kind == routeWrite {
		width = int64(s.cfg.Dim)
	}
	as, err := route(op, kind, []part{{t: s, ids: ids, rows: rows, local: local}}, width, false)
	if err != nil {
		return nil, nil, err
	}
	return as[0].r, as[0].rows, as[0].err
}
