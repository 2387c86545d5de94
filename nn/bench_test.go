package nn_test

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/procstat"
	"github.com/gorec/gorec/nn"
)

// The CTR training-step benchmark: 8 hash tables of dim 16 (SparseAdam), their rows concatenated
// into 128 features -> Linear(128, 64) -> ReLU -> Linear(64, 1) (Adam) -> BCE with logits, batch
// 1,024. scripts/bench_torch.py times the same model in PyTorch (nn.Embedding(sparse=True) over
// pre-sized tables, SparseAdam + Adam, same thread count) and scripts/bench.sh prints the ratio.
const (
	ctrFields = 8
	ctrDim    = 16
	ctrBatch  = 1024
	ctrIDs    = 100_000 // ids per field: every table is filled with them before timing
)

type ctrModel struct {
	nn.Container
	fields []*nn.Embedding
	mlp    *nn.Sequential
}

// presizedTable is a SparseAdam table of dim whose ids 0 to ids-1 all have their rows already,
// closed when b ends.
func presizedTable(b *testing.B, dim, ids int) *embedding.Table {
	tbl, err := embedding.New(embedding.Config{
		Dim: dim, Capacity: ids, Optimizer: embedding.SparseAdam{LR: 1e-3},
		Initializer: embedding.Normal{Std: 0.01}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tbl.Close() })
	all := make([]int64, ids)
	for i := range all {
		all[i] = int64(i)
	}
	if _, err := tbl.LookupIDs(all); err != nil {
		b.Fatal(err)
	}
	return tbl
}

func newCTRModel(b *testing.B) *ctrModel { return newCTRModelOver(newCTRTables(b)) }

// newCTRTables returns the model's 8 tables, each filled with ctrIDs ids.
func newCTRTables(b *testing.B) []*embedding.Table {
	var tables []*embedding.Table
	for f := 0; f < ctrFields; f++ {
		tables = append(tables, presizedTable(b, ctrDim, ctrIDs))
	}
	return tables
}

// newCTRModelOver returns the model over tables (a new MLP).
func newCTRModelOver(tables []*embedding.Table) *ctrModel {
	return newFieldsModel(tables, nn.NewSequential(nn.NewLinear(ctrFields*ctrDim, 64, true), &nn.ReLU{}, nn.NewLinear(64, 1, true)))
}

// newFieldsModel returns a model of one Embedding per table, their rows concatenated into mlp.
func newFieldsModel(tables []*embedding.Table, mlp *nn.Sequential) *ctrModel {
	m := &ctrModel{mlp: mlp}
	for f, tbl := range tables {
		e := nn.NewEmbedding(tbl, nn.EmbeddingOptions{})
		m.fields = append(m.fields, e)
		m.Add(fmt.Sprintf("field%d", f), e)
	}
	m.Add("mlp", m.mlp)
	return m
}

// Forward2 takes one [B] id tensor per field.
func (m *ctrModel) forwardFields(ids []*nn.Tensor) *nn.Tensor {
	rows := make([]*nn.Tensor, len(m.fields))
	for f, e := range m.fields {
		rows[f] = e.Forward(ids[f])
	}
	return m.mlp.Forward(cgotorch.Cat(rows, 1))
}

func (m *ctrModel) Forward(*nn.Tensor) *nn.Tensor { panic("ctrModel takes one id tensor per field") }

func benchThreads(b *testing.B) {
	n, err := strconv.Atoi(os.Getenv("GOREC_BENCH_THREADS"))
	if err != nil || n <= 0 {
		n = 1
	}
	if err := cgotorch.SetNumThreads(n); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCTRStep times one training step (forward, loss, backward, SparseAdam on the 8 tables
// and Adam on the MLP through one nn.Optimizer) of the CTR model, each step in a
// cgotorch.WithScope as a training loop would run it; it reports samples/s.
func BenchmarkCTRStep(b *testing.B) {
	benchThreads(b)
	benchCTRSync(b, 1)
}

// benchCTRSync times the synchronous step at the current thread count, in trainers
// independent trainers (each its own model and tables, in its own goroutine) sharing b.N steps.
func benchCTRSync(b *testing.B, trainers int) {
	cgotorch.ManualSeed(0)
	ids, labels := ctrBatches()
	loss := nn.BCEWithLogits(nn.ReduceMean)
	steps := make([]func(k int), trainers)
	for t := range steps {
		m := newCTRModel(b)
		opt, err := nn.NewAdam(m, nn.DefaultAdamOptions())
		if err != nil {
			b.Fatal(err)
		}
		steps[t] = func(k int) {
			cgotorch.WithScope(func(*cgotorch.Scope) {
				opt.ZeroGrad()
				loss(m.forwardFields(ids[k]), labels[k]).Backward()
				if err := opt.Step(); err != nil {
					b.Error(err)
				}
			})
		}
		steps[t](0) // allocates the optimizers' state
	}
	b.ResetTimer()
	cpu := cpuTime()
	var wg sync.WaitGroup
	for t, step := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := t; i < b.N; i += trainers {
				step(i % len(ids))
			}
		}()
	}
	wg.Wait()
	reportCTR(b, cpu)
}

// reportCTR reports samples/s and the process's CPU time (user and system, every thread) per
// sample since cpu (on a loaded machine it stays comparable where samples/s does not, and
// concurrency that scales keeps it flat), and the resident size at the end.
func reportCTR(b *testing.B, cpu time.Duration) {
	samples := float64(b.N) * ctrBatch
	b.ReportMetric(samples/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(cpuTime()-cpu)/samples, "cpu-ns/sample")
	b.ReportMetric(float64(procstat.ResidentKB())/1024, "rss-MiB")
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration { return rusageTime(syscall.RUSAGE_SELF) }

// rusageTime is the user and system time getrusage reports for who (0 on error).
func rusageTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ctrBatches returns 16 batches of the CTR model: one [B] id tensor per field, and [B, 1] labels.
func ctrBatches() (ids [][]*nn.Tensor, labels []*nn.Tensor) {
	return clickBatches(ctrFields, ctrBatch, ctrIDs)
}

// clickBatches returns 16 batches of a click model of fields fields: one [batch] tensor of ids
// below maxID per field, and [batch, 1] labels of 0 and 1.
func clickBatches(fields, batch, maxID int) (ids [][]*nn.Tensor, labels []*nn.Tensor) {
	rng := rand.New(rand.NewSource(1))
	const nBatches = 16
	ids = make([][]*nn.Tensor, nBatches)
	labels = make([]*nn.Tensor, nBatches)
	for k := range ids {
		for f := 0; f < fields; f++ {
			v := make([]int64, batch)
			for i := range v {
				v[i] = rng.Int63n(int64(maxID))
			}
			ids[k] = append(ids[k], cgotorch.MustFromSlice(v))
		}
		l := make([]float32, batch)
		for i := range l {
			l[i] = float32(rng.Intn(2))
		}
		labels[k] = cgotorch.MustFromSlice(l, int64(batch), 1)
	}
	return ids, labels
}
