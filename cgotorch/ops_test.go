package cgotorch_test

// The tensor operations against reference values computed by PyTorch: testdata/gen_ops.py
// (run with Debian's /usr/bin/python3 and its python3-torch 1.13) writes testdata/ops.json with
// the inputs, outputs and gradients of every case; opCases below runs the same operation through
// gorec. Both sides name the cases identically, and the test fails when one side has a case the
// other lacks.
//
// Tolerance: floating-point values match when |got - want| <= 1e-5 + 1e-5*|want| (float32:
// absolute 1e-5 plus relative 1e-5); integer and bool values, shapes and dtypes match exactly.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/gorec/gorec/cgotorch"
)

const (
	absTol = 1e-5
	relTol = 1e-5
)

// T abbreviates the tensor type in the case table.
type T = cgotorch.Tensor

type jsonTensor struct {
	DType string    `json:"dtype"`
	Shape []int64   `json:"shape"`
	Data  []float64 `json:"data"`
}

type opCase struct {
	Name    string                `json:"name"`
	Inputs  map[string]jsonTensor `json:"inputs"`
	Outputs []jsonTensor          `json:"outputs"`
	Weight  *jsonTensor           `json:"weight"`
	Grads   map[string]jsonTensor `json:"grads"`
}

var (
	casesOnce sync.Once
	cases     []opCase
	casesErr  error
)

func loadCases(t testing.TB) []opCase {
	t.Helper()
	casesOnce.Do(func() {
		raw, err := os.ReadFile("testdata/ops.json")
		if err != nil {
			casesErr = err
			return
		}
		var file struct {
			Cases []opCase `json:"cases"`
		}
		casesErr = json.Unmarshal(raw, &file)
		cases = file.Cases
	})
	if casesErr != nil {
		t.Fatalf("loading testdata/ops.json (regenerate with /usr/bin/python3 testdata/gen_ops.py): %v", casesErr)
	}
	return cases
}

// fromJSON builds the tensor a reference file describes.
func fromJSON(j jsonTensor) *T {
	switch j.DType {
	case "float32":
		v := make([]float32, len(j.Data))
		for i, x := range j.Data {
			v[i] = float32(x)
		}
		return cgotorch.MustFromSlice(v, j.Shape...)
	case "float64":
		return cgotorch.MustFromSlice(j.Data, j.Shape...)
	case "int64":
		v := make([]int64, len(j.Data))
		for i, x := range j.Data {
			v[i] = int64(x)
		}
		return cgotorch.MustFromSlice(v, j.Shape...)
	case "bool":
		v := make([]bool, len(j.Data))
		for i, x := range j.Data {
			v[i] = x != 0
		}
		return cgotorch.MustFromSlice(v, j.Shape...)
	}
	panic("unsupported dtype in ops.json: " + j.DType)
}

// values returns t's elements as float64 (bools as 0 and 1).
func values(t testing.TB, x *T) []float64 {
	t.Helper()
	y, err := x.To(cgotorch.CPU, cgotorch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	v, err := cgotorch.ToSlice[float64](y)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkTensor compares got with the reference want: shape, dtype, then values (see tolerance).
func checkTensor(t testing.TB, label string, got *T, want jsonTensor) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: got nil tensor", label)
		return
	}
	if s := got.Shape(); !slices.Equal(s, want.Shape) {
		t.Errorf("%s: shape %v, want %v", label, s, want.Shape)
		return
	}
	if d := got.DType().String(); d != want.DType {
		t.Errorf("%s: dtype %s, want %s", label, d, want.DType)
		return
	}
	exact := !got.DType().IsFloat()
	for i, g := range values(t, got) {
		w := want.Data[i]
		if exact && g != w || !exact && !(math.Abs(g-w) <= absTol+relTol*math.Abs(w)) {
			t.Errorf("%s: element %d is %v, want %v", label, i, g, w)
			return
		}
	}
}

// inputs are a case's input tensors by name.
type inputs map[string]*T

// opFunc runs a case's operation; its first result is the one differentiated.
type opFunc func(in inputs) []*T

func one(ts ...*T) []*T { return ts }

// un is a case applying a method of one tensor to input "a".
func un(f func(*T) *T) opFunc { return func(in inputs) []*T { return one(f(in["a"])) } }

