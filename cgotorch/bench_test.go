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

// BenchmarkMM512: a 512x512 float32 matrix product (compare with torch_mm512 from
// scripts/bench_torch.py, timed on the same thread count in the same `make bench` run).
func BenchmarkMM512(b *testing.B) {
	benchThreads(b)
	ManualSeed(0)
	x := Rand([]int64{512, 512})
	y := Rand([]int64{512, 512})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x.MM(y).Close()
	}
}
