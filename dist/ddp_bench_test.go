package dist

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

func init() { scenarios["ddp-bench"] = scenarioDDPBench }

// ddpBenchModel has 1,050,113 float32 parameters (4.2 MB of gradients) in 6 tensors.
func ddpBenchModel() *nn.Sequential {
	cgotorch.ManualSeed(1)
	return nn.NewSequential(nn.NewLinear(512, 1024, true), &nn.ReLU{}, nn.NewLinear(1024, 512, true),
		&nn.ReLU{}, nn.NewLinear(512, 1, true))
}

// scenarioDDPBench times $GOREC_DDP_BENCH_N synchronizations (DataParallel.SyncGradients
// with the cap $GOREC_DDP_BUCKET) and as many all-reduces (Avg) of one tensor of the same
// bytes (the gradients and the flags), interleaved in rounds of 10 after a warm-up so that
// both see the same load; rank 0 prints the mean time of each.
func scenarioDDPBench(o Options) error {
	g, n, err := benchGroup(o, "GOREC_DDP_BENCH_N")
	if err != nil {
		return err
	}
	defer g.Close()
	capBytes, err := strconv.ParseInt(env("GOREC_DDP_BUCKET", "0"), 10, 64)
	if err != nil {
		return err
	}
	model := ddpBenchModel()
	ddp, err := NewDataParallel(g, model, DataParallelOptions{BucketBytes: capBytes})
	if err != nil {
		return err
	}
	model.Forward(cgotorch.Randn([]int64{8, 512})).Sum().Backward()
	var numel int64
	for _, p := range model.Parameters() {
		numel += p.Tensor.Numel() + 1
	}
	raw := cgotorch.Ones([]int64{numel})
	defer raw.Close()
	ops := [2]func() error{
		func() error {
			defer ddp.ResetGradientSync()
			return ddp.SyncGradients()
		},
		func() error {
			out, err := g.AllReduce(raw, Avg)
			out.Close()
			return err
		},
	}
	took, calls, err := interleaved(n, ops[:]...)
	if err != nil {
		return err
	}
	if g.Rank() == 0 {
		fmt.Printf("bench-ns-per-op %d\nraw-ns-per-op %d\n", took[0].Nanoseconds()/calls, took[1].Nanoseconds()/calls)
	}
	return nil
}

// interleaved runs each of ops in turn, 10 calls at a time, until each has run at least n
// times after a round of warm-up, and returns the time each took and the calls timed of each:
// a load that comes and goes weighs on all of them alike.
func interleaved(n int, ops ...func() error) ([]time.Duration, int64, error) {
	took := make([]time.Duration, len(ops))
	for round := -1; round < (n+9)/10; round++ {
		for i, op := range ops {
			start := time.Now()
			for range 10 {
				if err := op(); err != nil {
					return nil, 0, err
				}
			}
			if round >= 0 { // round -1 warms up
				took[i] += time.Since(start)
			}
		}
	}
	return took, int64((n + 9) / 10 * 10), nil
}

// BenchmarkDataParallelSync times the gradient synchronization of a 4.2 MB model between 2
// local rank processes (ns/op), side by side with a raw all-reduce of the same bytes in one
// tensor (raw-ns/op, interleaved with it) and their ratio (x-raw): in one bucket (the default
// cap) and in 5 (a cap of 1 MiB).
func BenchmarkDataParallelSync(b *testing.B) {
	for _, c := range []struct{ name, bucket string }{{"cap25MiB", "0"}, {"cap1MiB", strconv.Itoa(1 << 20)}} {
		b.Run(c.name, func(b *testing.B) {
			n := max(b.N, 50)
			out := rankOutput(b, "ddp-bench", 2, time.Minute, []string{"GOREC_DDP_BUCKET=" + c.bucket, "GOREC_DDP_BENCH_N=" + strconv.Itoa(n)})
			sync, raw := benchNs(b, out, "bench-ns-per-op "), benchNs(b, out, "raw-ns-per-op ")
			b.ReportMetric(sync, "ns/op")
			b.ReportMetric(raw, "raw-ns/op")
			b.ReportMetric(sync/raw, "x-raw")
		})
	}
}

// benchNs is the time a rank printed after key.
func benchNs(b *testing.B, output, key string) float64 {
	_, v, ok := strings.Cut(output, key)
	ns, err := strconv.ParseFloat(strings.TrimSpace(strings.SplitN(v, "\n", 2)[0]), 64)
	if !ok || err != nil {
		b.Fatalf("no %q in rank 0's output:\n%s", key, output)
	}
	return ns
}
