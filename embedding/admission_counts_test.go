package embedding_test

import (
	"errors"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// SetAdmissionCounts gives ids the counts a table would have after as many sightings: an id
// set to k-1 is admitted at its next lookup, as in a table that saw it k-1 times. Bad input
// (admission off, an id with a row, a count below 1, lengths that differ) changes nothing.
func TestSetAdmissionCounts(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}})
	if err := tbl.SetAdmissionCounts([]int64{5}, []int64{2}); !errors.Is(err, embedding.ErrBadInput) {
		t.Fatalf("counts with admission off: %v, want ErrBadInput", err)
	}
	if err := tbl.SetAdmission(3); err != nil {
		t.Fatal(err)
	}
	lookup(t, tbl, 1, 1, 1) // admitted: a row
	lookup(t, tbl, 9)       // counted once
	for _, bad := range []struct {
		name        string
		ids, counts []int64
	}{
		{"an id with a row", []int64{5, 1}, []int64{2, 2}},
		{"a count of 0", []int64{5, 6}, []int64{2, 0}},
		{"lengths that differ", []int64{5, 6}, []int64{2}},
	} {
		if err := tbl.SetAdmissionCounts(bad.ids, bad.counts); !errors.Is(err, embedding.ErrBadInput) {
			t.Fatalf("%s: %v, want ErrBadInput", bad.name, err)
		}
		if _, counted, err := tbl.Admission(); err != nil || counted != 1 {
			t.Fatalf("after %s: %d ids counted (%v), want 1", bad.name, counted, err)
		}
	}
	if err := tbl.SetAdmissionCounts([]int64{5, 6, 9}, []int64{2, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, counted, err := tbl.Admission(); err != nil || counted != 3 {
		t.Fatalf("%d ids counted (%v), want 3", counted, err)
	}
	lookup(t, tbl, 5, 6, 9) // 5 and 9: third sighting, admitted; 6: second
	if n, _, err := tbl.Admission(); err != nil || tbl.Len() != 3 || n != 3 {
		t.Fatalf("%d rows (threshold %d, %v), want 3: ids 1, 5 and 9", tbl.Len(), n, err)
	}
	if _, counted, _ := tbl.Admission(); counted != 1 {
		t.Fatalf("%d ids counted, want 1 (id 6)", counted)
	}
	if _, found, err := tbl.ReadIDs([]int64{5, 6, 9}); err != nil || !found[0] || found[1] || !found[2] {
		t.Fatalf("rows of 5, 6 and 9 found: %v (%v), want true, false, true", found, err)
	}
}
