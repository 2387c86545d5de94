package embedding_test

import (
	"context"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// BenchmarkEvict: eviction of about 1% of a table of 4M rows of dim 16 with access tracking,
// whose rows were last seen at one of 1,000 steps, 0 to 99 times (ties on both, broken by
// id): keep-N (KeepRecent, KeepFrequent), by age (TTL) and to 99% of the table's bytes
// (MemoryBudget: recency, then compaction in the same exclusive section). ns/row is per row of
// the table.
// stall-ms/op: the longest that one read of one id, repeated by another goroutine meanwhile, took
// (the part of the eviction that holds the lock exclusively, plus scheduling). MBrss/op: the
// peak resident size above the table's. The evicted rows are put back between runs, outside
// the timer. GOREC_EVICT_ROWS changes the row count.
func BenchmarkEvict(b *testing.B) {
	rows := envRows("GOREC_EVICT_ROWS", 4_000_000)
	const dim, step = 16, 1000
	cfg := embedding.Config{Dim: dim, Optimizer: embedding.SGD{LR: 0.1}, Capacity: rows, TrackAccess: true}
	tbl := emptyBenchTable(b, "bench-evict", cfg)
	id := func(i int) int64 { return int64(i)*7919 + 1 }
	// put inserts ids with their metadata, a function of the id; returns how many are older
	// than ttl steps
	const ttl = step - 11
	put := func(ids []int64) (old int) {
		d := &embedding.Delta{IDs: ids, Rows: make([]float32, len(ids)*dim), Meta: make([]int64, 3*len(ids)), Step: step}
		for i, x := range ids {
			h := uint64(x) * 0x9e3779b97f4a7c15
			d.Meta[3*i], d.Meta[3*i+1] = int64(h>>40)%step, int64(h>>20)%100
			if step-d.Meta[3*i] > ttl {
				old++
			}
		}
		if err := tbl.ApplyDelta(d); err != nil {
			b.Fatal(err)
		}
		return old
	}
	old := 0
	inChunks(rows, id, func(ids []int64) { old += put(ids) })
	keep := rows - rows/100
	st, err := tbl.Stats()
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []struct {
		name   string
		policy embedding.EvictPolicy
		keep   int // -1: any
	}{
		{"KeepRecent", embedding.KeepRecent(keep), keep},
		{"KeepFrequent", embedding.KeepFrequent(keep), keep},
		{"TTL", embedding.TTL(ttl), rows - old},
		{"MemoryBudget", embedding.MemoryBudget(st.Bytes - st.Bytes/100), -1}, // and compaction
	} {
		b.Run(suffix(p.name, rows), func(b *testing.B) {
			var extra int64
			var stall time.Duration
			for i := 0; i < b.N; i++ {
				var ev *embedding.Evicted
				start := rss()
				b.StartTimer()
				var wait time.Duration
				peak := peakRSS(func() {
					wait = longestRead(tbl, id(0), func() {
						var err error
						if ev, err = tbl.Evict(context.Background(), p.policy, true); err != nil {
							b.Fatal(err)
						}
					})
				})
				b.StopTimer()
				extra = max(extra, peak-start)
				stall = max(stall, wait)
				if ev.N+tbl.Len() != rows || p.keep >= 0 && tbl.Len() != p.keep {
					b.Fatalf("evicted %d, %d rows left; want %d and %d", ev.N, tbl.Len(), rows-p.keep, p.keep)
				}
				gone, err := cgotorch.ToSlice[int64](ev.IDs)
				if err != nil {
					b.Fatal(err)
				}
				ev.Close()
				put(gone)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
			b.ReportMetric(float64(extra)/(1<<20), "MBrss/op")
			b.ReportMetric(float64(stall.Microseconds())/1000, "stall-ms/op")
		})
	}
}

// longestRead runs f while another goroutine reads id from tbl over and over, and returns the
// longest a read took: how long f kept readers out.
func longestRead(tbl *embedding.Table, id int64, f func()) time.Duration {
	return longestWait(func() {
		if r, _, err := tbl.ReadIDs([]int64{id}); err == nil {
			r.Close()
		}
	}, f)
}

// longestWait runs f while another goroutine calls op over and over, and returns the longest
// one call of op took.
func longestWait(op, f func()) time.Duration {
	done := make(chan struct{})
	longest := make(chan time.Duration)
	go func() {
		var m time.Duration
		for {
			select {
			case <-done:
				longest <- m
				return
			default:
			}
			start := time.Now()
			op()
			m = max(m, time.Since(start))
		}
	}()
	f()
	close(done)
	return <-longest
}

// BenchmarkCompact: compaction of a table of 4M rows of dim 16 (SGD with momentum: a state
// and a step stamp a row) after 1% of its ids, spread over the whole table, were deleted; the
// deleted ids are inserted again between runs, outside the timer (they take the rows after the
// last). stall-ms/op: the longest one read of one id by another goroutine waited (compaction
// holds the table's lock exclusively). MBrss/op: the peak resident size above the table's.
// GOREC_COMPACT_ROWS changes the row count.
func BenchmarkCompact(b *testing.B) {
	rows := envRows("GOREC_COMPACT_ROWS", 4_000_000)
	const dim = 16
	cfg := embedding.Config{Dim: dim, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}, Capacity: rows}
	tbl := emptyBenchTable(b, "bench-compact", cfg)
	id := func(i int) int64 { return int64(i)*7919 + 1 }
	insert := func(ids []int64) {
		r, err := tbl.LookupIDs(ids)
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
	inChunks(rows, id, insert)
	b.Run(suffix("OnePercent", rows), func(b *testing.B) {
		var extra int64
		var stall time.Duration
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			gone := make([]int64, 0, rows/100)
			for k := i % 100; k < rows; k += 100 {
				gone = append(gone, id(k))
			}
			if _, err := tbl.DeleteIDs(gone); err != nil {
				b.Fatal(err)
			}
			var wait time.Duration
			start := rss()
			b.StartTimer()
			peak := peakRSS(func() {
				wait = longestRead(tbl, id(1), func() {
					if err := tbl.Compact(); err != nil {
						b.Fatal(err)
					}
				})
			})
			b.StopTimer()
			extra = max(extra, peak-start)
			stall = max(stall, wait)
			if tbl.Len() != rows-len(gone) {
				b.Fatalf("%d rows after compaction, want %d", tbl.Len(), rows-len(gone))
			}
			insert(gone)
		}
		b.ReportMetric(float64(extra)/(1<<20), "MBrss/op")
		b.ReportMetric(float64(stall.Microseconds())/1000, "stall-ms/op")
	})
}

// BenchmarkExport: Export (ids ascending, rows, Adagrad's state) and Metadata (ids ascending,
// last steps, frequencies) of a table of 4M random 64-bit ids at dim 16 with access tracking.
// Both order their output by id, which is where their sort lies (ns/row: per row of the table).
// GOREC_EXPORT_ROWS changes the row count.
func BenchmarkExport(b *testing.B) {
	rows := envRows("GOREC_EXPORT_ROWS", 4_000_000)
	cfg := embedding.Config{Dim: 16, Optimizer: embedding.Adagrad{LR: 0.1}, Capacity: rows, TrackAccess: true}
	tbl := emptyBenchTable(b, "bench-export", cfg)
	inChunks(rows, func(i int) int64 { return int64(uint64(i+1) * 0x9E3779B97F4A7C15) }, func(ids []int64) {
		if _, err := tbl.IndicesIDs(ids, true); err != nil {
			b.Fatal(err)
		}
	})
	run := func(name string, f func() int) {
		b.Run(suffix(name, rows), func(b *testing.B) {
			var extra int64
			for i := 0; i < b.N; i++ {
				start := rss()
				peak := peakRSS(func() {
					if n := f(); n != rows {
						b.Fatalf("%d ids, want %d", n, rows)
					}
				})
				extra = max(extra, peak-start)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
			b.ReportMetric(float64(extra)/(1<<20), "MBrss/op")
		})
	}
	run("Export", func() int {
		s, err := tbl.Export()
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		return int(s.IDs.Shape()[0])
	})
	run("ExportEach", func() int { // chunks of 64K rows, each summed (as a consumer would read it)
		n := 0
		var sum float32
		if err := tbl.ExportEach(context.Background(), 1<<16, func(c *embedding.ExportChunk) error {
			n += len(c.IDs)
			for _, v := range c.Rows {
				sum += v
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if sum != sum {
			b.Fatal("a row is NaN")
		}
		return n
	})
	run("Metadata", func() int {
		ids, _, _, err := tbl.Metadata()
		if err != nil {
			b.Fatal(err)
		}
		return len(ids)
	})
}
