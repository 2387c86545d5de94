package cgotorch_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
)

// Behaviour that a table of reference values cannot show: random or unordered results, views,
// concurrency, memory, and the coverage of the tests themselves.

func TestUniqueUnsorted(t *testing.T) {
	in := []int64{3, 1, 3, 2, 1, 3, 5, 2}
	x := cgotorch.MustFromSlice(in, 2, 4)
	u := x.Unique(false, true, true)
	vals, err := cgotorch.ToSlice[int64](u.Values)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := cgotorch.ToSlice[int64](u.Inverse)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := cgotorch.ToSlice[int64](u.Counts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(u.Inverse.Shape(), []int64{2, 4}) {
		t.Errorf("inverse shape %v", u.Inverse.Shape())
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	if !slices.Equal(sorted, []int64{1, 2, 3, 5}) {
		t.Errorf("values %v", vals)
	}
	for i, v := range in {
		if vals[inv[i]] != v {
			t.Errorf("values[inverse[%d]] = %d, want %d", i, vals[inv[i]], v)
		}
	}
	want := map[int64]int64{1: 2, 2: 2, 3: 3, 5: 1}
	for i, v := range vals {
		if counts[i] != want[v] {
			t.Errorf("count of %d is %d, want %d", v, counts[i], want[v])
		}
	}
}

func TestDropoutTrain(t *testing.T) {
	cgotorch.ManualSeed(7)
	x := cgotorch.Ones([]int64{4000})
	zeros := 0
	for _, v := range values(t, x.Dropout(0.25, true)) {
		if v == 0 {
			zeros++
		} else if math.Abs(v-1/0.75) > 1e-6 {
			t.Fatalf("kept value %v, want 1/(1-p)", v)
		}
	}
	if zeros < 800 || zeros > 1200 {
		t.Errorf("%d of 4000 zeroed with p = 0.25", zeros)
	}
	for _, v := range values(t, x.Dropout(1, true)) {
		if v != 0 {
			t.Fatal("p = 1 kept a value")
		}
	}
	cgotorch.ManualSeed(7)
	a := values(t, x.Dropout(0.5, true))
	cgotorch.ManualSeed(7)
	if b := values(t, x.Dropout(0.5, true)); !slices.Equal(a, b) {
		t.Error("the same seed gave another mask")
	}
}

// Split cuts views of the given sizes, and its backward pass joins their gradients: a piece
// without a gradient contributes zeros. Sizes that do not add up are refused.
func TestSplit(t *testing.T) {
	x := cgotorch.MustFromSlice([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 4).SetRequiresGrad(true)
	p := x.Split([]int64{1, 2, 1}, 1)
	if len(p) != 3 || fmt.Sprint(p[1].Shape()) != "[2 2]" || !slices.Equal(values(t, p[1]), []float64{2, 3, 6, 7}) {
		t.Fatalf("pieces %v", p)
	}
	p[0].MulScalar(2).Sum().Add(p[1].MulScalar(3).Sum()).Backward() // p[2] unused
	if got := values(t, x.Grad()); !slices.Equal(got, []float64{2, 3, 3, 0, 2, 3, 3, 0}) {
		t.Errorf("gradient %v", got)
	}
	if err := cgotorch.Try(func() { x.Split([]int64{1, 1}, 1) }); !errors.Is(err, cgotorch.ErrTorch) {
		t.Errorf("sizes adding up to 2 of 4: %v, want ErrTorch", err)
	}
	if err := cgotorch.Try(func() { x.Split(nil, 1) }); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("no sizes: %v, want ErrInvalidArgument", err)
	}
}

// Views share storage with their base; Clone and Contiguous-of-a-non-contiguous copy it.
func TestViewsShareStorage(t *testing.T) {
	x := cgotorch.Zeros([]int64{2, 3})
	x.Narrow(1, 1, 1).Fill(5)
	x.Transpose(0, 1).Narrow(0, 0, 1).Fill(1) // column 0
	x.Reshape(6).Narrow(0, 5, 1).Fill(9)
	c := x.Clone()
	c.Zero()
	x.Transpose(0, 1).Contiguous().Fill(-1) // a copy: x unchanged
	if got := values(t, x); !slices.Equal(got, []float64{1, 5, 0, 1, 5, 9}) {
		t.Errorf("x = %v", got)
	}
	e := cgotorch.MustFromSlice([]float32{1, 2}, 2, 1).Expand(2, 3)
	if got := values(t, e.Contiguous()); !slices.Equal(got, []float64{1, 1, 1, 2, 2, 2}) {
		t.Errorf("expanded = %v", got)
	}
}

// Operations on shared inputs from many goroutines (run with -race).
func TestOpsConcurrent(t *testing.T) {
	x := cgotorch.MustFromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	w := cgotorch.MustFromSlice([]float32{0.5, -1, 0.25, 2, 1.5, 0.75}, 3, 2)
	want := values(t, x.MM(w).Sigmoid().SumDim([]int64{1}, false))
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				y := x.MM(w).Sigmoid().SumDim([]int64{1}, false)
				got := values(t, y)
				y.Close()
				if !slices.Equal(got, want) {
					errs <- "different result"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// Running every reference case inside a scope returns the C memory to where it was: no op
// leaks (outputs, gradients, autograd graphs and temporaries are all released).
func TestOpsReleaseMemory(t *testing.T) {
	all := loadCases(t)
	before := settledLiveBytes()
	cgotorch.WithScope(func(*cgotorch.Scope) {
		grew := false // some case keeps memory live in the scope (garbage of earlier tests, freed meanwhile, can hide the sum)
		for _, c := range all {
			start := cgotorch.LiveBytes()
			if err := cgotorch.Try(func() { runCase(t, c, opCases[c.Name]) }); err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			grew = grew || cgotorch.LiveBytes() > start
		}
		if !grew {
			t.Error("the cases allocated nothing?")
		}
	})
	if after := cgotorch.LiveBytes(); after > before {
		t.Errorf("live bytes %d after the scope, %d before", after, before)
	}
}

// settledLiveBytes collects the garbage of earlier tests and waits for its cleanups to free
// their tensors (at most a second), so that what follows measures its own memory.
func settledLiveBytes() int64 {
	runtime.GC()
	runtime.GC()
	last := cgotorch.LiveBytes()
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		now := cgotorch.LiveBytes()
		if now == last {
			break
		}
		last = now
	}
	return last
}

func TestReductionString(t *testing.T) {
	for r, want := range map[cgotorch.Reduction]string{
		cgotorch.ReduceNone: "none", cgotorch.ReduceMean: "mean", cgotorch.ReduceSum: "sum",
		cgotorch.Reduction(9): "Reduction(9)",
	} {
		if got := r.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(r), got, want)
		}
	}
}

// TestEveryOpIsTested fails when an exported function or method of the operation files is not
// called by some test of this package.
func TestEveryOpIsTested(t *testing.T) {
	files, err := filepath.Glob("ops_*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "loss.go")
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.IsExported() {
				names = append(names, fn.Name.Name)
			}
		}
	}
	tests, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	var untested []string
	for _, n := range names {
		if !regexp.MustCompile(`\.` + n + `\b`).MatchString(src.String()) {
			untested = append(untested, n)
		}
	}
	sort.Strings(untested)
	if len(names) < 50 || len(untested) > 0 {
		t.Errorf("%d operations found; not called by any test: %v", len(names), untested)
	}
}

