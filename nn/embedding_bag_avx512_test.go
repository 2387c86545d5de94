package nn_test

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// trainLargeBags trains an EmbeddingBag over a table with opt for a few steps of large bags
// and returns the table's rows of every id, as bytes.
func trainLargeBags(t *testing.T, name string, opt embedding.Optimizer, dim int) []byte {
	rng := rand.New(rand.NewSource(5))
	cfg := embedding.Config{Dim: dim, Initializer: embedding.Normal{Std: 0.1}, Optimizer: opt, Seed: 3}
	tbl := newEmbTable(t, "wide/"+name, cfg)
	bag := nn.NewEmbeddingBag(tbl, embedding.Sum, nn.EmbeddingOptions{})
	var pool []int64
	for step := 0; step < 6; step++ {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			p, ids, offsets, weights := largeBags(rng, 40, 3000, 0)
			pool = append(pool, p...)
			out := bag.ForwardWeighted(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offsets), cgotorch.MustFromSlice(weights))
			out.Mul(out).Sum().Backward()
			if err := bag.Step(); err != nil {
				t.Fatal(err)
			}
		})
	}
	rows := make([]float32, len(pool)*dim)
	if err := tbl.ReadInto(rows, nil, pool); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, rows); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var wideCases = []struct {
	name string
	opt  embedding.Optimizer
	dim  int
}{
	{"sparse-adam-128", embedding.SparseAdam{LR: 0.01}, 128},
	{"sparse-adam-37", embedding.SparseAdam{LR: 0.01}, 37},
	{"adagrad-128", embedding.Adagrad{LR: 0.05}, 128},
	{"adagrad-21", embedding.Adagrad{LR: 0.05}, 21},
}

// TestTableStepAVX512SameNumbers checks that the AVX-512 SparseAdam and Adagrad kernels
// (optim_avx512.cc.h) give the four-lane kernels' numbers bit for bit: the same training run in
// a child process with GOREC_NO_AVX512=1 must leave the same rows (row widths that are and are
// not a multiple of 16). Skipped where the CPU has no AVX-512 (both runs take the same path).
func TestTableStepAVX512SameNumbers(t *testing.T) {
	if dir := os.Getenv("GOREC_WIDE_OUT"); dir != "" { // the child: write each case's rows
		for _, c := range wideCases {
			if err := os.WriteFile(dir+"/"+c.name, trainLargeBags(t, c.name, c.opt, c.dim), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !strings.Contains(string(info), " avx512f") {
		t.Skip("no AVX-512 here")
	}
	if os.Getenv("GOREC_NO_AVX512") != "" {
		t.Skip("GOREC_NO_AVX512 is set: both runs would take the four-lane kernels")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestTableStepAVX512SameNumbers$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GOREC_WIDE_OUT="+dir, "GOREC_NO_AVX512=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, c := range wideCases {
		got := trainLargeBags(t, c.name, c.opt, c.dim)
		want, err := os.ReadFile(dir + "/" + c.name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: rows after AVX-512 steps differ from the four-lane kernels'", c.name)
		}
	}
}
