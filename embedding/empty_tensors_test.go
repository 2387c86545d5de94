package embedding_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// Files whose empty tensors share data offset 0 with a non-empty one (a delta that only
// deletes, a table that only counts ids for admission) load. The header's tensors come in map
// order, so each case is repeated: a reader that ordered ties by begin offset alone failed
// most of the time.

func TestDeleteOnlyDeltaFile(t *testing.T) {
	dir := t.TempDir()
	want := &embedding.Delta{States: [][]float32{{}}, Deleted: []int64{4, 9}, Step: 3}
	for i := range 20 {
		path := filepath.Join(dir, fmt.Sprint(i))
		if err := embedding.WriteDelta(path, want, 2); err != nil {
			t.Fatal(err)
		}
		got, dim, err := embedding.ReadDelta(path)
		if err != nil {
			t.Fatalf("run %d: ReadDelta: %v", i, err)
		}
		if dim != 2 || !reflect.DeepEqual(got.Deleted, want.Deleted) || got.Step != 3 || len(got.IDs) != 0 ||
			len(got.States) != 1 || len(got.States[0]) != 0 {
			t.Fatalf("run %d: dim %d, %+v, want %+v", i, dim, got, want)
		}
	}
}

func TestCheckpointOfOnlyAdmissionCounts(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}, "counts")
	if err := tbl.SetAdmission(3); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.LookupIDs([]int64{1, 2, 2}); err != nil {
		t.Fatal(err)
	}
	want := dump(t, tbl)
	if len(want.IDs) != 0 || want.Count != 2 {
		t.Fatalf("setup: %d rows, %d ids counted, want 0 and 2", len(want.IDs), want.Count)
	}
	for i := range 20 {
		dir := t.TempDir()
		if err := embedding.Save(context.Background(), dir, tbl); err != nil {
			t.Fatal(err)
		}
		loaded, err := embedding.LoadRenamed(context.Background(), dir, func(s string) string { return fmt.Sprintf("%s-%d", s, i) })
		if err != nil {
			t.Fatalf("run %d: Load: %v", i, err)
		}
		got := dump(t, loaded[0])
		loaded[0].Close()
		sameDump(t, "admission counts only", got, want)
	}
}
