package embedding_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// backwardWith pushes coef (shaped like out) through out: loss = sum(out * coef).
func backwardWith(out *cgotorch.Tensor, coef []float32) {
	out.Mul(cgotorch.MustFromSlice(coef, out.Shape()...)).Sum().Backward()
}

func snapshotRows(t *testing.T, tbl *embedding.Table) (ids []int64, rows, states []float32) {
	t.Helper()
	s, ids := snapshot(t, tbl)
	defer s.Close()
	rows = floats(t, s.Rows)
	for _, st := range s.States {
		states = append(states, floats(t, st.Values)...)
	}
	return ids, rows, states
}

func sameFloats(t *testing.T, what string, a, b []float32, tol float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d vs %d values", what, len(a), len(b))
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol*(1+math.Abs(float64(b[i]))) {
			t.Fatalf("%s[%d]: %v vs %v", what, i, a[i], b[i])
		}
	}
}

var adagradCfg = embedding.Config{Dim: 3, Initializer: embedding.Uniform{Low: -1, High: 1}, Seed: 9, Optimizer: embedding.Adagrad{LR: 0.5}}

// Two micro-batches accumulated, then one Step, equal one Step over the concatenated batch:
// Adagrad squares the summed gradient of an id, so the duplicates across the passes must be
// summed before the update ((g1 + g2)^2, not g1^2 + g2^2).
func TestForwardAccumulateMicroBatches(t *testing.T) {
	a := newTable(t, adagradCfg, "micro")
	b := newTable(t, adagradCfg, "whole")
	ids1, ids2 := []int64{5, 8, 5}, []int64{8, 13, 5, 21}
	c1 := []float32{1, -2, 0.5, 0.25, 0.75, -1, 2, 2, -0.5}
	c2 := []float32{-1, 1, 1, 0.5, 0.5, 0.5, 3, -1, 0.25, -0.125, 1, 2}
	opts := embedding.ForwardOptions{Train: true}
	for _, mb := range []struct {
		ids  []int64
		coef []float32
	}{{ids1, c1}, {ids2, c2}} {
		out, err := a.Forward(ids64(t, mb.ids), opts)
		if err != nil {
			t.Fatal(err)
		}
		backwardWith(out, mb.coef)
	}
	if err := a.Step(); err != nil {
		t.Fatal(err)
	}
	out, err := b.Forward(ids64(t, append(append([]int64{}, ids1...), ids2...)), opts)
	if err != nil {
		t.Fatal(err)
	}
	backwardWith(out, append(append([]float32{}, c1...), c2...))
	if err := b.Step(); err != nil {
		t.Fatal(err)
	}
	ia, ra, sa := snapshotRows(t, a)
	ib, rb, sb := snapshotRows(t, b)
	if fmt.Sprint(ia) != fmt.Sprint(ib) {
		t.Fatalf("ids %v vs %v", ia, ib)
	}
	sameFloats(t, "rows", ra, rb, 1e-6)
	sameFloats(t, "accumulators", sa, sb, 1e-6)
	for _, tb := range []*embedding.Table{a, b} {
		if st, _ := tb.Stats(); st.Step != 1 {
			t.Fatalf("%s: %d steps, want 1", tb.Name(), st.Step)
		}
	}
	// The step consumed the pending gradients: another Step does nothing.
	if err := a.Step(); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.Stats(); st.Step != 1 {
		t.Fatalf("an empty Step counted: %d", st.Step)
	}
}

// Fused mode (the step inside backward) gives the numbers of accumulate + Step, step after
// step, with a stateful optimizer and ids that come and go.
func TestForwardFusedEqualsAccumulate(t *testing.T) {
	cfg := embedding.Config{Dim: 4, Initializer: embedding.Normal{Std: 1}, Seed: 3, Optimizer: embedding.SparseAdam{LR: 0.05}}
	acc := newTable(t, cfg, "acc")
	fused := newTable(t, cfg, "fused")
	batches := [][]int64{{1, 2, 1}, {2, 3}, {4, 1, 4, 4}, {3}, {5, 2, 1}}
	for i, ids := range batches {
		coef := make([]float32, 4*len(ids))
		for j := range coef {
			coef[j] = float32((i+1)*(j%5)-3) / 4
		}
		out, err := acc.Forward(ids64(t, ids), embedding.ForwardOptions{Train: true})
		if err != nil {
			t.Fatal(err)
		}
		backwardWith(out, coef)
		if err := acc.Step(); err != nil {
			t.Fatal(err)
		}
		out, err = fused.ForwardBag(ids64(t, ids), ids64(t, seq(len(ids))), nil, embedding.Sum, embedding.ForwardOptions{Train: true, Fused: true})
		if err != nil {
			t.Fatal(err)
		}
		backwardWith(out, coef) // one id per bag: the bag sum is the lookup
	}
	_, ra, sa := snapshotRows(t, acc)
	_, rf, sf := snapshotRows(t, fused)
	sameFloats(t, "rows", rf, ra, 0)
	sameFloats(t, "states", sf, sa, 0)
}

