package dist

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/gorec/gorec/embedding"
)

// Evict removes the rows p selects from the table (collective: every rank passes the same
// policy) and returns those this rank's shard removed (ids ascending and rows; with rows false,
// their count alone, as embedding.Table.Evict), and how many the whole table removed. The table
// needs Config.TrackAccess.
//
//   - TTL(steps): every shard removes its rows not seen during the last steps steps, as one
//     table would: the shards step together, so a row's age is the same.
//   - KeepRecent(n), KeepFrequent(n): the table keeps n rows, ranked by embedding's rule across
//     every shard: the ranks find the (n+1)-th row's rank in at most 16 small all-reduces (fewer
//     where the rows share bytes of their rank: last steps, frequencies, high bytes of ids), and
//     each shard removes the rows ranked there or below. A row's frequency is one table's:
//     every occurrence in every rank's training lookups counts.
//   - MemoryBudget(bytes): bounds each rank's shard, as a process's memory: each shard keeps its
//     most recently seen rows that fit bytes, and compacts.
//
// ctx is checked on every rank, with the ranks' policies and shards, before any shard changes:
// a rank whose ctx is done, or whose policy differs, fails the call on every rank and nothing is
// removed. Once agreed, the eviction runs to its end. Evict between training steps: while a
// TrainPipeline holds rows fetched for a batch it has not trained yet, Evict fails on every
// rank (ErrBadInput here) and removes nothing (Flush the pipeline first), as Write and Delete
// do.
func (s *ShardedTable) Evict(ctx context.Context, p embedding.EvictPolicy, rows bool) (*embedding.Evicted, int, error) {
	const op = "evict"
	n, byFreq, ranked := p.Keeps()
	var meta shardRows
	local := ctx.Err()
	if local == nil {
		local = s.heldRows(op)
	}
	if local == nil && ranked {
		if n < 0 {
			local = s.badInput(op, "%v keeps a negative number of rows", p)
		} else {
			meta, local = s.shardRows(byFreq)
		}
	}
	if local != nil {
		local = fmt.Errorf("table %q: %s: %w", s.name, op, local)
	}
	h := fnv.New64a()
	h.Write([]byte(p.String()))
	if err := s.agree(op, local, int64(h.Sum64()), fmt.Sprint("policy (this rank's: ", p, ")")); err != nil {
		return nil, 0, err
	}
	ctx = context.WithoutCancel(ctx) // agreed: it runs to its end on every rank
	var out *embedding.Evicted
	var err error
	if !ranked {
		out, err = s.shard.Evict(ctx, p, rows)
	} else {
		var ids, last, freq []int64 // the rows to evict: none when the table holds n or fewer
		var cut key128
		var none bool
		if cut, none, err = s.rankedCut(op, meta.keys, n); err == nil {
			if !none {
				ids, last, freq = meta.atOrBelow(cut)
			}
			out, err = s.shard.EvictUnchanged(ctx, ids, last, freq)
		}
		if err == nil && !rows { // as embedding.Table.Evict: the count alone
			out.Close()
			out.IDs, out.Rows = nil, nil
		}
	}
	count := 0
	if out != nil {
		count = out.N
	}
	total, err := s.settleCount(op, err, count)
	if err != nil {
		out.Close()
		return nil, 0, err
	}
	return out, total, nil
}

// Compact compacts every shard (embedding.Table.Compact; collective).
func (s *ShardedTable) Compact() error {
	_, err := s.settleCount("compact", s.shard.Compact(), 0)
	return err
}

// key128 ranks a row for KeepRecent and KeepFrequent, its high word first: the larger key is
// kept first.
type key128 [2]uint64

func (a key128) less(b key128) bool { return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1]) }

// bytePos is where byte i of a key is, from the most significant (0) to the least (15): the
// byte is uint8(a[w] >> shift).
func bytePos(i int) (w, shift int) { return i / 8, 56 - 8*(i%8) }

// keyOf is a row's key: its last step, then its frequency (the other way round byFreq), then
// the smaller id first. Both are kept in 32 bits by the table.
func keyOf(id, last, freq int64, byFreq bool) key128 {
	clamp := func(v int64) uint64 { return uint64(min(max(v, 0), math.MaxUint32)) }
	first, second := clamp(last), clamp(freq)
	if byFreq {
		first, second = second, first
	}
	return key128{first<<32 | second, ^(uint64(id) ^ 1<<63)}
}

// shardRows is the metadata of this rank's shard (in no order), with each row's key.
type shardRows struct {
	ids, last, freq []int64
	keys            []key128
}

// shardRows reads the metadata of this rank's shard.
func (s *ShardedTable) shardRows(byFreq bool) (shardRows, error) {
	var r shardRows
	var err error
	if r.ids, r.last, r.freq, err = s.shard.MetadataUnsorted(); err != nil {
		return r, err
	}
	r.keys = make([]key128, len(r.ids))
	for i, id := range r.ids {
		r.keys[i] = keyOf(id, r.last[i], r.freq[i], byFreq)
	}
	return r, nil
}

// atOrBelow returns the rows whose key is at or below cut, with the metadata they were read
// with (embedding.Table.EvictUnchanged's arguments).
func (r shardRows) atOrBelow(cut key128) (ids, last, freq []int64) {
	for i, k := range r.keys {
		if !cut.less(k) {
			ids, last, freq = append(ids, r.ids[i]), append(last, r.last[i]), append(freq, r.freq[i])
		}
	}
	return ids, last, freq
}