// bin is a case applying a method of two tensors to inputs "a" and "b".
func bin(f func(*T, *T) *T) opFunc { return func(in inputs) []*T { return one(f(in["a"], in["b"])) } }

// withA is a case computing one tensor from input "a" (and maybe others).
func withA(f func(a *T, in inputs) *T) opFunc {
	return func(in inputs) []*T { return one(f(in["a"], in)) }
}

// inPlace is a case running an in-place method on a clone of input "a"; the method must return
// its receiver.
func inPlace(f func(a *T, in inputs) *T) opFunc {
	return func(in inputs) []*T {
		a := in["a"].Clone()
		if r := f(a, in); r != a {
			panic("in-place method did not return its receiver")
		}
		return one(a)
	}
}

var opCases = map[string]opFunc{
	// elementwise, one tensor
	"neg":         un((*T).Neg),
	"abs":         un((*T).Abs),
	"sqrt":        un((*T).Sqrt),
	"rsqrt":       un((*T).Rsqrt),
	"exp":         un((*T).Exp),
	"log":         un((*T).Log),
	"log1p":       un((*T).Log1p),
	"sigmoid":     un((*T).Sigmoid),
	"tanh":        un((*T).Tanh),
	"relu":        un((*T).Relu),
	"gelu":        un((*T).Gelu),
	"silu":        un((*T).Silu),
	"square":      un((*T).Square),
	"reciprocal":  un((*T).Reciprocal),
	"sign":        un((*T).Sign),
	"floor":       un((*T).Floor),
	"ceil":        un((*T).Ceil),
	"round":       un((*T).Round),
	"neg_int":     un((*T).Neg),
	"abs_int":     un((*T).Abs),
	"logical_not": un((*T).LogicalNot),

	// elementwise, two tensors
	"add":               bin((*T).Add),
	"sub":               bin((*T).Sub),
	"mul":               bin((*T).Mul),
	"div":               bin((*T).Div),
	"maximum":           bin((*T).Maximum),
	"minimum":           bin((*T).Minimum),
	"remainder":         bin((*T).Remainder),
	"pow":               bin((*T).Pow),
	"add_broadcast_row": bin((*T).Add),
	"mul_broadcast_col": bin((*T).Mul),
	"add_int":           bin((*T).Add),
	"div_int":           bin((*T).Div),
	"remainder_int":     bin((*T).Remainder),
	"eq":                bin((*T).Eq),
	"ne":                bin((*T).Ne),
	"lt":                bin((*T).Lt),
	"le":                bin((*T).Le),
	"gt":                bin((*T).Gt),
	"ge":                bin((*T).Ge),
	"logical_and":       bin((*T).LogicalAnd),
	"logical_or":        bin((*T).LogicalOr),

	// elementwise with a scalar
	"add_scalar":           withA(func(a *T, _ inputs) *T { return a.AddScalar(2) }),
	"sub_scalar":           withA(func(a *T, _ inputs) *T { return a.SubScalar(0.5) }),
	"mul_scalar":           withA(func(a *T, _ inputs) *T { return a.MulScalar(3) }),
	"div_scalar":           withA(func(a *T, _ inputs) *T { return a.DivScalar(4) }),
	"pow_scalar":           withA(func(a *T, _ inputs) *T { return a.PowScalar(2) }),
	"pow_scalar_half":      withA(func(a *T, _ inputs) *T { return a.PowScalar(0.5) }),
	"remainder_scalar":     withA(func(a *T, _ inputs) *T { return a.RemainderScalar(1.5) }),
	"add_scalar_int":       withA(func(a *T, _ inputs) *T { return a.AddScalar(1) }),
	"mul_scalar_int_frac":  withA(func(a *T, _ inputs) *T { return a.MulScalar(0.5) }),
	"remainder_scalar_int": withA(func(a *T, _ inputs) *T { return a.RemainderScalar(3) }),
	"eq_scalar":            withA(func(a *T, _ inputs) *T { return a.EqScalar(0.25) }),
	"ne_scalar":            withA(func(a *T, _ inputs) *T { return a.NeScalar(0.25) }),
	"lt_scalar":            withA(func(a *T, _ inputs) *T { return a.LtScalar(0.25) }),
	"le_scalar":            withA(func(a *T, _ inputs) *T { return a.LeScalar(0.25) }),
	"gt_scalar":            withA(func(a *T, _ inputs) *T { return a.GtScalar(0.25) }),
	"ge_scalar":            withA(func(a *T, _ inputs) *T { return a.GeScalar(0.25) }),
	"clamp":                withA(func(a *T, _ inputs) *T { return a.Clamp(-1, 1) }),
	"clamp_min":            withA(func(a *T, _ inputs) *T { return a.ClampMin(0.3) }),
	"clamp_max":            withA(func(a *T, _ inputs) *T { return a.ClampMax(0.3) }),
	"clamp_int":            withA(func(a *T, _ inputs) *T { return a.Clamp(-3, 3) }),
	"where":                withA(func(a *T, in inputs) *T { return cgotorch.Where(in["c"], a, in["b"]) }),
	"masked_fill":          withA(func(a *T, in inputs) *T { return a.MaskedFill(in["m"], -1) }),

	// in place
	"add_inplace":            inPlace(func(a *T, in inputs) *T { return a.AddInPlace(in["b"]) }),
	"add_scaled_inplace":     inPlace(func(a *T, in inputs) *T { return a.AddScaledInPlace(in["b"], -0.5) }),
	"sub_inplace":            inPlace(func(a *T, in inputs) *T { return a.SubInPlace(in["b"]) }),
	"mul_inplace":            inPlace(func(a *T, in inputs) *T { return a.MulInPlace(in["b"]) }),
	"div_inplace":            inPlace(func(a *T, in inputs) *T { return a.DivInPlace(in["b"]) }),
	"copy_from":              inPlace(func(a *T, in inputs) *T { return a.CopyFrom(in["b"]) }),
	"add_scalar_inplace":     inPlace(func(a *T, _ inputs) *T { return a.AddScalarInPlace(2) }),
	"sub_scalar_inplace":     inPlace(func(a *T, _ inputs) *T { return a.SubScalarInPlace(0.25) }),
	"mul_scalar_inplace":     inPlace(func(a *T, _ inputs) *T { return a.MulScalarInPlace(-3) }),
	"div_scalar_inplace":     inPlace(func(a *T, _ inputs) *T { return a.DivScalarInPlace(8) }),
	"fill":                   inPlace(func(a *T, _ inputs) *T { return a.Fill(7.5) }),
	"zero":                   inPlace(func(a *T, _ inputs) *T { return a.Zero() }),
	"add_scalar_inplace_int": inPlace(func(a *T, _ inputs) *T { return a.AddScalarInPlace(3) }),

	// reductions
	"sum":            un((*T).Sum),
	"sum_dim":        withA(func(a *T, _ inputs) *T { return a.SumDim([]int64{1}, false) }),
	"sum_dims_keep":  withA(func(a *T, _ inputs) *T { return a.SumDim([]int64{0, 1}, true) }),
	"sum_int":        un((*T).Sum),
	"mean":           un((*T).Mean),
	"mean_dim_keep":  withA(func(a *T, _ inputs) *T { return a.MeanDim([]int64{0}, true) }),
	"prod":           un((*T).Prod),
	"prod_dim":       withA(func(a *T, _ inputs) *T { return a.ProdDim([]int64{1}, false) }),
	"prod_dims_keep": withA(func(a *T, _ inputs) *T { return a.ProdDim([]int64{0, -1}, true) }),
	"max":            un((*T).Max),
	"min":            un((*T).Min),
	"amax":           withA(func(a *T, _ inputs) *T { return a.Amax([]int64{1}, false) }),
	"amin_keep":      withA(func(a *T, _ inputs) *T { return a.Amin([]int64{0}, true) }),
	"logsumexp":      withA(func(a *T, _ inputs) *T { return a.LogSumExp([]int64{1}, false) }),
	"logsumexp_all":  withA(func(a *T, _ inputs) *T { return a.LogSumExp(nil, false) }),
	"std":            un((*T).Std),
	"std_dim":        withA(func(a *T, _ inputs) *T { return a.StdDim([]int64{1}, false) }),
	"var":            un((*T).Var),
	"var_dim_keep":   withA(func(a *T, _ inputs) *T { return a.VarDim([]int64{0}, true) }),
	"norm":           un((*T).Norm),
	"norm_dim":       withA(func(a *T, _ inputs) *T { return a.NormDim([]int64{1}, false) }),
	"any":            un((*T).Any),
	"any_dim":        withA(func(a *T, _ inputs) *T { return a.AnyDim([]int64{1}, false) }),
	"all":            un((*T).All),
	"all_dim_keep":   withA(func(a *T, _ inputs) *T { return a.AllDim([]int64{0}, true) }),
	"max_dim":        func(in inputs) []*T { return one(in["a"].MaxDim(1, false)) },
	"min_dim_keep":   func(in inputs) []*T { return one(in["a"].MinDim(0, true)) },
	"argmax":         withA(func(a *T, _ inputs) *T { return a.Argmax(1, false) }),
	"argmin_keep":    withA(func(a *T, _ inputs) *T { return a.Argmin(0, true) }),
	"topk":           func(in inputs) []*T { return one(in["a"].TopK(2, 1, true, true)) },
	"topk_smallest":  func(in inputs) []*T { return one(in["a"].TopK(1, 0, false, true)) },
	"sort":           func(in inputs) []*T { return one(in["a"].Sort(1, false)) },
	"sort_desc_int":  func(in inputs) []*T { return one(in["a"].Sort(0, true)) },

	// shapes
	"reshape":       withA(func(a *T, _ inputs) *T { return a.Reshape(3, 2) }),
	"reshape_infer": withA(func(a *T, _ inputs) *T { return a.Reshape(-1) }),
	"view":          withA(func(a *T, _ inputs) *T { return a.View(1, 6) }),
	"expand":        withA(func(a *T, _ inputs) *T { return a.Expand(2, 3) }),
	"permute":       withA(func(a *T, _ inputs) *T { return a.Permute(2, 0, 1) }),
	"transpose":     withA(func(a *T, _ inputs) *T { return a.Transpose(0, 1) }),
	"squeeze_all":   withA(func(a *T, _ inputs) *T { return a.Reshape(1, 2, 1, 3).Squeeze() }),
	"squeeze_dim":   withA(func(a *T, _ inputs) *T { return a.Reshape(1, 2, 1, 3).Squeeze(2) }),
	"unsqueeze":     withA(func(a *T, _ inputs) *T { return a.Unsqueeze(1) }),
	"flatten":       withA(func(a *T, _ inputs) *T { return a.Flatten(1, 2) }),
	"contiguous":    withA(func(a *T, _ inputs) *T { return a.Transpose(0, 1).Contiguous() }),
	"clone":         un((*T).Clone),
	"narrow":        withA(func(a *T, _ inputs) *T { return a.Narrow(1, 1, 2) }),
	"cat":           withA(func(a *T, in inputs) *T { return cgotorch.Cat([]*T{a, in["b"]}, 0) }),
	"cat_dim1":      withA(func(a *T, in inputs) *T { return cgotorch.Cat([]*T{a, in["b"], in["c"]}, 1) }),
	"stack":         withA(func(a *T, in inputs) *T { return cgotorch.Stack([]*T{a, in["b"]}, 1) }),

	// indexing
	"index_select":        withA(func(a *T, in inputs) *T { return a.IndexSelect(0, in["i"]) }),
	"index_select_dim1":   withA(func(a *T, in inputs) *T { return a.IndexSelect(1, in["i"]) }),
	"gather":              withA(func(a *T, in inputs) *T { return a.Gather(1, in["i"]) }),
	"index_add":           withA(func(a *T, in inputs) *T { return a.IndexAdd(0, in["i"], in["s"]) }),
	"index_add_inplace":   inPlace(func(a *T, in inputs) *T { return a.IndexAddInPlace(0, in["i"], in["s"]) }),
	"scatter":             withA(func(a *T, in inputs) *T { return a.Scatter(0, in["i"], in["s"]) }),
	"scatter_inplace":     inPlace(func(a *T, in inputs) *T { return a.ScatterInPlace(1, in["i"], in["s"]) }),
	"scatter_add":         withA(func(a *T, in inputs) *T { return a.ScatterAdd(0, in["i"], in["s"]) }),
	"scatter_add_inplace": inPlace(func(a *T, in inputs) *T { return a.ScatterAddInPlace(1, in["i"], in["s"]) }),
	"unique": func(in inputs) []*T {
		u := in["a"].Unique(true, true, true)
		return one(u.Values, u.Inverse, u.Counts)
	},
	"unique_values": func(in inputs) []*T {
		u := in["a"].Unique(true, false, false)
		if u.Inverse != nil || u.Counts != nil {
			panic("Unique returned results it was not asked for")
		}
		return one(u.Values)
	},

	// layers
	"mm":             bin((*T).MM),
	"matmul_batched": bin((*T).Matmul),
	"matmul_vector":  bin((*T).Matmul),
	"linear":         withA(func(a *T, in inputs) *T { return cgotorch.Linear(a, in["w"], in["b"]) }),
	"linear_nobias":  withA(func(a *T, in inputs) *T { return cgotorch.Linear(a, in["w"], nil) }),
	"linear_batched": withA(func(a *T, in inputs) *T { return cgotorch.Linear(a, in["w"], in["b"]) }),
	"softmax":        withA(func(a *T, _ inputs) *T { return a.Softmax(1) }),
	"softmax_dim0":   withA(func(a *T, _ inputs) *T { return a.Softmax(0) }),
	"log_softmax":    withA(func(a *T, _ inputs) *T { return a.LogSoftmax(1) }),
	"dropout_eval":   withA(func(a *T, _ inputs) *T { return a.Dropout(0.5, false) }),
	"dropout_p0":     withA(func(a *T, _ inputs) *T { return a.Dropout(0, true) }),
}

