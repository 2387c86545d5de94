package nn_test

import (
	"context"
	"fmt"
	"iter"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// BenchmarkCTRStepHogwild times the CTR model of BenchmarkCTRStep on the cores side by side in
// one run: the synchronous step with 1 and 2 libtorch intra-op threads, and nn.Hogwild with 1
// and 2 workers (1 intra-op thread each) sharing the 8 tables, fed by a channel (Train) or, in
// workers-2-own, each drawing its own batches (TrainEach), and as a control two
// independent synchronous trainers (each its own model and tables: what sharing nothing gives
// on this machine). Each reports samples/s, CPU ns per sample (comparable on a loaded machine,
// where samples/s is not) and the resident size (the workers cases also their cgo calls per
// step); scripts/bench.sh prints hogwild-2 (and hogwild-2-own: TrainEach) over sync-1.
// GOREC_BENCH_WORKERS (a list such as "4 8 16") adds workers-N cases for machines with more
// cores (scripts/device_check.sh).
func BenchmarkCTRStepHogwild(b *testing.B) {
	type benchCase struct {
		name             string
		threads, workers int
		independent      int  // trainers of their own model and tables (synchronous)
		own              bool // the workers draw their own batches (TrainEach), not a channel's
	}
	cases := []benchCase{{"sync-threads-1", 1, 0, 1, false}, {"sync-threads-2", 2, 0, 1, false}, {"workers-1", 1, 1, 0, false},
		{"workers-2", 1, 2, 0, false}, {"workers-2-own", 1, 2, 0, true}, {"independent-2", 1, 0, 2, false}}
	for _, f := range strings.Fields(os.Getenv("GOREC_BENCH_WORKERS")) {
		if n, err := strconv.Atoi(f); err == nil && n > 2 {
			cases = append(cases, benchCase{fmt.Sprintf("workers-%d", n), 1, n, 0, false},
				benchCase{fmt.Sprintf("workers-%d-own", n), 1, n, 0, true})
		}
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			setThreads(b, c.threads)
			defer setThreads(b, 1)
			if c.workers == 0 {
				// Hogwild.Train keeps a P to spare (nn/hogwild_procs.go); so do the
				// independent trainers.
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), c.independent+1)))
				benchCTRSync(b, c.independent)
			} else {
				benchCTRHogwild(b, c.workers, c.own)
			}
		})
	}
}

func setThreads(b *testing.B, n int) {
	if err := cgotorch.SetNumThreads(n); err != nil {
		b.Fatal(err)
	}
}

// benchCTRHogwild times nn.Hogwild with workers workers; a batch is the index of one of 16.
// They receive the batches from a channel that a goroutine fills (Train), or with own, each
// draws its own (TrainEach).
func benchCTRHogwild(b *testing.B, workers int, own bool) {
	cgotorch.ManualSeed(0)
	tables := newCTRTables(b)
	m := newCTRModelOver(tables)
	opt, err := nn.NewAdam(m, nn.DefaultAdamOptions())
	if err != nil {
		b.Fatal(err)
	}
	loss := nn.BCEWithLogits(nn.ReduceMean)
	ids, labels := ctrBatches()
	h, err := nn.NewHogwild(m, opt, workers, func() (*ctrModel, error) { return newCTRModelOver(tables), nil },
		func(r *ctrModel, k int) *nn.Tensor { return loss(r.forwardFields(ids[k]), labels[k]) })
	if err != nil {
		b.Fatal(err)
	}
	train := func(n int) {
		if own {
			// Each worker takes the next index from a counter: no batch is handed over, and
			// no worker ends while the other has a share left (a fixed split of b.N leaves
			// one core idle for the slower worker's rest).
			var next atomic.Int64
			if err := h.TrainEach(context.Background(), func(int) iter.Seq[int] {
				return func(yield func(int) bool) {
					for i := next.Add(1) - 1; i < int64(n) && yield(int(i)%len(ids)); i = next.Add(1) - 1 {
					}
				}
			}); err != nil {
				b.Fatal(err)
			}
			return
		}
		ch := make(chan int, 64)
		go func() {
			for i := 0; i < n; i++ {
				ch <- i % len(ids)
			}
			close(ch)
		}()
		if err := h.Train(context.Background(), ch); err != nil {
			b.Fatal(err)
		}
	}
	train(workers) // allocates the optimizers' state
	b.ResetTimer()
	cpu, calls := cpuTime(), runtime.NumCgoCall()
	train(b.N)
	reportCTR(b, cpu)
	b.ReportMetric(float64(runtime.NumCgoCall()-calls)/float64(b.N), "cgo-calls/step")
}
