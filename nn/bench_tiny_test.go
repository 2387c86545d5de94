package nn_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// The tiny model, whose arithmetic is negligible, so that a step's time is its overhead: 2 hash
// tables of dim 8 (SparseAdam), their rows concatenated into 16 features -> Linear(16, 1) (Adam)
// -> BCE with logits, batch 32. scripts/bench_torch.py times the same model in PyTorch
// (torch_TinyStep), make tiny-bench the floor (the same C ABI calls from C, no Go), and
// scripts/bench.sh prints the ratios.
const (
	tinyFields = 2
	tinyDim    = 8
	tinyBatch  = 32
	tinyIDs    = 1_000
)

// newTinyModel is the CTR model's shape (nn/bench_test.go) with 2 tables of dim 8 and
// Linear(16, 1) as its MLP.
func newTinyModel(b *testing.B) *ctrModel {
	tables := make([]*embedding.Table, tinyFields)
	for f := range tables {
		tables[f] = presizedTable(b, tinyDim, tinyIDs)
	}
	return newFieldsModel(tables, nn.NewSequential(nn.NewLinear(tinyFields*tinyDim, 1, true)))
}

// BenchmarkTinyStep times one training step of the tiny model (ZeroGrad, forward, loss,
// backward, one nn.Optimizer's Step over the tables and the Linear) in a cgotorch.WithScope, as
// benchCTRSync does. It reports µs/step, the process's CPU time per step (steadier than µs/step
// on a loaded machine), the stepping thread's alone (make tiny-bench's figure: the collector and
// the cleanups run on other threads), the cgo calls per step (runtime.NumCgoCall) and the Go
// allocations.
func BenchmarkTinyStep(b *testing.B) {
	benchThreads(b)
	cgotorch.ManualSeed(0)
	ids, labels := tinyBatches()
	loss := nn.BCEWithLogits(nn.ReduceMean)
	m := newTinyModel(b)
	opt, err := nn.NewAdam(m, nn.DefaultAdamOptions())
	if err != nil {
		b.Fatal(err)
	}
	step := func(k int) {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			opt.ZeroGrad()
			loss(m.forwardFields(ids[k]), labels[k]).Backward()
			if err := opt.Step(); err != nil {
				b.Error(err)
			}
		})
	}
	step(0) // allocates the optimizers' state
	b.ReportAllocs()
	b.ResetTimer()
	runtime.LockOSThread() // so that the thread's CPU time is the steps'
	defer runtime.UnlockOSThread()
	calls, cpu, thread := runtime.NumCgoCall(), cpuTime(), threadCPUTime()
	for i := 0; i < b.N; i++ {
		step(i % len(ids))
	}
	thread = threadCPUTime() - thread
	calls = runtime.NumCgoCall() - calls
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/step")
	b.ReportMetric(float64(thread.Microseconds())/float64(b.N), "thread-cpu-µs/step")
	b.ReportMetric(float64(calls)/float64(b.N), "cgo-calls/step")
}

// threadCPUTime is the calling thread's CPU time so far.
func threadCPUTime() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	return rusageTime(rusageThread)
}

// tinyBatches returns 16 batches of the tiny model: one [B] id tensor per field, and [B, 1]
// labels.
func tinyBatches() (ids [][]*nn.Tensor, labels []*nn.Tensor) {
	return clickBatches(tinyFields, tinyBatch, tinyIDs)
}
