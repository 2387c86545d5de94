package embedding_test

import (
	"testing"
	"time"

	"github.com/gorec/gorec/embedding"
)

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
	tbl, err := embedding.New("bench-compact", cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer tbl.Close()
	id := func(i int) int64 { return int64(i)*7919 + 1 }
	insert := func(ids []int64) {
		r, err := tbl.LookupIDs(ids)
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
	const chunk = 1 << 20
	for off := 0; off < rows; off += chunk {
		ids := make([]int64, min(chunk, rows-off))
		for i := range ids {
			ids[i] = id(off + i)
		}
		insert(ids)
	}
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
