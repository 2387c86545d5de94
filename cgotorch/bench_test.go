package cgotorch

import (
	"os"
	"strconv"
	"testing"
)

// benchThreads sets libtorch's thread count for a benchmark from GOREC_BENCH_THREADS (default 1),
// so that `make bench` compares gorec and PyTorch on the same number of threads.
func benchThreads(b *testing.B) {
	n, err := strconv.Atoi(os.Getenv("GOREC_BENCH_THREADS"))
	if err != nil || n <= 0 {
		n = 1
	}
	if err := SetNumThreads(n); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCgoRoundTrip: one call into C and back with no libtorch work (a counter read).
func BenchmarkCgoRoundTrip(b *testing.B) {
	var sink int64
	for i := 0; i < b.N; i++ {
		sink += LiveTensors()
	}
	_ = sink
}

// BenchmarkGuardedCall: one guarded C ABI call on a tensor handle (numel), the cost every
// tensor method pays on top of libtorch's own work.
func BenchmarkGuardedCall(b *testing.B) {
	x := Ones([]int64{4})
	defer x.Close()
	var sink int64
	for i := 0; i < b.N; i++ {
		sink += x.Numel()
	}
	_ = sink
}

// BenchmarkCreateClose: a small tensor made and closed (handle, allocation, accounting).
func BenchmarkCreateClose(b *testing.B) {
	shape := []int64{16}
	for i := 0; i < b.N; i++ {
		Empty(shape).Close()
	}
}
