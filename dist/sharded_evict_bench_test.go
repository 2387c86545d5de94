package dist

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

func init() { scenarios["evict-bench"] = scenarioEvictBench }

// evictBenchRows is the table's size in the eviction benchmark, over all ranks.
const evictBenchRows = 1 << 20

// scenarioEvictBench times, interleaved on 2 ranks over a table of evictBenchRows rows
// (Dim 16, TrackAccess), a KeepRecent eviction of the whole table that removes its 1,024 least
// recent rows (the global selection), and each shard's own KeepRecent eviction of its 1024/w
// least recent rows (the local form, no ranking across shards); each writes the removed ids back
// after, so the table keeps its size. Rank 0 prints both times.
func scenarioEvictBench(o Options) error {
	g, n, err := benchGroup(o, "GOREC_DIST_BENCH_N")
	if err != nil {
		return err
	}
	defer g.Close()
	const dim = 16
	st, err := NewShardedTable(g, "evict-bench", embedding.Config{Dim: dim, TrackAccess: true, Optimizer: embedding.Adagrad{}})
	if err != nil {
		return err
	}
	defer st.Close()
	w := g.WorldSize()
	per := evictBenchRows / w
	ids := make([]int64, per)
	for k := range ids {
		ids[k] = int64(k*w+g.Rank()) * 7919
	}
	if _, err := st.Lookup(cgotorch.MustFromSlice(ids)); err != nil { // training lookups: metadata
		return err
	}
	mine := st.shard.Len() // this shard's rows (ownership by hash: about per)
	ctx := context.Background()
	refill := func(ev *embedding.Evicted) error { // this shard's removed ids, written back
		defer ev.Close()
		back, err := cgotorch.ToSlice[int64](ev.IDs)
		if err != nil {
			return err
		}
		return st.shard.WriteIDs(back, make([]float32, len(back)*dim))
	}
	global := func() error {
		ev, _, err := st.Evict(ctx, embedding.KeepRecent(evictBenchRows-1024), true)
		if err != nil {
			return err
		}
		return refill(ev)
	}
	local := func() error {
		ev, err := st.shard.Evict(ctx, embedding.KeepRecent(mine-1024/w), true)
		if err != nil {
			return err
		}
		return refill(ev)
	}
	took, calls, err := interleaved(n, global, local)
	if err != nil {
		return err
	}
	if g.Rank() == 0 {
		fmt.Printf("bench-ns-per-op %d\nlocal-ns-per-op %d\n", took[0].Nanoseconds()/calls, took[1].Nanoseconds()/calls)
	}
	return nil
}

// BenchmarkShardedEvict times a KeepRecent eviction of a sharded table of 1M rows on 2 local
// ranks, which ranks the rows of both shards together (ns/op), interleaved with each shard's
// own eviction of as many rows (local-ns/op: no ranking across the shards), and their ratio
// (x-local).
func BenchmarkShardedEvict(b *testing.B) {
	n := max(b.N, 20)
	out := rankOutput(b, "evict-bench", 2, 2*time.Minute, []string{"GOREC_DIST_BENCH_N=" + strconv.Itoa(n)})
	global, local := benchNs(b, out, "bench-ns-per-op "), benchNs(b, out, "local-ns-per-op ")
	b.ReportMetric(global, "ns/op")
	b.ReportMetric(local, "local-ns/op")
	b.ReportMetric(global/local, "x-local")
}
