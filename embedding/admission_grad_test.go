package embedding_test

import (
	"fmt"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// forwardOne is a training lookup of ids through Forward or (bag) ForwardBag, one id a bag.
func forwardOne(t *testing.T, tbl *embedding.Table, bag, fused bool, ids ...int64) *cgotorch.Tensor {
	t.Helper()
	o := embedding.ForwardOptions{Train: true, Fused: fused}
	var out *cgotorch.Tensor
	var err error
	if bag {
		out, err = tbl.ForwardBag(ids64(t, ids), ids64(t, seq(len(ids))), nil, embedding.Sum, o)
	} else {
		out, err = tbl.Forward(ids64(t, ids), o)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// admitOnSecondSighting is an SGD table (lr 0.1, uniform initial rows) whose ids get a row at
// their second training lookup.
func admitOnSecondSighting(t *testing.T, name string) *embedding.Table {
	cfg := embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, Initializer: embedding.Uniform{Low: -2, High: 2}}
	tbl := newTable(t, cfg, name)
	if err := tbl.SetAdmission(2); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// An id that admission kept out at a training lookup got a zero row that is no row of the
// table: its gradient is dropped, even when the id is admitted between the backward pass and
// the step (the sequence: before, PendingGrad listed it and the step applied 1000x the
// gradient to the initial row the id got after the backward pass).
func TestAdmissionDropsTheGradientOfAnIDNotAdmittedAtTheLookup(t *testing.T) {
	for _, bag := range []bool{false, true} {
		name := fmt.Sprint("bag=", bag)
		tbl := admitOnSecondSighting(t, name)
		out := forwardOne(t, tbl, bag, false, 55)
		if got := floats(t, out); got[0] != 0 || got[1] != 0 {
			t.Fatalf("%s: the first sighting gave %v, want a zero row", name, got)
		}
		out.MulScalar(1000).Sum().Backward()
		ids, _, err := tbl.PendingGrad()
		if err != nil {
			t.Fatal(err)
		}
		if n := ids.Size(0); n != 0 {
			t.Errorf("%s: PendingGrad lists %v, want nothing", name, floats64(t, ids))
		}
		initial := lookup(t, tbl, 55)[0] // the second sighting admits it
		if err := tbl.Step(); err != nil {
			t.Fatal(err)
		}
		if got, _ := read(t, tbl, 55); !equalRows(got[0], initial) {
			t.Errorf("%s: after the step id 55 is %v, want its initial row %v", name, got[0], initial)
		}
	}
}

// Fused mode: a backward pass through two lookups of an id, the first before its admission
// (a zero row), the second after it; the pass's step applies the second lookup's gradient only.
func TestAdmissionFusedDropsTheGradientOfTheLookupBeforeAdmission(t *testing.T) {
	for _, bag := range []bool{false, true} {
		name := fmt.Sprint("bag=", bag)
		tbl := admitOnSecondSighting(t, name)
		first := forwardOne(t, tbl, bag, true, 55)  // not admitted: zeros
		second := forwardOne(t, tbl, bag, true, 55) // admitted: its initial row
		initial := floats(t, second)
		first.MulScalar(1000).Sum().Add(second.Sum()).Backward()
		got, _ := read(t, tbl, 55)
		want := []float32{initial[0] - 0.1, initial[1] - 0.1} // (one step of gradient 1 at lr 0.1)
		if !rowsNear(got[0], want, 1e-6) {
			t.Errorf("%s: id 55 after the fused step %v, want %v", name, got[0], want)
		}
	}
}

func floats64(t *testing.T, x *cgotorch.Tensor) []int64 {
	t.Helper()
	v, err := cgotorch.ToSlice[int64](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
