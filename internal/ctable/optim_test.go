package ctable_test

import (
	"math"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// The rules without a PyTorch fixture (FTRL-Proximal, row-wise Adagrad, AdamW), over four steps
// with every option set, on the raw kernels and the tensor kernels, both layouts: repeated ids
// in a step (summed first), a row present with a zero gradient, a row first updated at step 2,
// a row never updated (must not move), and the learning rate changed before step 3.
//
// The references come from testdata/table_optim_ref.py (run with /usr/bin/python3: numpy 1.24,
// torch 1.13), float64 except AdamW:
//   - FTRL: tf.raw_ops.ApplyFtrlV2's formula (lr_power -0.5, l2_shrinkage 0) with McMahan's beta
//     folded in as Keras does (l2_tf = l2/2 + beta/(2 lr)): quadratic = (beta + sqrt(n'))/lr + l2.
//   - row-wise Adagrad: FBGEMM's rowwise_adagrad (momentum1 += sum(g^2)/D;
//     w -= lr / (sqrt(momentum1) + eps) * g) with torch Adagrad's clr = lr / (1 + (t-1) lr_decay).
//   - AdamW: torch.optim.AdamW (float32) stepping each touched row alone, its state's step set to
//     the table's step before each step.
func TestTableOptimizersReference(t *testing.T) {
	ids := []int64{10, 11, 12, 13}
	initial := []float32{
		0.5, -0.25, 1.0, 0.125, -1.5,
		-0.75, 0.3, 0.0, 2.0, 0.6,
		1.25, -1.0, 0.4, -0.2, 0.05,
		0.9, 0.9, 0.9, 0.9, 0.9,
	}
	type step struct {
		rows  []int
		grads []float32
	}
	steps := []step{
		{[]int{0, 1, 0}, []float32{1, -2, 3, 0.5, -0.25, 0.5, 0.5, -0.5, 1, 2, -0.5, 1, 0.25, 0.5, 0.75}},
		{[]int{1, 2}, []float32{0, 0, 0, 0, 0, 2, -1, 0.5, 0.25, -3}},
		{[]int{0, 2, 2}, []float32{0.3, -0.7, 1.1, -0.2, 0.4, 1, 1, 1, 1, 1, -0.5, 0.25, 0, 2, -1}},
		{[]int{0, 1}, []float32{-1, 0.5, 0.5, -2, 1, 1.5, -0.5, 0.25, 0.75, -1}},
	}
	cases := []struct {
		name   string
		opt    ctable.Optimizer
		params [8]float64
		lr3    float64 // the rate set before step 3
		rows   [][]float64
		states [][][]float64
	}{
		{"FTRL", ctable.OptFTRL, [8]float64{0.1, 1, 0.01, 0.1, 0.1}, 0.05,
			[][]float64{{0.0419926405, -0.0170020597, 0.301615372, 0.0330784287, -0.18897024}, {-0.139694002, 0.024960172, 0.00822559718, 0.35041401, 0.161029141}, {0.317459122, -0.211289018, 0.000294623442, -0.0613886769, 0.0539607891}, {0.9, 0.9, 0.9, 0.9, 0.9}},
			[][][]float64{
				{{-1.86187545, 0.812995716, -27.0753835, -2.17475612, 8.45251221}, {7.32284566, -0.898380779, -0.280994212, -16.0896558, -10.5197858}, {-19.6331982, 11.1521865, -0.0227683613, 4.96033646, -4.35019645}, {0, 0, 0, 0, 0}},
				{{1.44, 1.84, 12.1225, 5.14, 1.51}, {2.6, 0.6, 0.4125, 1.6625, 5.1}, {4.35, 2.6625, 1.35, 9.1625, 9.1}, {0.1, 0.1, 0.1, 0.1, 0.1}},
			}},
		{"RowWiseAdagrad", ctable.OptRowWiseAdagrad, [8]float64{0.1, 0.1, 0.2, 1e-3}, 0.05,
			[][]float64{{0.481332447, -0.183188809, 0.771706865, 0.10625792, -1.55719429}, {-0.832088684, 0.270034716, 0.0364807196, 1.89446144, 0.454077145}, {1.13722251, -0.970433415, 0.356159375, -0.266623916, 0.205755154}, {0.9, 0.9, 0.9, 0.9, 0.9}},
			[][][]float64{{{4.5105}, {2.175}, {5.425}, {0.2}}}},
		{"AdamW", ctable.OptAdamW, [8]float64{0.05, 0.8, 0.95, 1e-3, 0.3}, 0.02,
			[][]float64{{0.425528288, -0.169604346, 0.895005167, 0.0729316622, -1.54474413}, {-0.818792045, 0.212304384, 0.0821088254, 1.83333802, 0.496387839}, {1.17089891, -0.944512963, 0.335790575, -0.248870596, 0.0988495201}, {0.9, 0.9, 0.9, 0.9, 0.9}},
			[][][]float64{
				{{-0.0879999921, -0.140000015, 0.692000091, -0.30399999, 0.328000009}, {0.364000022, -0.0359999985, -0.0140000023, 0.277999997, 0.0560000092}, {0.420000017, 0.0899999887, 0.280000001, 0.639999986, -0.480000019}, {0, 0, 0, 0, 0}},
				{{0.0655562505, 0.0808999985, 0.546607852, 0.247024998, 0.0688812509}, {0.123781256, 0.0237812512, 0.0144062499, 0.0732500032, 0.230499998}, {0.202500001, 0.125624999, 0.0618750006, 0.452968776, 0.42750001}, {0, 0, 0, 0, 0}},
			}},
	}
	// |got - want| <= 1e-5 * max(1, |want|): float32 storage over four steps.
	near := func(got float32, want float64) bool {
		return math.Abs(float64(got)-want) <= 1e-5*math.Max(1, math.Abs(want))
	}
	for _, c := range cases {
		for _, kernels := range []bool{false, true} {
			for _, layout := range []ctable.Layout{ctable.LayoutSeparate, ctable.LayoutInterleaved} {
				name := c.name
				if kernels {
					name += "/tensor-kernels"
				}
				tbl, err := ctable.New("optim-ref", ctable.Config{Dim: 5, Init: ctable.InitZeros,
					Optimizer: c.opt, OptParams: c.params, Device: cgotorch.CPU, BlockRows: 2, TensorKernels: kernels,
					Layout: layout})
				if err != nil {
					t.Fatal(err)
				}
				keys := cgotorch.MustFromSlice(ids)
				vals := cgotorch.MustFromSlice(initial, 4, 5)
				if err := tbl.Write(keys, vals); err != nil {
					t.Fatal(err)
				}
				keys.Close()
				vals.Close()
				for s, st := range steps {
					if s == 2 {
						if err := tbl.SetLR(c.lr3); err != nil {
							t.Fatal(err)
						}
					}
					k := make([]int64, len(st.rows))
					for i, r := range st.rows {
						k[i] = ids[r]
					}
					keys := cgotorch.MustFromSlice(k)
					grads := cgotorch.MustFromSlice(st.grads, int64(len(k)), 5)
					if err := tbl.Update(keys, grads); err != nil {
						t.Fatal(err)
					}
					keys.Close()
					grads.Close()
				}
				snap, err := tbl.Export()
				if err != nil {
					t.Fatal(err)
				}
				got, _ := cgotorch.ToSlice[float32](snap.Rows)
				check := func(what string, got []float32, want [][]float64) {
					w := len(want[0])
					for r := range want {
						for j := range want[r] {
							if !near(got[r*w+j], want[r][j]) {
								t.Errorf("%s layout %d: %s of id %d: %v, reference %v", name, layout, what, ids[r], got[r*w:(r+1)*w], want[r])
								return
							}
						}
					}
				}
				check("row", got, c.rows)
				for i, want := range c.states {
					st, _ := cgotorch.ToSlice[float32](snap.States[i])
					check(snap.StateNames[i], st, want)
				}
				snap.Close()
				tbl.Close()
			}
		}
	}
}