// The layout of a rank's part in a round of rankedCut, int64s summed over the ranks: for its keys
// in the running, how many have each value of the round's byte ([0, 256)), how many there are
// (cutKeys), and for each bit of the key, the most significant first, 1 if every one of them has
// it (also when there are none: [cutAll, cutAll+128)) and 1 if any has it ([cutAny, cutAny+128)).
const (
	cutKeys = 256
	cutAll  = cutKeys + 1
	cutAny  = cutAll + 128
	cutLen  = cutAny + 128
)

// rankedCut finds the (n+1)-th largest key over every rank's keys (collective), the largest
// to evict, byte by byte from the most significant: each round all-reduces how many of the keys
// still in the running (those equal to the cut in the bytes found so far) have each value of the
// next byte, with which bits all of them have and which none has, so that the bytes they all
// share are taken without a round of their own (a table's last steps and frequencies, or its
// ids' high bytes, are often the same for most rows). A rank reads its keys in the running once
// a round. It returns that key, or none when the ranks hold n keys or fewer (nothing to evict).
func (s *ShardedTable) rankedCut(op string, keys []key128, n int64) (cut key128, none bool, err error) {
	return rankedCut(keys, n, int64(s.g.WorldSize()), func(v []int64) ([]int64, error) { return s.sumInt64s(op, v) })
}

// rankedCut is ShardedTable.rankedCut over world ranks, reduce summing their vectors.
func rankedCut(keys []key128, n, world int64, reduce func([]int64) ([]int64, error)) (cut key128, none bool, err error) {
	r := cutRun{in: keys, msg: make([]int64, cutLen)}
	r.narrow(-1, 0, 0)
	need := n + 1 // the rank of the first key to evict: the (n+1)-th largest
	for at := 0; at < 16; {
		sum, err := reduce(r.msg)
		if err != nil {
			return cut, false, err
		}
		if at == 0 && sum[cutKeys] <= n {
			return cut, true, nil
		}
		b := 255
		for ; b > 0 && need > sum[b]; b-- {
			need -= sum[b]
		}
		cut.setByte(at, uint8(b))
		next := at + 1
		for ; next < 16; next++ { // the bytes that every key in the running shares
			v, shared := sharedByte(sum, world, next)
			if !shared {
				break
			}
			cut.setByte(next, v)
		}
		if next < 16 {
			r.narrow(at, uint8(b), next)
		}
		at = next
	}
	return cut, false, nil
}

// setByte sets byte i of the key to v; it was 0.
func (a *key128) setByte(i int, v uint8) {
	w, shift := bytePos(i)
	a[w] |= uint64(v) << shift
}

// sharedByte returns byte i of the keys in the running of a round whose sums are sum, if every
// one of them, on every rank, has the same.
func sharedByte(sum []int64, world int64, i int) (v uint8, shared bool) {
	for j := 8 * i; j < 8*i+8; j++ {
		all, some := sum[cutAll+j] == world, sum[cutAny+j] > 0
		if !all && some {
			return 0, false
		}
		v <<= 1
		if all {
			v |= 1
		}
	}
	return v, true
}

// cutRun is a rank's side of rankedCut.
type cutRun struct {
	in  []key128 // its keys in the running
	own bool     // in is rankedCut's copy (narrowed in place), not the caller's keys
	msg []int64  // its part of the next round
}

// narrow keeps the keys in the running whose byte at is b (all of them when at < 0) and puts
// their part of the next round, at byte next, in msg.
func (r *cutRun) narrow(at int, b uint8, next int) {
	if at >= 0 && r.msg[b] < int64(len(r.in)) { // (msg: the last round's, at byte at)
		out := r.in[:0]
		if !r.own {
			out, r.own = make([]key128, 0, r.msg[b]), true
		}
		w, shift := bytePos(at)
		for i := range r.in {
			if uint8(r.in[i][w]>>shift) == b {
				out = append(out, r.in[i])
			}
		}
		r.in = out
	}
	// 4 counts a value, taken in turn, so that keys of one value in a row do not each wait for
	// the last one's count
	var h [4][256]int64
	and, or := key128{math.MaxUint64, math.MaxUint64}, key128{}
	w, shift := bytePos(next)
	in := r.in
	for len(in) >= 4 {
		h[0][uint8(in[0][w]>>shift)]++
		h[1][uint8(in[1][w]>>shift)]++
		h[2][uint8(in[2][w]>>shift)]++
		h[3][uint8(in[3][w]>>shift)]++
		for _, k := range in[:4] {
			and[0], and[1], or[0], or[1] = and[0]&k[0], and[1]&k[1], or[0]|k[0], or[1]|k[1]
		}
		in = in[4:]
	}
	for _, k := range in {
		h[0][uint8(k[w]>>shift)]++
		and[0], and[1], or[0], or[1] = and[0]&k[0], and[1]&k[1], or[0]|k[0], or[1]|k[1]
	}
	for v := range 256 {
		r.msg[v] = h[0][v] + h[1][v] + h[2][v] + h[3][v]
	}
	r.msg[cutKeys] = int64(len(r.in))
	for j := range 128 {
		r.msg[cutAll+j], r.msg[cutAny+j] = int64(and.bit(j)), int64(or.bit(j))
	}
}

// bit is bit j of the key, from the most significant (0) to the least (127).
func (a key128) bit(j int) uint64 { return (a[j/64] >> (63 - j%64)) & 1 }
