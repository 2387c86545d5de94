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
//     every shard: the ranks find the (n+1)-th row's rank in 16 small all-reduces, and each
//     shard removes the rows ranked there or below. (A sharded row's frequency counts each rank's lookups of
//     it once per batch, not each occurrence.)
//   - MemoryBudget(bytes): bounds each rank's shard, as a process's memory: each shard keeps its
//     most recently seen rows that fit bytes, and compacts.
//
// ctx is checked on every rank, with the ranks' policies and shards, before any shard changes:
// a rank whose ctx is done, or whose policy differs, fails the call on every rank and nothing is
// removed. Once agreed, the eviction runs to its end. Evict between training steps: a
// TrainPipeline's rows fetched for a batch it has not trained yet would lose their ids (Flush it
// first).
func (s *ShardedTable) Evict(ctx context.Context, p embedding.EvictPolicy, rows bool) (*embedding.Evicted, int, error) {
	const op = "evict"
	n, byFreq, ranked := p.Keeps()
	var meta shardRows
	local := ctx.Err()
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

// byteAt is byte i of the key, from the most significant (0) to the least (15).
func (a key128) byteAt(i int) uint8 { return uint8(a[i/8] >> (56 - 8*(i%8))) }

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

// rankedCut finds the (n+1)-th largest key over every rank's keys (collective), the largest
// to evict, byte by byte from the most significant: each round all-reduces how many of the keys
// still in the running have each value of the next byte. It returns that key, or none when the
// ranks hold n keys or fewer (nothing to evict).
func (s *ShardedTable) rankedCut(op string, keys []key128, n int64) (cut key128, none bool, err error) {
	hist := make([]int64, 257) // the counts of the next byte's values, then the number of keys
	hist[256] = int64(len(keys))
	in := keys    // those equal to cut in the bytes found so far
	need := n + 1 // the rank of the first key to evict: the (n+1)-th largest
	for i := 0; i < 16; i++ {
		if i > 0 {
			clear(hist)
		}
		for _, k := range in {
			hist[k.byteAt(i)]++
		}
		sum, err := s.sumInt64s(op, hist)
		if err != nil {
			return cut, false, err
		}
		if i == 0 && sum[256] <= n {
			return cut, true, nil
		}
		b := 255
		for ; b > 0 && need > sum[b]; b-- {
			need -= sum[b]
		}
		cut[i/8] |= uint64(b) << (56 - 8*(i%8))
		kept := in[:0] // in place, but for the caller's keys
		if i == 0 {
			kept = nil
		}
		for _, k := range in {
			if k.byteAt(i) == uint8(b) {
				kept = append(kept, k)
			}
		}
		in = kept
	}
	return cut, false, nil
}