func init() {
	losses := map[string]func(input, target *T, r cgotorch.Reduction) *T{
		"mse":                 cgotorch.MSELoss,
		"l1":                  cgotorch.L1Loss,
		"smooth_l1":           cgotorch.SmoothL1Loss,
		"bce":                 cgotorch.BCELoss,
		"bce_with_logits":     cgotorch.BCEWithLogitsLoss,
		"cross_entropy":       cgotorch.CrossEntropyLoss,
		"cross_entropy_probs": cgotorch.CrossEntropyLoss,
		"nll":                 cgotorch.NLLLoss,
	}
	for name, f := range losses {
		for _, r := range []cgotorch.Reduction{cgotorch.ReduceNone, cgotorch.ReduceMean, cgotorch.ReduceSum} {
			opCases[name+"_loss_"+r.String()] = func(in inputs) []*T {
				return one(f(in["input"], in["target"], r))
			}
		}
	}
}

// runCase builds the inputs of c (leaves requiring grad where c has gradients), runs it and
// checks outputs and gradients.
func runCase(t testing.TB, c opCase, fn opFunc) {
	t.Helper()
	in := inputs{}
	for name, j := range c.Inputs {
		in[name] = fromJSON(j)
	}
	for name := range c.Grads {
		in[name].SetRequiresGrad(true)
	}
	outs := fn(in)
	if len(outs) != len(c.Outputs) {
		t.Fatalf("%d outputs, want %d", len(outs), len(c.Outputs))
	}
	for i, want := range c.Outputs {
		checkTensor(t, fmt.Sprintf("output %d", i), outs[i], want)
	}
	if c.Grads == nil {
		return
	}
	outs[0].Mul(fromJSON(*c.Weight)).Sum().Backward()
	for name, want := range c.Grads {
		checkTensor(t, "gradient of "+name, in[name].Grad(), want)
	}
}

func TestOpsMatchPyTorch(t *testing.T) {
	all := loadCases(t)
	seen := map[string]bool{}
	for _, c := range all {
		seen[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			fn, ok := opCases[c.Name]
			if !ok {
				t.Fatalf("ops.json has case %q but opCases lacks it", c.Name)
			}
			if err := cgotorch.Try(func() { runCase(t, c, fn) }); err != nil {
				t.Fatal(err)
			}
		})
	}
	var missing []string
	for name := range opCases {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("opCases has cases that ops.json lacks (rerun gen_ops.py?): %v", missing)
	}
}