// TestScalarNegativeZero: -0.0 is a float scalar, not the integer 0, so its sign survives as in
// PyTorch: x / -0.0 is -inf for x > 0 and x * -0.0 is -0 (both once gave +inf and +0).
func TestScalarNegativeZero(t *testing.T) {
	negZero := math.Copysign(0, -1)
	x := cgotorch.MustFromSlice([]float32{1, 2})
	for _, v := range values(t, x.DivScalar(negZero)) {
		if !math.IsInf(v, -1) {
			t.Errorf("x / -0.0 = %v, want -Inf", v)
		}
	}
	for _, v := range values(t, x.MulScalar(negZero)) {
		if v != 0 || !math.Signbit(v) {
			t.Errorf("x * -0.0 = %v (sign bit %v), want -0", v, math.Signbit(v))
		}
	}
	y := x.Clone().MulScalarInPlace(negZero)
	for _, v := range values(t, y) {
		if v != 0 || !math.Signbit(v) {
			t.Errorf("x *= -0.0 gives %v, want -0", v)
		}
	}
	// A float scalar promotes an integer tensor, as PyTorch's int64 tensor * -0.0 does.
	if p := cgotorch.MustFromSlice([]int64{3}).MulScalar(negZero); p.DType() != cgotorch.Float32 || !math.Signbit(values(t, p)[0]) {
		t.Errorf("int64 * -0.0: %v %v, want Float32 -0", p.DType(), values(t, p))
	}
	if p := cgotorch.MustFromSlice([]int64{3}).MulScalar(0); p.DType() != cgotorch.Int64 {
		t.Errorf("int64 * 0: %v, want Int64", p.DType())
	}
}

// TestLargeIntegralScalar: every integral scalar that fits int64 acts as an integer, however
// large: Int64 [1] + 1e16 stays Int64 and exact (values of 9e15 and more once became floats and
// the result Float32). 2^63 does not fit and is a float; -2^63 fits.
func TestLargeIntegralScalar(t *testing.T) {
	ints := func(x *T) []int64 {
		t.Helper()
		if x.DType() != cgotorch.Int64 {
			t.Fatalf("dtype %v, want Int64", x.DType())
		}
		v, err := cgotorch.ToSlice[int64](x)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	x := cgotorch.MustFromSlice([]int64{1})
	if got := ints(x.AddScalar(1e16)); got[0] != 10000000000000001 {
		t.Errorf("1 + 1e16 = %d", got[0])
	}
	if got := ints(x.AddScalar(-9223372036854775808)); got[0] != math.MinInt64+1 {
		t.Errorf("1 + -2^63 = %d", got[0])
	}
	if got := ints(x.MulScalar(1 << 62)); got[0] != 1<<62 {
		t.Errorf("1 * 2^62 = %d", got[0])
	}
	y := cgotorch.MustFromSlice([]int64{5})
	y.SubScalarInPlace(1e16)
	if got := ints(y); got[0] != -9999999999999995 {
		t.Errorf("5 -= 1e16 gives %d", got[0])
	}
	y.AddScalarInPlace(1e16)
	if got := ints(y.Clone().Fill(4.5e15)); got[0] != 4500000000000000 {
		t.Errorf("fill 4.5e15 gives %d", got[0])
	}
	if p := x.AddScalar(9223372036854775808); p.DType() != cgotorch.Float32 {
		t.Errorf("int64 + 2^63: dtype %v, want Float32 (2^63 does not fit int64)", p.DType())
	}
	if err := cgotorch.Try(func() { y.AddScalarInPlace(9223372036854775808) }); err == nil {
		t.Error("int64 += 2^63 did not fail (PyTorch: result type Float can't be cast to Long)")
	}
	if got := values(t, cgotorch.MustFromSlice([]float64{0.5}).AddScalar(1e17)); got[0] != 1e17 {
		t.Errorf("0.5 + 1e17 = %v", got[0])
	}
}
