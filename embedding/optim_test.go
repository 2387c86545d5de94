package embedding_test

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// optim.json is written by testdata/gen_optim.py (PyTorch on an nn.Embedding(sparse=True)).
type optimFixture struct {
	Torch    string      `json:"torch"`
	Dim      int         `json:"dim"`
	TableIDs []int64     `json:"table_ids"`
	Initial  [][]float32 `json:"initial"`
	Cases    []struct {
		Name      string         `json:"name"`
		Optimizer string         `json:"optimizer"`
		Params    map[string]any `json:"params"`
		FirstSeen map[string]int `json:"first_seen"`
		// LRAt: the learning rate set before a step (a schedule: SetLR), by step.
		LRAt  map[string]float64 `json:"lr_at"`
		Steps []struct {
			IDs   []int       `json:"ids"`
			Grads [][]float32 `json:"grads"`
		} `json:"steps"`
		Results []struct {
			Weights [][]float32            `json:"weights"`
			States  map[string][][]float32 `json:"states"`
		} `json:"results"`
	} `json:"cases"`
}

func param(p map[string]any, name string) float64 {
	v, ok := p[name]
	if !ok {
		return 0
	}
	switch x := v.(type) {
	case float64:
		return x
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

func beta(p map[string]any, i int) float64 {
	if b, ok := p["betas"].([]any); ok {
		return b[i].(float64)
	}
	return 0
}

func fixtureOptimizer(t *testing.T, name string, p map[string]any) embedding.Optimizer {
	switch name {
	case "SGD":
		return embedding.SGD{LR: param(p, "lr"), Momentum: param(p, "momentum"), Dampening: param(p, "dampening"),
			Nesterov: param(p, "nesterov") != 0}
	case "Adagrad":
		return embedding.Adagrad{LR: param(p, "lr"), LRDecay: param(p, "lr_decay"),
			InitialAccumulator: param(p, "initial_accumulator_value"), Eps: param(p, "eps")}
	case "SparseAdam":
		return embedding.SparseAdam{LR: param(p, "lr"), Beta1: beta(p, 0), Beta2: beta(p, 1), Eps: param(p, "eps")}
	case "AdamW":
		return embedding.AdamW{LR: param(p, "lr"), Beta1: beta(p, 0), Beta2: beta(p, 1), Eps: param(p, "eps"),
			WeightDecay: param(p, "weight_decay")}
	}
	t.Fatalf("unknown optimizer %s", name)
	return nil
}

// The table's optimizers give PyTorch's numbers: repeated ids in a step, a row first seen at a
// later step, a row with a zero gradient, rows absent from a step (SGD momentum keeps moving
// them), a row never seen, and learning rates changed between steps (SetLR).
func TestOptimizerParityWithPyTorch(t *testing.T) {
	data, err := os.ReadFile("testdata/optim.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx optimFixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Cases) < 13 {
		t.Fatalf("optim.json has %d cases", len(fx.Cases))
	}
	for _, layout := range []embedding.Layout{embedding.Interleaved, embedding.Separate} {
		for _, c := range fx.Cases {
			t.Run(c.Name+"/layout"+strconv.Itoa(int(layout)), func(t *testing.T) {
				opt := fixtureOptimizer(t, c.Optimizer, c.Params)
				tbl := newTable(t, embedding.Config{Dim: fx.Dim, Optimizer: opt, Layout: layout, BlockRows: 2, Initializer: embedding.Zeros{}})
				never := len(fx.Initial) - 1 // a row no step touches: written first, must not move
				if _, seen := c.FirstSeen[strconv.Itoa(never)]; seen {
					never = -1
				} else {
					write(t, tbl, []int64{fx.TableIDs[never]}, fx.Initial[never]...)
				}
				compared := 0
				for s, step := range c.Steps {
					for r := range fx.Initial {
						if first, ok := c.FirstSeen[strconv.Itoa(r)]; ok && first == s {
							write(t, tbl, []int64{fx.TableIDs[r]}, fx.Initial[r]...)
						}
					}
					if lr, ok := c.LRAt[strconv.Itoa(s)]; ok {
						if err := tbl.SetLR(lr); err != nil {
							t.Fatal(err)
						}
					}
					ids := make([]int64, len(step.IDs))
					var grads []float32
					for i, r := range step.IDs {
						ids[i] = fx.TableIDs[r]
						grads = append(grads, step.Grads[i]...)
					}
					update(t, tbl, ids, grads...)
					want := c.Results[s]
					e := export(t, tbl)
					for r, id := range fx.TableIDs {
						got, ok := e.rows[id]
						if !ok {
							continue // not seen yet
						}
						compared++
						if !rowsNear(got, want.Weights[r], 2e-6) {
							t.Fatalf("step %d row %d: %v, PyTorch %v", s+1, r, got, want.Weights[r])
						}
						for name, st := range want.States {
							if !rowsNear(e.states[name][id], st[r], 2e-6) {
								t.Fatalf("step %d row %d state %s: %v, PyTorch %v", s+1, r, name, e.states[name][id], st[r])
							}
						}
					}
					if never >= 0 && !equalRows(e.rows[fx.TableIDs[never]], fx.Initial[never]) {
						t.Fatalf("a row absent from every step moved: %v", e.rows[fx.TableIDs[never]])
					}
					if len(want.States) != len(e.states) {
						t.Fatalf("states %v, PyTorch has %v", len(e.states), len(want.States))
					}
				}
				if compared < 3*len(c.Steps) {
					t.Fatalf("only %d row comparisons", compared)
				}
			})
		}
	}
}

// The worked values of optimizers.md: SparseAdam, lr 0.1, gradient 1.
func TestSparseAdamWorkedValues(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 1, Initializer: embedding.Constant{Value: 1}, Optimizer: embedding.SparseAdam{LR: 0.1}})
	lookup(t, tbl, 1, 2, 3) // 3 is never updated
	update(t, tbl, []int64{1}, 1)
	if v := lookup(t, tbl, 1)[0][0]; !near(float64(v), 0.9, 1e-6) {
		t.Fatalf("after step 1: %v, want 0.9", v)
	}
	update(t, tbl, []int64{1, 2}, 0, 1)
	got := lookup(t, tbl, 1, 2, 3)
	if !near(float64(got[0][0]), 0.832994, 1e-6) {
		t.Errorf("zero-gradient row: %v, want 0.832994 (moved by its momentum)", got[0][0])
	}
	if !near(float64(got[1][0]), 0.925586, 1e-6) {
		t.Errorf("row first seen at step 2: %v, want 0.925586 (global-step bias correction)", got[1][0])
	}
	if got[2][0] != 1 {
		t.Errorf("absent row moved: %v", got[2][0])
	}
}

