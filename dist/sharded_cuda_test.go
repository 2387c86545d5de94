package dist

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// A sharded table whose shard lives on cuda:0 (one rank; with NCCL where the build has it)
// gives what the same table on the CPU gives: Lookup, Write, Update (SGD), Read and Len. The
// rows travel between the ranks on the CPU either way.
func TestShardedTableOnCUDA(t *testing.T) {
	if !cgotorch.CUDAAvailable() {
		t.Skip("no CUDA device")
	}
	o := Options{WorldSize: 1, Store: FileStore(filepath.Join(t.TempDir(), "store")), Timeout: 30 * time.Second, Job: "cuda"}
	if NCCLAvailable() {
		o.Backend = NCCL
	}
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cfg := embedding.Config{Dim: 4, Seed: 7, Optimizer: embedding.SGD{LR: 0.5}}
	cpu, err := NewShardedTable(g, "cuda-twin-cpu", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	cfg.Device = cgotorch.CUDA(0)
	gpu, err := NewShardedTable(g, "cuda-twin-gpu", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	if d := gpu.Shard().Config().Device; d != cgotorch.CUDA(0) {
		t.Fatalf("the shard is on %v, want cuda:0", d)
	}
	ids := tensor([]int64{1, 2, 2, 9})
	defer ids.Close()
	some := tensor([]int64{2})
	defer some.Close()
	val := tensor([]float32{1, 2, 3, 4}, 1, 4)
	defer val.Close()
	grads := tensor([]float32{1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, -1, -1, -1, -1}, 4, 4)
	defer grads.Close()
	read := tensor([]int64{1, 2, 9, 100})
	defer read.Close()
	for _, s := range []*ShardedTable{cpu, gpu} {
		rows, err := s.Lookup(ids)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := s.Write(some, val); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ids, grads); err != nil {
			t.Fatal(err)
		}
	}
	var got [2][]float32
	var found [2][]bool
	for i, s := range []*ShardedTable{cpu, gpu} {
		rows, f, err := s.Read(read)
		if err != nil {
			t.Fatal(err)
		}
		got[i], _ = cgotorch.ToSlice[float32](rows)
		found[i], _ = cgotorch.ToSlice[bool](f)
		rows.Close()
		f.Close()
	}
	if fmt.Sprint(found[0]) != fmt.Sprint(found[1]) || fmt.Sprint(found[1]) != "[true true true false]" {
		t.Errorf("found: CPU %v, GPU %v; want [true true true false]", found[0], found[1])
	}
	if len(got[0]) != 16 || len(got[1]) != 16 {
		t.Fatalf("read %d and %d values, want 16", len(got[0]), len(got[1]))
	}
	for i := range got[0] {
		if math.Abs(float64(got[0][i]-got[1][i])) > 1e-6 {
			t.Errorf("value %d: CPU %v, GPU %v", i, got[0][i], got[1][i])
		}
	}
	// Write then two gradients of 2 (ids 2, 2 summed: 2 + 0) at lr 0.5: row 2 is val - 1.
	if want := []float32{0, 1, 2, 3}; fmt.Sprint(got[1][4:8]) != fmt.Sprint(want) {
		t.Errorf("row 2 on the GPU: %v, want %v", got[1][4:8], want)
	}
	for _, s := range []*ShardedTable{cpu, gpu} {
		if n, err := s.Len(); err != nil || n != 3 {
			t.Errorf("%s: Len %d, %v; want 3", s.Name(), n, err)
		}
	}
}
