package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// ClipGradNorm gives torch.nn.utils.clip_grad_norm_'s total norm and clipped gradients (norms 2,
// inf, 1 and 3; and a max norm that clips nothing), within the optimizer tolerance.
func TestClipGradNormMatchesPyTorch(t *testing.T) {
	mlp := refCaseNamed(t, "mlp")
	for _, name := range []string{"clip_l2", "clip_inf", "clip_l1", "clip_p3", "clip_none"} {
		t.Run(name, func(t *testing.T) {
			c := refCaseNamed(t, name)
			normType := math.Inf(1)
			if v, ok := c.Config["norm_type"].(float64); ok {
				normType = v
			}
			model := newMLP()
			mlp.setState(t, model, "init.")
			nn.BCEWithLogits(nn.ReduceMean)(model.Forward(mlp.tensor(t, "x0")), mlp.tensor(t, "y0")).Backward()
			total, err := nn.ClipGradNorm(model.Parameters(), cfgFloat(c, "max_norm", 0), normType)
			if err != nil {
				t.Fatal(err)
			}
			c.checkClose(t, "total norm", cgotorch.Scalar(float32(total)), "total", optAbs, optRel)
			for _, p := range model.Parameters() {
				c.checkClose(t, "grad "+p.Name, p.Tensor.Grad(), "grad."+p.Name, optAbs, optRel)
			}
		})
	}
}

func TestClipGradNormEdges(t *testing.T) {
	lin := nn.NewLinear(2, 1, true)
	if total, err := nn.ClipGradNorm(lin.Parameters(), 1, 2); err != nil || total != 0 {
		t.Errorf("no gradients: %v, %v", total, err)
	}
	for _, c := range []struct{ max, norm float64 }{{-1, 2}, {1, 0}, {1, math.NaN()}, {math.NaN(), 2}} {
		if _, err := nn.ClipGradNorm(lin.Parameters(), c.max, c.norm); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("max norm %v, norm type %v: %v", c.max, c.norm, err)
		}
	}
	closed := cgotorch.MustFromSlice([]float32{1})
	closed.Close()
	if _, err := nn.ClipGradNorm([]nn.NamedParameter{{Name: "x", Tensor: closed}}, 1, 2); err == nil {
		t.Errorf("a closed parameter: no error")
	}
	// A parameter listed twice (a module shared under two names) counts once: grad [3, 4],
	// total 5, scaled once to [0.6, 0.8] by max norm 1 (torch's parameters() lists it once).
	p := cgotorch.MustFromSlice([]float32{0, 0}).SetRequiresGrad(true)
	p.Mul(cgotorch.MustFromSlice([]float32{3, 4})).Sum().Backward()
	total, err := nn.ClipGradNorm([]nn.NamedParameter{{Name: "a.w", Tensor: p}, {Name: "b.w", Tensor: p}}, 1, 2)
	g, _ := cgotorch.ToSlice[float32](p.Grad())
	if err != nil || math.Abs(total-5) > 1e-6 || math.Abs(float64(g[0])-0.6) > 1e-6 || math.Abs(float64(g[1])-0.8) > 1e-6 {
		t.Errorf("a parameter listed twice: total %v, grad %v (%v); want 5 and [0.6 0.8]", total, g, err)
	}
}

// A non-finite total norm is not checked, as in torch 1.13 (error_if_nonfinite=False): the
// coefficient max_norm/(total+1e-6), NaN or 0, multiplies every gradient. The values are torch's
// (p.grad = g, q.grad = [0.5, -4], clip_grad_norm_([p, q], max_norm, norm_type)); the finite
// ones are exact (0 times a finite value).
func TestClipGradNormNonFiniteTotal(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		name          string
		g             []float32
		maxNorm, norm float64
		total         float64
		p, q          []float64
	}{
		{"nan l2", []float32{1, float32(nan), 3}, 1, 2, nan, []float64{nan, nan, nan}, []float64{nan, nan}},
		{"nan inf-norm", []float32{1, float32(nan), 3}, 1, inf, nan, []float64{nan, nan, nan}, []float64{nan, nan}},
		{"inf total, inf max norm", []float32{1, float32(inf), 3}, inf, 2, inf, []float64{nan, nan, nan}, []float64{nan, nan}},
		{"inf total", []float32{1, float32(inf), 3}, 1, 2, inf, []float64{0, nan, 0}, []float64{0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := cgotorch.MustFromSlice([]float32{1, 2, 3}).SetRequiresGrad(true)
			q := cgotorch.MustFromSlice([]float32{1, 1}).SetRequiresGrad(true)
			p.Mul(cgotorch.MustFromSlice(c.g)).Sum().Add(q.Mul(cgotorch.MustFromSlice([]float32{0.5, -4})).Sum()).Backward()
			total, err := nn.ClipGradNorm([]nn.NamedParameter{{Name: "p", Tensor: p}, {Name: "q", Tensor: q}}, c.maxNorm, c.norm)
			if err != nil {
				t.Fatal(err)
			}
			same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
			if !same(total, c.total) {
				t.Errorf("total %v, torch %v", total, c.total)
			}
			for _, x := range []struct {
				name string
				t    *cgotorch.Tensor
				want []float64
			}{{"p", p, c.p}, {"q", q, c.q}} {
				got, err := cgotorch.ToSlice[float32](x.t.Grad())
				if err != nil {
					t.Fatal(err)
				}
				for i := range x.want {
					if !same(float64(got[i]), x.want[i]) {
						t.Errorf("grad %s = %v, torch %v", x.name, got, x.want)
						break
					}
				}
			}
		})
	}
}

// The coefficient is computed in the total norm's dtype: float64 gradients [1, 2, 3] clipped to
// norm 1 give torch's float64 values within 1e-15 relative (float32 arithmetic is off by ~1e-8).
func TestClipGradNormFloat64(t *testing.T) {
	p := cgotorch.MustFromSlice([]float64{1, 2, 3}).SetRequiresGrad(true)
	p.Mul(cgotorch.MustFromSlice([]float64{1, 2, 3})).Sum().Backward()
	total, err := nn.ClipGradNorm([]nn.NamedParameter{{Name: "p", Tensor: p}}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3.7416573867739413; math.Abs(total-want) > 1e-15*want {
		t.Errorf("total %.17g, torch %.17g", total, want)
	}
	got, err := cgotorch.ToSlice[float64](p.Grad())
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.26726117048387205, 0.5345223409677441, 0.8017835114516161}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-15*want[i] {
			t.Errorf("grad[%d] = %.17g, torch %.17g", i, got[i], want[i])
		}
	}
}
