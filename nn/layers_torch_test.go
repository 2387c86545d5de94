package nn_test

import (
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// NewLinear after cgotorch.ManualSeed(0) holds the very weights and bias of torch.nn.Linear(7, 5)
// after torch.manual_seed(0) (torch 1.13: /usr/bin/python3 -c "import torch;
// torch.manual_seed(0); l = torch.nn.Linear(7, 5); print(l.weight.flatten().tolist(),
// l.bias.tolist())"), bit for bit: torch's uniform_ rounds x * (to - from) + from once.
func TestNewLinearInitMatchesTorchSeed(t *testing.T) {
	wantW := []float32{-0.002829751931130886, 0.2027566134929657, -0.31108182668685913, -0.2781588137149811, -0.1455746591091156, 0.1013539582490921, -0.0074886782094836235, 0.2996840476989746, -0.033542096614837646, 0.10001414269208908, -0.11422580480575562, -0.07429473102092743, -0.36108776926994324, -0.25031909346580505, -0.15580567717552185, 0.014001153409481049, 0.14942266047000885, 0.22678729891777039, -0.25623762607574463, -0.16458947956562042, 0.13728316128253937, 0.31385713815689087, -0.07778515666723251, 0.2828352451324463, -0.06092158332467079, 0.03999396786093712, 0.34223783016204834, -0.3506264388561249, -0.23794297873973846, -0.09568746387958527, -0.14733053743839264, 0.3265615999698639, -0.24498887360095978, -0.17398947477340698, -0.2640612721443176}
	wantB := []float32{-0.3539867699146271, -0.2206331491470337, 0.32489752769470215, 0.1686546951532364, 0.1831890046596527}
	cgotorch.ManualSeed(0)
	l := nn.NewLinear(7, 5, true)
	for _, c := range []struct {
		name string
		got  *nn.Tensor
		want []float32
	}{{"weight", l.Weight, wantW}, {"bias", l.Bias, wantB}} {
		got, err := cgotorch.ToSlice[float32](c.got)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := range c.want {
			if got[i] != c.want[i] {
				if bad < 3 {
					t.Errorf("%s[%d] = %.9g, torch %.9g", c.name, i, got[i], c.want[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ from torch's", c.name, bad, len(c.want))
		}
	}
}

// BatchNorm1d in training mode takes an empty batch as torch 1.13's does (/usr/bin/python3:
// bn = torch.nn.BatchNorm1d(3).train(); y = bn(torch.zeros(shape, requires_grad=True));
// y.sum().backward()): for [0, 3], [0, 3, 4] and [2, 3, 0] an empty output of the input's shape,
// running statistics unchanged ([0 0 0] and [1 1 1]), num_batches_tracked 1, and zero
// gradients for weight and bias. Exact (tolerance 0).
func TestBatchNorm1dEmptyBatchMatchesTorch(t *testing.T) {
	for _, shape := range [][]int64{{0, 3}, {0, 3, 4}, {2, 3, 0}} {
		bn := nn.NewBatchNorm1d(3)
		x := cgotorch.Zeros(shape, cgotorch.RequiresGrad())
		var y *nn.Tensor
		if err := cgotorch.Try(func() { y = bn.Forward(x) }); err != nil {
			t.Errorf("%v: %v; torch returns an empty output", shape, err)
			continue
		}
		if !slices.Equal(y.Shape(), shape) {
			t.Errorf("%v: output shape %v", shape, y.Shape())
		}
		y.Sum().Backward()
		for _, c := range []struct {
			name string
			got  *nn.Tensor
			want []float32
		}{
			{"running_mean", bn.RunningMean, []float32{0, 0, 0}},
			{"running_var", bn.RunningVar, []float32{1, 1, 1}},
			{"weight grad", bn.Weight.Grad(), []float32{0, 0, 0}},
			{"bias grad", bn.Bias.Grad(), []float32{0, 0, 0}},
		} {
			if got, err := cgotorch.ToSlice[float32](c.got); err != nil || !slices.Equal(got, c.want) {
				t.Errorf("%v: %s %v (%v), torch %v", shape, c.name, got, err, c.want)
			}
		}
		if v, _ := bn.NumBatchesTracked.Item(); v != 1 {
			t.Errorf("%v: num_batches_tracked %v, torch 1", shape, v)
		}
	}
}
