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
}
