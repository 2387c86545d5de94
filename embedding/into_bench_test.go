package embedding_test

import (
	"math/rand"
	"strconv"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// BenchmarkLookupToSlice: rows wanted in a Go slice, from ids in a Go slice (a Go serving
// loop), by the two ways there are: LookupIDs then ToSlice (a tensor each way, and a copy of
// the rows out of it), and LookupInto a reused slice. Batches of 64 and 4,096 random present
// ids of a 128K-id table at dim 64 (compare with -count and benchstat: each runs on its own).
//
//	go test -run '^$' -bench LookupToSlice ./embedding/
func BenchmarkLookupToSlice(b *testing.B) {
	const n = 1 << 17
	tbl := benchTable(b, b.Name(), embedding.Config{Dim: benchDim}, n)
	rng := rand.New(rand.NewSource(1))
	for _, batch := range []int{64, benchBatch} {
		var ids [][]int64
		for j := 0; j < 16; j++ {
			v := make([]int64, batch)
			for i := range v {
				v[i] = rng.Int63n(n)
			}
			ids = append(ids, v)
		}
		dst := make([]float32, batch*benchDim)
		ways := []struct {
			name string
			f    func(ids []int64) []float32
		}{
			{"LookupIDsToSlice", func(ids []int64) []float32 {
				r, err := tbl.LookupIDs(ids)
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				v, err := cgotorch.ToSlice[float32](r)
				if err != nil {
					b.Fatal(err)
				}
				return v
			}},
			{"LookupInto", func(ids []int64) []float32 {
				if err := tbl.LookupInto(dst, ids); err != nil {
					b.Fatal(err)
				}
				return dst
			}},
		}
		for _, w := range ways {
			b.Run(w.name+"/batch"+strconv.Itoa(batch), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if v := w.f(ids[i%len(ids)]); len(v) != batch*benchDim {
						b.Fatalf("%d floats", len(v))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(batch), "ns/row")
			})
		}
	}
}
