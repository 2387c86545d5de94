package embedding_test

import (
	"math/rand"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// BenchmarkStepPending times Step on one pending gradient chunk of distinct ids, the shape of
// SVD++'s implicit table on MovieLens (nn's BenchmarkMovieLensSVDppFloor): 7,500 of a table's
// 9,066 ids at dim 128, SparseAdam. Each iteration looks the ids up for training and runs the
// backward pass of a fixed gradient (untimed: median-step-us is Step's alone, the median over the iterations, which
// a busy machine disturbs less than a mean), then
// steps. GOREC_BENCH_THREADS sets the intra-op threads (1 by default).
func BenchmarkStepPending(b *testing.B) {
	const rows, distinct, dim, batches = 9066, 7500, 128, 8
	threads, err := strconv.Atoi(os.Getenv("GOREC_BENCH_THREADS"))
	if err != nil || threads <= 0 {
		threads = 1
	}
	if err := cgotorch.SetNumThreads(threads); err != nil {
		b.Fatal(err)
	}
	tbl := benchTable(b, b.Name(), embedding.Config{Dim: dim, Optimizer: embedding.SparseAdam{LR: 0.003},
		Initializer: embedding.Normal{Std: 0.01}, Seed: 1}, rows)
	rng := rand.New(rand.NewSource(1))
	g := make([]float32, distinct*dim)
	for i := range g {
		g[i] = (rng.Float32() - 0.5) * 1e-3
	}
	grad := cgotorch.MustFromSlice(g, distinct, dim)
	ids := make([]*cgotorch.Tensor, batches)
	for k := range ids {
		perm := rng.Perm(rows)[:distinct]
		v := make([]int64, distinct)
		for i, x := range perm {
			v[i] = int64(x)
		}
		ids[k] = cgotorch.MustFromSlice(v)
	}
	step := func(k int) time.Duration {
		out, err := tbl.Forward(ids[k%batches], embedding.ForwardOptions{Train: true})
		if err != nil {
			b.Fatal(err)
		}
		out.BackwardWith(grad, false)
		out.Close()
		start := time.Now()
		if err := tbl.Step(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for k := 0; k < batches; k++ {
		step(k)
	}
	spent := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range spent {
		spent[i] = step(i)
	}
	b.StopTimer()
	slices.Sort(spent)
	b.ReportMetric(float64(spent[len(spent)/2].Nanoseconds())/1e3, "median-step-us")
}
