package embedding_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// TestLookupCountedCountsAsTheBatch: LookupCounted of distinct ids with their counts leaves the
// frequencies and the admissions of LookupIDs of the batch that holds them that often, and
// returns its rows.
func TestLookupCountedCountsAsTheBatch(t *testing.T) {
	cfg := embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, Initializer: embedding.Constant{Value: 0.5}, TrackAccess: true}
	counted, batch := newTable(t, cfg, "counted"), newTable(t, cfg, "batch")
	for _, tbl := range []*embedding.Table{counted, batch} {
		if err := tbl.SetAdmission(3); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct{ ids, counts []int64 }{
		{[]int64{1, 2, 3}, []int64{3, 1, 2}}, // 1 admitted at once, 2 and 3 counted
		{[]int64{2, 3, 4}, []int64{1, 1, 5}}, // 3 admitted, 2 still counted, 4 admitted
		{[]int64{1, 2}, []int64{2, 1}},       // 2 admitted
	}
	for i, s := range steps {
		var flat []int64
		for k, id := range s.ids {
			for range s.counts[k] {
				flat = append(flat, id)
			}
		}
		got, err := counted.LookupCounted(s.ids, s.counts)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := embedding.Rows(got)
		got.Close()
		if err != nil {
			t.Fatal(err)
		}
		all := lookup(t, batch, flat...)
		var want [][]float32
		at := 0
		for _, c := range s.counts {
			want = append(want, all[at])
			at += int(c)
		}
		if !reflect.DeepEqual(rows, want) {
			t.Errorf("step %d: rows %v, want %v", i, rows, want)
		}
		ids, _, freq, err := counted.Metadata()
		wantIDs, _, wantFreq, werr := batch.Metadata()
		if err != nil || werr != nil {
			t.Fatal(err, werr)
		}
		if !reflect.DeepEqual(ids, wantIDs) || !reflect.DeepEqual(freq, wantFreq) {
			t.Errorf("step %d: ids %v frequencies %v, want %v %v", i, ids, freq, wantIDs, wantFreq)
		}
		_, c, _ := counted.Admission()
		_, wc, _ := batch.Admission()
		if c != wc {
			t.Errorf("step %d: %d ids counted, want %d", i, c, wc)
		}
	}
	if ids, _, _, _ := counted.Metadata(); len(ids) != 4 {
		t.Errorf("ids %v, want every id admitted", ids)
	}
}

// TestLookupCountedRefusesBadCounts: counts of another length, or below 1, are ErrBadInput and
// change nothing.
func TestLookupCountedRefusesBadCounts(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, TrackAccess: true})
	for _, counts := range [][]int64{{1}, {1, 0}, {2, -1}, nil} {
		r, err := tbl.LookupCounted([]int64{4, 5}, counts)
		if !errors.Is(err, embedding.ErrBadInput) || r != nil {
			t.Errorf("counts %v: %v, %v; want ErrBadInput", counts, r, err)
		}
	}
	if tbl.Len() != 0 {
		t.Errorf("%d rows after refused lookups, want 0", tbl.Len())
	}
	var nilTable *embedding.Table
	if _, err := nilTable.LookupCounted(nil, nil); err == nil {
		t.Error("a nil table looked up")
	}
}