// A table looked up several times in one graph takes one fused step per backward pass, on the
// summed gradient, as accumulate + Step does and as torch steps a weight indexed twice (it took
// a step per lookup). torch 1.13, w = [[1, 2]], Adagrad(lr=1), w[[0]] twice with coefficients
// [1, 2] and [3, -4], one step: [[0, 3]].
func TestForwardFusedOneStepPerBackward(t *testing.T) {
	run := func(fused bool, name string) ([]float32, []float32, int64) {
		tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Zeros{}, Optimizer: embedding.Adagrad{LR: 1}}, name)
		write(t, tbl, []int64{10, 11}, 1, 2, 5, 6)
		o := embedding.ForwardOptions{Train: true, Fused: fused}
		a, err := tbl.Forward(ids64(t, []int64{10}), o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tbl.ForwardBag(ids64(t, []int64{10, 11}), ids64(t, []int64{0, 1}), nil, embedding.Sum, o)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tbl.Forward(ids64(t, []int64{11}), o)
		if err != nil {
			t.Fatal(err)
		}
		l := a.Mul(cgotorch.MustFromSlice([]float32{1, 2}, 1, 2)).Sum()
		l = l.Add(b.Mul(cgotorch.MustFromSlice([]float32{3, -4, 0.5, 0.25}, 2, 2)).Sum())
		l.Add(c.Mul(cgotorch.MustFromSlice([]float32{2, 2}, 1, 2)).Sum()).Backward()
		if !fused {
			if err := tbl.Step(); err != nil {
				t.Fatal(err)
			}
		}
		st, err := tbl.Stats()
		if err != nil {
			t.Fatal(err)
		}
		_, rows, states := snapshotRows(t, tbl)
		return rows, states, st.Step
	}
	ra, sa, na := run(false, "acc")
	rf, sf, nf := run(true, "fused")
	if na != 1 || nf != 1 {
		t.Fatalf("steps: accumulate %d, fused %d, want 1 each", na, nf)
	}
	sameFloats(t, "rows", rf, ra, 0)
	sameFloats(t, "states", sf, sa, 0)
	if rf[0] != 0 || rf[1] != 3 {
		t.Errorf("row 10: %v, torch gives [0 3]", rf[:2])
	}
	// A NaN gradient: the backward pass panics at its end, the table keeps its rows and step,
	// and the next pass steps normally (nothing of the failed one is left over).
	tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Zeros{}, Optimizer: embedding.SGD{LR: 1}}, "nan")
	o := embedding.ForwardOptions{Train: true, Fused: true}
	pass := func(coef ...float32) error {
		return cgotorch.Try(func() {
			a, err := tbl.Forward(ids64(t, []int64{10}), o)
			if err != nil {
				t.Fatal(err)
			}
			b, err := tbl.Forward(ids64(t, []int64{10}), o)
			if err != nil {
				t.Fatal(err)
			}
			backwardWith(a.Add(b), coef)
		})
	}
	if err := pass(float32(math.NaN()), 1); err == nil {
		t.Fatal("a NaN gradient: no error")
	}
	if got := lookup(t, tbl, 10); got[0][0] != 0 || got[0][1] != 0 {
		t.Fatalf("after the refused step: %v", got)
	}
	if err := pass(1, 2); err != nil {
		t.Fatal(err)
	}
	st, err := tbl.Stats()
	if got := lookup(t, tbl, 10); err != nil || got[0][0] != -2 || got[0][1] != -4 || st.Step != 1 {
		t.Fatalf("after a good pass: %v, step %d (%v); want [-2 -4] and 1", got, st.Step, err)
	}
}

func seq(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i)
	}
	return s
}

// An evaluation lookup inserts nothing, gives the ReadDefault row for unknown ids, does not
// join the graph, and renormalises only its result.
func TestForwardEval(t *testing.T) {
	for _, def := range []embedding.ReadDefault{embedding.ReadZeros, embedding.ReadInitial} {
		tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 3}, ReadDefault: def}, fmt.Sprint(def))
		if err := tbl.WriteIDs([]int64{1}, []float32{0.5, -0.5}); err != nil {
			t.Fatal(err)
		}
		out, err := tbl.Forward(ids64(t, []int64{1, 2, 1}), embedding.ForwardOptions{MaxNorm: 1})
		if err != nil {
			t.Fatal(err)
		}
		unknown := []float32{0, 0}
		if def == embedding.ReadInitial {
			s := float32(1 / (math.Sqrt(18) + 1e-7)) // the initial row [3, 3] renormalised
			unknown = []float32{3 * s, 3 * s}
		}
		sameFloats(t, "eval rows", floats(t, out), append(append([]float32{0.5, -0.5}, unknown...), 0.5, -0.5), 1e-6)
		if out.RequiresGrad() || tbl.Len() != 1 {
			t.Fatalf("requires grad %v, Len %d", out.RequiresGrad(), tbl.Len())
		}
	}
	tbl := newTable(t, embedding.Config{Dim: 2}, "norm")
	if err := tbl.WriteIDs([]int64{1}, []float32{3, 4}); err != nil {
		t.Fatal(err)
	}
	out, err := tbl.Forward(ids64(t, []int64{1}), embedding.ForwardOptions{MaxNorm: 1})
	if err != nil {
		t.Fatal(err)
	}
	sameFloats(t, "renormalised result", floats(t, out), []float32{0.6, 0.8}, 1e-6)
	if got := lookup(t, tbl, 1); got[0][0] != 3 || got[0][1] != 4 {
		t.Fatalf("evaluation wrote the table: %v", got)
	}
	// Training renormalises in the table, as torch does to its weight.
	if _, err := tbl.Forward(ids64(t, []int64{1}), embedding.ForwardOptions{Train: true, MaxNorm: 1}); err != nil {
		t.Fatal(err)
	}
	sameFloats(t, "renormalised row", lookup(t, tbl, 1)[0], []float32{0.6, 0.8}, 1e-6)
}