// Rules without a PyTorch reference, checked against hand computations.
func TestRowWiseAdagradByHand(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1},
		Optimizer: embedding.RowWiseAdagrad{LR: 0.1, InitialAccumulator: 0.5}})
	update(t, tbl, []int64{4}, 3, 4)
	// sum = 0.5 + (9 + 16) / 2 = 13; w = 1 - 0.1 * g / sqrt(13)
	e := export(t, tbl)
	if !near(float64(e.states["sum"][4][0]), 13, 1e-7) || len(e.states["sum"][4]) != 1 {
		t.Fatalf("sum %v, want [13]", e.states["sum"][4])
	}
	if want := []float32{0.9167950, 0.8890600}; !rowsNear(e.rows[4], want, 1e-6) {
		t.Fatalf("row %v, want %v", e.rows[4], want)
	}
	// step 2 with lr decay absent: sum = 13 + 12.5 = 25.5
	update(t, tbl, []int64{4, 4}, 1, 2, 2, 2) // summed: (3, 4)
	w0, w1 := 0.9167950-0.1*3/math.Sqrt(25.5), 0.8890600-0.1*4/math.Sqrt(25.5)
	if got := lookup(t, tbl, 4)[0]; !rowsNear(got, []float32{float32(w0), float32(w1)}, 1e-6) {
		t.Fatalf("step 2: %v, want [%v %v]", got, w0, w1)
	}
}

func TestFTRLByHand(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 1, Initializer: embedding.Zeros{},
		Optimizer: embedding.FTRL{Alpha: 0.5, Beta: 1, L1: 0.1, L2: 0.2}})
	update(t, tbl, []int64{1}, 1)
	// n = 1; sigma = 2; z = 1; w = -(1 - 0.1) / ((1 + 1) / 0.5 + 0.2) = -0.9 / 4.2
	if got := lookup(t, tbl, 1)[0][0]; !near(float64(got), -0.9/4.2, 1e-6) {
		t.Fatalf("step 1: %v, want %v", got, -0.9/4.2)
	}
	update(t, tbl, []int64{1}, -0.5)
	// n = 1.25; sigma = (sqrt(1.25) - 1) / 0.5; z = 1 - 0.5 - sigma * w1
	w1 := -0.9 / 4.2
	sigma := (math.Sqrt(1.25) - 1) / 0.5
	z := 0.5 - sigma*w1
	w2 := -(z - 0.1) / ((1+math.Sqrt(1.25))/0.5 + 0.2)
	e := export(t, tbl)
	if !near(float64(e.rows[1][0]), w2, 1e-6) || !near(float64(e.states["z"][1][0]), z, 1e-6) ||
		!near(float64(e.states["n"][1][0]), 1.25, 1e-7) {
		t.Fatalf("step 2: w %v z %v n %v, want %v %v 1.25", e.rows[1], e.states["z"][1], e.states["n"][1], w2, z)
	}
	if math.Abs(w2+0.1015732) > 1e-6 {
		t.Fatalf("hand value %v", w2)
	}
	// |z| <= l1 gives an exact zero
	update(t, tbl, []int64{2}, 0.05)
	if got := lookup(t, tbl, 2)[0][0]; got != 0 {
		t.Fatalf("l1 did not zero the weight: %v", got)
	}
}

func TestAdamWByHand(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 1, Initializer: embedding.Constant{Value: 1},
		Optimizer: embedding.AdamW{LR: 0.1, WeightDecay: 0.5}})
	update(t, tbl, []int64{1}, 2)
	update(t, tbl, []int64{2}, 2) // row 2 first seen at step 2; row 1 absent: unchanged
	// row 1, t = 1: w = 1 * (1 - 0.05) = 0.95; m = 0.2; v = 0.004;
	// w -= 0.1 / 0.1 * 0.2 / (sqrt(0.004) / sqrt(0.001) + 1e-8) = 0.1 → 0.85
	// row 2, t = 2: w = 0.95; m = 0.2, v = 0.004; step = 0.1 / 0.19; denom = sqrt(0.004)/sqrt(1-0.998001) + 1e-8
	w2 := 0.95 - 0.1/0.19*0.2/(math.Sqrt(0.004)/math.Sqrt(1-0.999*0.999)+1e-8)
	got := lookup(t, tbl, 1, 2)
	if !near(float64(got[0][0]), 0.85, 1e-6) || !near(float64(got[1][0]), w2, 1e-6) {
		t.Fatalf("rows %v, want 0.85 and %v", got, w2)
	}
}
