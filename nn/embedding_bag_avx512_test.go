package nn_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
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
	dir := avx512Child(t, "^TestTableStepAVX512SameNumbers$", "GOREC_WIDE_OUT")
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

// avx512Child runs test run in a child process with GOREC_NO_AVX512=1 and the variable out
// naming a new directory, which it returns (the child writes its results there). Skips where
// the CPU has no AVX-512 or GOREC_NO_AVX512 is set (both runs would take the same path).
func avx512Child(t *testing.T, run, out string) string {
	t.Helper()
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !strings.Contains(string(info), " avx512f") {
		t.Skip("no AVX-512 here")
	}
	if os.Getenv("GOREC_NO_AVX512") != "" {
		t.Skip("GOREC_NO_AVX512 is set: both runs would take the same kernels")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", run, "-test.count=1")
	cmd.Env = append(os.Environ(), out+"="+dir, "GOREC_NO_AVX512=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, b)
	}
	return dir
}

// poolCase is one pooling of TestBagsPoolAVX512SameNumbers: a row width and how bags pool.
type poolCase struct {
	dim              int
	mode             embedding.BagMode
	weighted, padded bool // padded with weights: products rounded apart (PyTorch's path)
}

func (c poolCase) name() string {
	return fmt.Sprintf("dim%d-mode%d-w%t-pad%t", c.dim, c.mode, c.weighted, c.padded)
}

// poolBits pools random bags (lengths 0 to 40, some longer than the kernels' prefetch distance)
// of random rows through an EmbeddingBag, backward of sum(out * coef), and returns the output's
// and the rows' gradient's bits.
func poolBits(t *testing.T, c poolCase) []byte {
	const nIDs, nBags, pad = 90, 24, int64(7)
	rng := rand.New(rand.NewSource(int64(c.dim)))
	cfg := embedding.Config{Dim: c.dim, Initializer: embedding.Zeros{}, Optimizer: embedding.SGD{LR: 1}}
	tbl := newEmbTable(t, "pool/"+c.name(), cfg)
	all := make([]int64, nIDs)
	rows := make([]float32, nIDs*c.dim)
	for i := range all {
		all[i] = int64(i)
	}
	for i := range rows {
		rows[i] = float32(rng.NormFloat64())
	}
	if err := tbl.WriteIDs(all, rows); err != nil {
		t.Fatal(err)
	}
	var ids, offsets []int64
	var weights []float32
	for b := 0; b < nBags; b++ {
		offsets = append(offsets, int64(len(ids)))
		for range rng.Intn(41) {
			ids = append(ids, rng.Int63n(nIDs))
			weights = append(weights, float32(rng.NormFloat64()))
		}
	}
	coef := make([]float32, nBags*c.dim)
	for i := range coef {
		coef[i] = float32(rng.NormFloat64())
	}
	var buf bytes.Buffer
	cgotorch.WithScope(func(*cgotorch.Scope) {
		var w *cgotorch.Tensor
		if c.weighted {
			w = cgotorch.MustFromSlice(weights)
		}
		bag := nn.NewEmbeddingBag(tbl, c.mode, nn.EmbeddingOptions{Padding: c.padded, PaddingID: pad})
		out := bag.ForwardWeighted(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offsets), w)
		out.Mul(cgotorch.MustFromSlice(coef, out.Shape()...)).Sum().Backward()
		_, grads, err := tbl.PendingGrad()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range [][]float32{f32(t, out), f32(t, grads)} {
			if err := binary.Write(&buf, binary.LittleEndian, x); err != nil {
				t.Fatal(err)
			}
		}
	})
	return buf.Bytes()
}

func poolCases() []poolCase {
	var cs []poolCase
	for _, dim := range []int{1, 5, 16, 37, 128, 200, 256, 300, 520} {
		cs = append(cs, poolCase{dim, embedding.Sum, false, false}, poolCase{dim, embedding.Sum, true, false},
			poolCase{dim, embedding.Sum, true, true}, poolCase{dim, embedding.Mean, false, true})
	}
	return cs
}

// TestBagsPoolAVX512SameNumbers checks that the AVX-512 pooling kernel (bags_kernels.cc.h) gives
// the AVX2 kernel's numbers bit for bit, forward and backward, fused and with the products
// rounded apart (weighted bags with a padding id), at row widths below, at and above the 256
// columns of one pass, multiples of 16 or not: the same poolings in a child process with
// GOREC_NO_AVX512=1 must give the same output and gradient bits.
func TestBagsPoolAVX512SameNumbers(t *testing.T) {
	if dir := os.Getenv("GOREC_POOL_OUT"); dir != "" { // the child: write each case's bits
		for _, c := range poolCases() {
			if err := os.WriteFile(dir+"/"+c.name(), poolBits(t, c), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	dir := avx512Child(t, "^TestBagsPoolAVX512SameNumbers$", "GOREC_POOL_OUT")
	for _, c := range poolCases() {
		want, err := os.ReadFile(dir + "/" + c.name())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(poolBits(t, c), want) {
			t.Errorf("%s: AVX-512 pooling differs from the AVX2 kernel's", c.name())
		}
	}
}