// Pending gradients: ZeroGrad drops them; NaN is rejected by Step as a whole and kept; a
// fused forward needs an optimizer; bad options are ErrBadInput.
func TestForwardPendingAndErrors(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1}, Optimizer: embedding.SGD{LR: 1}})
	out, err := tbl.Forward(ids64(t, []int64{4, 4}), embedding.ForwardOptions{Train: true})
	if err != nil {
		t.Fatal(err)
	}
	out.Sum().Backward()
	ids, grads, err := tbl.PendingGrad()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := cgotorch.ToSlice[int64](ids); fmt.Sprint(v) != "[4]" || fmt.Sprint(floats(t, grads)) != "[2 2]" {
		t.Fatalf("pending %v %v", v, floats(t, grads))
	}
	if err := tbl.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Step(); err != nil {
		t.Fatal(err)
	}
	if st, _ := tbl.Stats(); st.Step != 0 {
		t.Fatalf("a step after ZeroGrad: %d", st.Step)
	}
	out, _ = tbl.Forward(ids64(t, []int64{4}), embedding.ForwardOptions{Train: true})
	backwardWith(out, []float32{float32(math.NaN()), 1})
	if err := tbl.Step(); !errors.Is(err, embedding.ErrBadInput) {
		t.Fatalf("NaN step: %v", err)
	}
	if ids, _, _ := tbl.PendingGrad(); ids.Numel() != 1 {
		t.Fatal("the rejected gradient was dropped")
	}
	if got := lookup(t, tbl, 4); got[0][0] != 1 {
		t.Fatalf("a rejected step changed the row: %v", got)
	}
	if err := tbl.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
	inf := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.NoOptimizer{}}, "noopt")
	if _, err := inf.Forward(ids64(t, []int64{1}), embedding.ForwardOptions{Train: true, Fused: true}); !errors.Is(err, embedding.ErrBadInput) {
		t.Fatalf("fused without optimizer: %v", err)
	}
	for name, o := range map[string]embedding.ForwardOptions{"NaN": {MaxNorm: math.NaN()}, "negative": {MaxNorm: -1}} {
		if _, err := tbl.Forward(ids64(t, []int64{1}), o); !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("max norm %s: %v", name, err)
		}
	}
	if _, err := tbl.ForwardBag(ids64(t, []int64{1}), ids64(t, []int64{0}), nil, embedding.BagMode(7), embedding.ForwardOptions{}); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("bag mode: %v", err)
	}
	if _, err := tbl.ForwardBag(ids64(t, []int64{1, 2}), ids64(t, []int64{0, 3}), nil, embedding.Sum, embedding.ForwardOptions{}); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("offset past the end: %v", err)
	}
	// Ids but no bags: libtorch 1.13 crashes on that in max mode and reads memory it never
	// wrote in the backward of the others. Refused before any id is inserted.
	none, err := cgotorch.FromSlice([]int64{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []embedding.BagMode{embedding.Sum, embedding.Mean, embedding.Max} {
		for _, train := range []bool{false, true} {
			n := tbl.Len()
			if _, err := tbl.ForwardBag(ids64(t, []int64{101, 102}), none, nil, mode, embedding.ForwardOptions{Train: train}); !errors.Is(err, embedding.ErrBadInput) {
				t.Errorf("mode %v, train %v: ids in no bag: %v, want ErrBadInput", mode, train, err)
			}
			if tbl.Len() != n {
				t.Errorf("mode %v, train %v: a refused bag inserted ids", mode, train)
			}
		}
	}
}

// Backward passes of several goroutines on one table accumulate; one Step applies their sum.
func TestForwardConcurrentBackward(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Zeros{}, Optimizer: embedding.SGD{LR: 1}})
	const workers, rounds = 4, 25
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				ids, _ := cgotorch.FromSlice([]int64{1, 2, 1})
				out, err := tbl.Forward(ids, embedding.ForwardOptions{Train: true})
				if err != nil {
					t.Error(err)
					return
				}
				out.Sum().Backward()
			}
		}()
	}
	wg.Wait()
	if err := tbl.Step(); err != nil {
		t.Fatal(err)
	}
	got := lookup(t, tbl, 1, 2)
	if got[0][0] != -2*workers*rounds || got[1][1] != -workers*rounds {
		t.Fatalf("rows %v", got)
	}
}
