package embedding_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/gorec/gorec/embedding"
)

func flatten(rows [][]float32) []float32 {
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// LookupInto gives what LookupIDs gives, inserting as it does: new ids, present ids, repeats,
// rows whose SGD momentum lags behind, and ids not yet admitted (zero rows).
func TestLookupIntoEqualsLookup(t *testing.T) {
	cfg := embedding.Config{Dim: 3, Initializer: embedding.Normal{Std: 1}, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}}
	a := newTable(t, cfg, "a")
	b := newTable(t, a.Config(), "b") // (a's seed: the same initial rows)
	batches := [][]int64{{5, 9, 5, -1}, {9, 12}, {}, {7, 7, 7, 5, 100}}
	for i, ids := range batches {
		got := make([]float32, len(ids)*3)
		if err := a.LookupInto(got, ids); err != nil {
			t.Fatal(err)
		}
		if want := flatten(lookup(t, b, ids...)); !reflect.DeepEqual(got, want) && len(ids) > 0 {
			t.Errorf("batch %d: LookupInto %v, LookupIDs %v", i, got, want)
		}
		if a.Len() != b.Len() {
			t.Errorf("batch %d: %d ids against %d", i, a.Len(), b.Len())
		}
		update(t, a, ids[:len(ids)/2], filled(len(ids)/2*3, 0.5)...) // momentum: later rows lag
		update(t, b, ids[:len(ids)/2], filled(len(ids)/2*3, 0.5)...)
	}
	admit := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 3}}, "admit")
	if err := admit.SetAdmission(2); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]float32{{0, 0}, {3, 3}} { // admitted at the second sighting
		got := []float32{-1, -1}
		if err := admit.LookupInto(got, []int64{44}); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("admission, lookup %d: %v %v, want %v", i, got, err, want)
		}
	}
}

// ReadInto gives what ReadIDs gives, with either default, and inserts nothing.
func TestReadIntoEqualsRead(t *testing.T) {
	for name, def := range map[string]embedding.ReadDefault{"zeros": embedding.ReadZeros, "initial": embedding.ReadInitial} {
		tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Uniform{Low: 1, High: 2}, ReadDefault: def}, name)
		lookup(t, tbl, 3, 4)
		ids := []int64{4, 8, 3, 8}
		rows, found := read(t, tbl, ids...)
		got, gotFound := make([]float32, 8), make([]bool, 4)
		if err := tbl.ReadInto(got, gotFound, ids); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, flatten(rows)) || !reflect.DeepEqual(gotFound, found) {
			t.Errorf("%s: ReadInto %v %v, ReadIDs %v %v", name, got, gotFound, rows, found)
		}
		if err := tbl.ReadInto(got, nil, ids); err != nil || !reflect.DeepEqual(got, flatten(rows)) {
			t.Errorf("%s: ReadInto without found: %v %v", name, got, err)
		}
		if tbl.Len() != 2 {
			t.Errorf("%s: ReadInto inserted: %d ids", name, tbl.Len())
		}
	}
}

// Slices of the wrong length are ErrBadInput and change nothing; empty batches are fine; a
// closed table is ErrClosed.
func TestIntoBadInput(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 4})
	ids := []int64{1, 2, 3}
	for _, n := range []int{0, 11, 13} {
		if err := tbl.LookupInto(make([]float32, n), ids); !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("LookupInto with %d floats: %v", n, err)
		}
		if err := tbl.ReadInto(make([]float32, n), nil, ids); !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("ReadInto with %d floats: %v", n, err)
		}
	}
	if err := tbl.ReadInto(make([]float32, 12), make([]bool, 2), ids); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("ReadInto with 2 found for 3 ids: %v", err)
	}
	if tbl.Len() != 0 {
		t.Errorf("failed calls inserted %d ids", tbl.Len())
	}
	if err := tbl.LookupInto(nil, nil); err != nil {
		t.Errorf("empty LookupInto: %v", err)
	}
	if err := tbl.ReadInto([]float32{}, []bool{}, []int64{}); err != nil {
		t.Errorf("empty ReadInto: %v", err)
	}
	tbl.Close()
	if err := tbl.LookupInto(make([]float32, 12), ids); !errors.Is(err, embedding.ErrClosed) {
		t.Errorf("LookupInto on a closed table: %v", err)
	}
	if err := tbl.ReadInto(make([]float32, 12), nil, ids); !errors.Is(err, embedding.ErrClosed) {
		t.Errorf("ReadInto on a closed table: %v", err)
	}
}
