package embedding_test

import (
	"math/rand"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// Benchmarks: lookup and update throughput, and the row layouts compared for Adam on random
// rows. Each reports rows/s (rows of a batch processed per second).
//
//	go test -run '^$' -bench . ./embedding/

const (
	benchDim   = 64
	benchBatch = 4096
)

// benchTable makes a table holding ids 0..n-1 (inserted in batches).
func benchTable(b *testing.B, name string, cfg embedding.Config, n int) *embedding.Table {
	b.Helper()
	cfg.Capacity = n
	tbl := emptyBenchTable(b, name, cfg)
	inChunks(n, func(i int) int64 { return int64(i) }, func(ids []int64) {
		r, err := tbl.LookupIDs(ids)
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	})
	return tbl
}

// batches makes k batches of random ids below n (unique within a batch when unique is set) and
// their gradients.
func batches(b *testing.B, k, n int, unique bool) (ids, grads []*cgotorch.Tensor) {
	rng := rand.New(rand.NewSource(1))
	g := make([]float32, benchBatch*benchDim)
	for i := range g {
		g[i] = rng.Float32() - 0.5
	}
	for j := 0; j < k; j++ {
		var v []int64
		if unique {
			for _, x := range rng.Perm(n)[:benchBatch] {
				v = append(v, int64(x))
			}
		} else {
			for i := 0; i < benchBatch; i++ {
				v = append(v, rng.Int63n(int64(n)))
			}
		}
		kt, _ := cgotorch.FromSlice(v)
		gt, _ := cgotorch.FromSlice(g, benchBatch, benchDim)
		ids = append(ids, kt)
		grads = append(grads, gt)
	}
	b.Cleanup(func() {
		for i := range ids {
			ids[i].Close()
			grads[i].Close()
		}
	})
	return ids, grads
}

func BenchmarkLookup(b *testing.B) {
	const n = 1 << 17
	tbl := benchTable(b, b.Name(), embedding.Config{Dim: benchDim}, n)
	ids, _ := batches(b, 16, n, false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := tbl.Lookup(ids[i%len(ids)])
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
	b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkLookupInsert(b *testing.B) {
	tbl := benchTable(b, b.Name(), embedding.Config{Dim: benchDim}, 0)
	next := int64(0)
	v := make([]int64, benchBatch)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range v {
			v[j] = next * 7919
			next++
		}
		k, _ := cgotorch.FromSlice(v)
		b.StartTimer()
		r, err := tbl.Lookup(k)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		r.Close()
		if _, err := tbl.Delete(k); err != nil { // keep the table small; indices are reused
			b.Fatal(err)
		}
		k.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkUpdate(b *testing.B) {
	const n = 1 << 17
	for _, c := range []struct {
		name string
		opt  embedding.Optimizer
	}{
		{"SGD", embedding.SGD{LR: 0.01}},
		{"Adagrad", embedding.Adagrad{}},
		{"SparseAdam", embedding.SparseAdam{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tbl := benchTable(b, b.Name(), embedding.Config{Dim: benchDim, Optimizer: c.opt}, n)
			ids, grads := batches(b, 16, n, false)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := tbl.Update(ids[i%len(ids)], grads[i%len(ids)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkLayout compares the two row layouts on random rows of tables much larger than the
// caches (256K rows x 64 floats x 3 slots = 192 MiB each): "adam" is one SparseAdam step on 4096
// distinct random rows, "lookup" a lookup of 4096 random ids. Every iteration runs the batch on
// both tables, alternating, so that both see the same machine load; the metrics are the mean
// milliseconds per batch of each layout and the speed-up of separate over interleaved.
func BenchmarkLayout(b *testing.B) {
	const n = 1 << 18
	for _, op := range []string{"adam", "lookup"} {
		b.Run(op, func(b *testing.B) {
			var tables [2]*embedding.Table
			for i, layout := range []embedding.Layout{embedding.Separate, embedding.Interleaved} {
				tables[i] = benchTable(b, b.Name()+"/"+strconv.Itoa(int(layout)), embedding.Config{
					Dim: benchDim, Optimizer: embedding.SparseAdam{}, Layout: layout, Initializer: embedding.Zeros{}}, n)
			}
			ids, grads := batches(b, 32, n, op == "adam")
			var spent [2]time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := 0; j < 2; j++ {
					l := (i + j) % 2 // alternate which layout goes first
					start := time.Now()
					if op == "adam" {
						if err := tables[l].Update(ids[i%len(ids)], grads[i%len(ids)]); err != nil {
							b.Fatal(err)
						}
					} else {
						r, err := tables[l].Lookup(ids[i%len(ids)])
						if err != nil {
							b.Fatal(err)
						}
						r.Close()
					}
					spent[l] += time.Since(start)
				}
			}
			ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(b.N) }
			b.ReportMetric(ms(spent[0]), "separate-ms/batch")
			b.ReportMetric(ms(spent[1]), "interleaved-ms/batch")
			b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "separate-speedup")
		})
	}
}

// BenchmarkDevices: a lookup and a SparseAdam update of 4,096 random ids at dim 64 on a table of
// 2^20 ids, with the keys (and gradients) on the table's device: on the CPU, and on the GPU
// when there is one (rows and states there; the id map on the host, so keys cross to it), with
// the default blocks of 65536 rows and with 4096 (the CPU's default). Every
// op copies its keys to the host, which waits for the previous op's kernels, so the time per op
// includes them; the last op's result is read back before the clock stops.
func BenchmarkDevices(b *testing.B) {
	const n = 1 << 20
	type setup struct {
		dev       cgotorch.Device
		blockRows int // 0: the default
	}
	setups := []setup{{cgotorch.CPU, 0}}
	if cgotorch.CUDAAvailable() {
		setups = append(setups, setup{cgotorch.CUDA(0), 0}, setup{cgotorch.CUDA(0), 4096})
	}
	for _, su := range setups {
		dev, name := su.dev, su.dev.String()
		if su.blockRows != 0 {
			name += "/blocks" + strconv.Itoa(su.blockRows)
		}
		for _, op := range []string{"lookup", "adam"} {
			b.Run(name+"/"+op, func(b *testing.B) {
				tbl := benchTable(b, b.Name(), embedding.Config{Dim: benchDim, Optimizer: embedding.SparseAdam{}, Device: dev,
					BlockRows: su.blockRows}, n)
				ids, grads := batches(b, 16, n, false)
				for _, ts := range [][]*cgotorch.Tensor{ids, grads} {
					for i, t := range ts {
						moved, err := t.To(dev, cgotorch.KeepDType)
						if err != nil {
							b.Fatal(err)
						}
						t.Close()
						ts[i] = moved
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					k := ids[i%len(ids)]
					if op == "adam" {
						if err := tbl.Update(k, grads[i%len(ids)]); err != nil {
							b.Fatal(err)
						}
						continue
					}
					r, err := tbl.Lookup(k)
					if err != nil {
						b.Fatal(err)
					}
					r.Close()
				}
				if _, err := tbl.LookupIDs([]int64{0}); err != nil { // waits for the GPU
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)*benchBatch/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkLookupLargeBatch: lookups of 131,072 random present ids (a CTR batch of 4,096
// samples over 32 fields) in a table of 4M ids of dim 16, with libtorch's thread count at 1
// and at the number of CPUs (threads-N): the find and the gather are both split over the
// threads for batches this large. ns/row: per id looked up.
func BenchmarkLookupLargeBatch(b *testing.B) {
	const n, batch, dim = 1 << 22, 1 << 17, 16
	tbl := benchTable(b, b.Name(), embedding.Config{Dim: dim}, n)
	rng := rand.New(rand.NewSource(2))
	var ids []*cgotorch.Tensor
	for j := 0; j < 8; j++ {
		v := make([]int64, batch)
		for i := range v {
			v[i] = rng.Int63n(n)
		}
		k, err := cgotorch.FromSlice(v)
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, k)
		defer k.Close()
	}
	before := cgotorch.NumThreads()
	defer cgotorch.SetNumThreads(before)
	counts := []int{1}
	if runtime.NumCPU() > 1 {
		counts = append(counts, runtime.NumCPU())
	}
	for _, threads := range counts {
		b.Run("threads-"+strconv.Itoa(threads), func(b *testing.B) {
			if err := cgotorch.SetNumThreads(threads); err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				r, err := tbl.Lookup(ids[i%len(ids)])
				if err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/batch, "ns/row")
		})
	}
}
