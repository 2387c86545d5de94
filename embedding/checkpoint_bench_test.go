package embedding_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorec/gorec/embedding"
)

// BenchmarkCheckpoint: saving and loading a table of 10M rows of dim 16 with Adagrad (rows and
// states: 1.28 GB; the file with ids and metadata: 1.6 GB), in MB/s of the file, next to
// SequentialWrite, the same number of bytes written to a file with plain 8 MiB writes and an
// fsync: the ceiling of the disk. Save and SaveStaged (SaveOptions.Staged): stall-ms/op is the
// longest one update of one id by another goroutine waited during the save. GOREC_CKPT_ROWS
// changes the row count.
func BenchmarkCheckpoint(b *testing.B) {
	rows := envRows("GOREC_CKPT_ROWS", 10_000_000)
	const dim = 16
	cfg := embedding.Config{Dim: dim, Optimizer: embedding.Adagrad{}, Capacity: rows}
	tbl := emptyBenchTable(b, "bench-checkpoint", cfg)
	inChunks(rows, func(i int) int64 { return int64(i)*7919 + 1 }, func(ids []int64) {
		n := len(ids)
		d := &embedding.Delta{IDs: ids, Rows: make([]float32, n*dim), States: [][]float32{make([]float32, n*dim)}, Meta: make([]int64, 3*n)}
		for i := range d.Rows {
			d.Rows[i] = float32(i%1000) * 1e-3
			d.States[0][i] = float32(i % 7)
		}
		if err := tbl.ApplyDelta(d); err != nil {
			b.Fatal(err)
		}
	})
	dir := b.TempDir()
	var size int64
	update := func() { // (a zero gradient: the rows stay as they are)
		if err := tbl.UpdateIDs([]int64{1}, make([]float32, dim)); err != nil {
			b.Error(err)
		}
	}
	for _, staged := range []bool{false, true} {
		name := map[bool]string{false: "Save", true: "SaveStaged"}[staged]
		b.Run(suffix(name, rows), func(b *testing.B) {
			var extra int64
			var stall time.Duration
			for i := 0; i < b.N; i++ {
				start := rss()
				peak := peakRSS(func() {
					stall = max(stall, longestWait(update, func() {
						if err := embedding.SaveWithOptions(context.Background(), dir, []*embedding.Table{tbl}, embedding.SaveOptions{Staged: staged}); err != nil {
							b.Fatal(err)
						}
					}))
				})
				extra = max(extra, peak-start)
			}
			b.ReportMetric(float64(extra)/(1<<20), "MBrss/op")
			b.ReportMetric(float64(stall.Microseconds())/1000, "stall-ms/op")
			m, _ := filepath.Glob(filepath.Join(dir, "g*.t0.safetensors"))
			fi, err := os.Stat(m[0])
			if err != nil {
				b.Fatal(err)
			}
			size = fi.Size()
			b.SetBytes(size)
		})
	}
	b.Run(suffix("SequentialWrite", rows), func(b *testing.B) {
		buf := make([]byte, 8<<20)
		for i := range buf {
			buf[i] = byte(i)
		}
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			f, err := os.Create(filepath.Join(dir, "sequential"))
			if err != nil {
				b.Fatal(err)
			}
			for left := size; left > 0; left -= int64(len(buf)) {
				if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			f.Close()
			os.Remove(f.Name())
		}
	})
	tbl.Close() // one table of this size in memory at a time
	b.Run(suffix("Load", rows), func(b *testing.B) {
		b.SetBytes(size)
		var extra int64
		for i := 0; i < b.N; i++ {
			var ts []*embedding.Table
			peak := peakRSS(func() {
				var err error
				if ts, err = embedding.Load(context.Background(), dir); err != nil {
					b.Fatal(err)
				}
			})
			extra = max(extra, peak-rss()) // above the loaded table's own memory
			if ts[0].Len() != rows {
				b.Fatalf("loaded %d rows", ts[0].Len())
			}
			ts[0].Close()
		}
		b.ReportMetric(float64(extra)/(1<<20), "MBrss/op")
	})
}

// envRows is the row count the environment variable name gives, or def.
// emptyBenchTable creates a benchmark's table; it is closed when the benchmark ends.
func emptyBenchTable(b *testing.B, name string, cfg embedding.Config) *embedding.Table {
	tbl, err := embedding.NewNamed(name, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tbl.Close() })
	return tbl
}

// inChunks calls f with the ids id(0), ..., id(rows-1) in slices of at most 1M.
func inChunks(rows int, id func(int) int64, f func(ids []int64)) {
	const chunk = 1 << 20
	for off := 0; off < rows; off += chunk {
		ids := make([]int64, min(chunk, rows-off))
		for i := range ids {
			ids[i] = id(off + i)
		}
		f(ids)
	}
}

func envRows(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func suffix(s string, rows int) string {
	if rows%1_000_000 == 0 {
		return s + strconv.Itoa(rows/1_000_000) + "M"
	}
	return s + strconv.Itoa(rows)
}

// rss is the process's resident set size in bytes (Linux).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res int64
	fmt.Sscan(string(b), &size, &res)
	return res * int64(os.Getpagesize())
}

// peakRSS runs f while sampling the resident size and returns its peak: what a save or load
// costs on top of the table (MBrss/op: the peak above the resident size with the table alone).
func peakRSS(f func()) int64 {
	var peak atomic.Int64
	peak.Store(rss())
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if r := rss(); r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()
	f()
	close(done)
	<-stopped
	return peak.Load()
}
