package dist

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
)

// benchOps are the collectives BenchmarkCollectives times between 2 local ranks. "barrier" is
// the agreement alone (one exchange of a small header), which every other collective pays
// before its data moves.
var benchOps = []string{"barrier", "all-reduce-1MB", "broadcast-1MB", "all-to-all-ids-4096", "all-to-all-rows-4096x64"}

// benchGroup starts a benchmark scenario's group and reads from the variable name how many
// calls it times.
func benchGroup(o Options, name string) (*Group, int, error) {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		return nil, 0, err
	}
	g, err := New(o)
	if err != nil {
		return nil, 0, err
	}
	return g, n, nil
}

// scenarioBench runs $GOREC_DIST_BENCH_OP $GOREC_DIST_BENCH_N times after a warm-up; rank 0
// prints the mean time of one.
func scenarioBench(o Options) error {
	op := os.Getenv("GOREC_DIST_BENCH_OP")
	g, n, err := benchGroup(o, "GOREC_DIST_BENCH_N")
	if err != nil {
		return err
	}
	defer g.Close()
	w := int64(g.WorldSize())
	even := func(rows int64) []int64 {
		s := make([]int64, w)
		for i := range s {
			s[i] = rows / w
		}
		s[0] += rows % w
		return s
	}
	mb := cgotorch.Ones([]int64{1 << 18})
	ids := cgotorch.Arange(0, 4096, 1, cgotorch.WithDType(cgotorch.Int64))
	rows := cgotorch.Ones([]int64{4096, 64})
	defer mb.Close()
	defer ids.Close()
	defer rows.Close()
	run := func() error {
		var out *cgotorch.Tensor
		var err error
		switch op {
		case "barrier":
			return g.Barrier()
		case "all-reduce-1MB":
			out, err = g.AllReduce(mb, Sum)
		case "broadcast-1MB":
			out, err = g.Broadcast(mb, 0)
		case "all-to-all-ids-4096":
			out, _, err = g.AllToAll(ids, even(4096))
		case "all-to-all-rows-4096x64":
			out, _, err = g.AllToAll(rows, even(4096))
		default:
			return fmt.Errorf("unknown op %q", op)
		}
		out.Close()
		return err
	}
	return timed(g, n, run)
}

// timed runs run n times after a warm-up; rank 0 prints the mean time of one.
func timed(g *Group, n int, run func() error) error {
	for range 20 {
		if err := run(); err != nil {
			return err
		}
	}
	start := time.Now()
	for range n {
		if err := run(); err != nil {
			return err
		}
	}
	if g.Rank() == 0 {
		fmt.Printf("bench-ns-per-op %d\n", time.Since(start).Nanoseconds()/int64(n))
	}
	return nil
}

// BenchmarkCollectives times each collective between 2 local rank processes (their own
// measurement, at least 200 calls after a warm-up; the processes' start is not counted).
func BenchmarkCollectives(b *testing.B) {
	for _, op := range benchOps {
		b.Run(op, func(b *testing.B) { benchRanks(b, "bench", op) })
	}
}

// benchRanks runs scenario's op on 2 local rank processes, max(b.N, 200) times, and reports
// the mean time of one that rank 0 printed.
func benchRanks(b *testing.B, scenario, op string) {
	n := max(b.N, 200)
	out := rankOutput(b, scenario, 2, time.Minute, []string{"GOREC_DIST_BENCH_OP=" + op, "GOREC_DIST_BENCH_N=" + strconv.Itoa(n)})
	b.ReportMetric(benchNs(b, out, "bench-ns-per-op "), "ns/op")
}

// rankOutput runs scenario as world rank processes with env, fails b if a rank fails, and
// returns rank 0's output.
func rankOutput(b *testing.B, scenario string, world int, timeout time.Duration, env []string) string {
	res := launch(b, scenario, world, store(b, "file"), timeout, func(int) []string { return env })
	for _, r := range res {
		if r.err != nil {
			b.Fatalf("rank %d: %v\n%s", r.rank, r.err, r.output)
		}
	}
	return res[0].output
}
