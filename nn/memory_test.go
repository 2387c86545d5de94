package nn_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/procstat"
	"github.com/gorec/gorec/nn"
)

// A training loop that frees nothing keeps its tensor memory bounded: the cleanups and the
// forced collections of cgotorch release every temporary. Not timed: it asserts memory only.
func TestTrainingLoopWithoutFreesStaysBounded(t *testing.T) {
	defer cgotorch.SetGCThreshold(cgotorch.SetGCThreshold(4 << 20))
	runtime.GC()
	cgotorch.ManualSeed(1)
	model := nn.NewSequential(nn.NewLinear(64, 256, true), nn.NewBatchNorm1d(256), &nn.ReLU{},
		nn.NewDropout(0.1), nn.NewLinear(256, 1, true))
	opt, err := nn.NewAdam(model, nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	loss := nn.BCEWithLogits(nn.ReduceMean)
	x := cgotorch.Randn([]int64{256, 64})
	target, _ := cgotorch.Rand([]int64{256, 1}).GtScalar(0.5).To(cgotorch.CPU, cgotorch.Float32)
	start := cgotorch.LiveBytes()
	var peak int64
	const steps = 400 // each step allocates about 2 MiB of temporaries: 800 MiB in all
	for i := 0; i < steps; i++ {
		opt.ZeroGrad()
		l := loss(model.Forward(x), target)
		l.Backward()
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, cgotorch.LiveBytes()-start)
	}
	if peak > 48<<20 {
		t.Errorf("live tensor memory grew by %d MiB over %d steps", peak>>20, steps)
	}
	// Once the loop's tensors are unreachable, the handles go back to what the model, the
	// optimizer and the data hold.
	held := int64(len(nn.StateDict(model))*4 + 8)
	base := cgotorch.LiveTensors()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		if cgotorch.LiveTensors() <= held+16 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := cgotorch.LiveTensors(); n > held+16 && n >= base {
		t.Errorf("%d live tensors after collection (was %d), expected about %d", n, base, held)
	}
	runtime.KeepAlive(model)
	runtime.KeepAlive(opt)
}

// A training loop with every step in cgotorch.WithScope frees each step's tensors when the step
// ends: after the first step (which allocates the gradients) the live bytes stay put.
func TestTrainingLoopInScope(t *testing.T) {
	defer cgotorch.SetGCThreshold(cgotorch.SetGCThreshold(0)) // no forced collections: the scope alone frees
	cgotorch.ManualSeed(2)
	model := nn.NewSequential(nn.NewLinear(32, 64, true), nn.NewLayerNorm(64), &nn.Tanh{}, nn.NewLinear(64, 1, true))
	opt, err := nn.NewSGD(model, nn.SGDOptions{LR: 0.01, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	x := cgotorch.Randn([]int64{128, 32})
	target := cgotorch.Randn([]int64{128, 1})
	loss := nn.MSE(nn.ReduceMean)
	var after1 int64
	first := 0.0
	last := 0.0
	for i := 0; i < 100; i++ {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			opt.ZeroGrad()
			l := loss(model.Forward(x), target)
			l.Backward()
			if err := opt.Step(); err != nil {
				t.Fatal(err)
			}
			last, _ = l.Item()
		})
		if i == 0 {
			after1, first = cgotorch.LiveBytes(), last
		} else if live := cgotorch.LiveBytes(); live > after1 {
			t.Fatalf("step %d: live bytes %d, %d after the first step", i, live, after1)
		}
	}
	if !(last < first) {
		t.Errorf("loss did not decrease: %v -> %v", first, last)
	}
}

// 100,000 training steps of a small recommendation model (a hash embedding trained with
// SparseAdam, a dense layer with Adam) that free nothing keep the RSS flat: after a warm-up of
// 10,000 steps (every id inserted, allocator arenas and the Go heap at their working size) the
// RSS may not grow by more than 64 MiB, nor the live C bytes or the Go heap by more than 16 MiB,
// and the live tensor count stays bounded. Not timed. Under the race detector, whose shadow
// memory grows by itself, RSS is not checked (make test runs this test once without -race).
func TestRecModelLoop100kStepsKeepsRSSFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 steps")
	}
	if procstat.ResidentKB() == 0 {
		t.Skip("no /proc/self/status")
	}
	tbl := newEmbTable(t, "nn-100k", embedding.Config{Dim: 8, Optimizer: embedding.SparseAdam{LR: 0.01}})
	model := &embTower{emb: nn.NewEmbedding(tbl, nn.EmbeddingOptions{}), lin: nn.NewLinear(8, 1, true)}
	model.Add("emb", model.emb)
	model.Add("lin", model.lin)
	opt, err := nn.NewAdam(model, nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	loss := nn.BCEWithLogits(nn.ReduceMean)
	target := cgotorch.MustFromSlice([]float32{1, 0, 0, 1}, 4, 1)
	ids := make([]int64, 8)
	const steps, warmup = 100_000, 10_000
	var base, peak, peakTensors, baseC, peakC int64
	var baseHeap, peakHeap uint64
	var ms runtime.MemStats
	for i := 0; i < steps; i++ {
		for j := range ids {
			ids[j] = int64((i*7 + j*13) % 1000)
		}
		opt.ZeroGrad()
		loss(model.Forward(cgotorch.MustFromSlice(ids, 4, 2)), target).Backward()
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			rss, c := procstat.ResidentKB(), cgotorch.LiveBytes()
			runtime.ReadMemStats(&ms)
			if i < warmup {
				base, baseC, baseHeap = max(base, rss), max(baseC, c), max(baseHeap, ms.HeapInuse)
			} else {
				peak, peakC, peakHeap = max(peak, rss), max(peakC, c), max(peakHeap, ms.HeapInuse)
			}
			peakTensors = max(peakTensors, cgotorch.LiveTensors())
		}
	}
	t.Logf("after warm-up / peak after: RSS %d / %d MiB, live C bytes %d / %d MiB, Go heap %d / %d MiB; peak live tensors %d; cached tensor buffers at the end %d KiB",
		base>>10, peak>>10, baseC>>20, peakC>>20, baseHeap>>20, peakHeap>>20, peakTensors, cgotorch.CachedBytes()>>10)
	// signed: a later peak below the warm-up maximum is no growth (unsigned, it wrapped around)
	if peakC-baseC > 16<<20 || int64(peakHeap)-int64(baseHeap) > 16<<20 {
		t.Errorf("live C bytes grew from %d to %d MiB, Go heap from %d to %d MiB", baseC>>20, peakC>>20, baseHeap>>20, peakHeap>>20)
	}
	if raceEnabled {
		t.Logf("race detector on: RSS (its shadow memory included) not checked; make test checks it without -race")
	} else if peak-base > 64<<10 {
		t.Errorf("RSS grew from %d MiB to %d MiB over %d steps", base>>10, peak>>10, steps)
	}
	if peakTensors > 200_000 {
		t.Errorf("%d live tensors at a sample: cleanups do not keep up", peakTensors)
	}
	if st, _ := tbl.Stats(); st.Len != 1000 || st.Step != steps {
		t.Errorf("table stats %+v, want 1,000 ids and %d steps", st, steps)
	}
}
