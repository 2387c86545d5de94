package embedding_test

import (
	"context"
	"errors"
	"io"
	"os"
	"reflect"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// A save whose context is cancelled during the save stops before its commit: it returns an
// error wrapping context.Canceled, removes its files, and the checkpoint already there loads
// as it was.
func TestSaveCancelledKeepsPreviousCheckpoint(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.Adagrad{LR: 0.1}})
	update(t, tbl, []int64{1, 2}, filled(6, 1)...)
	dir := t.TempDir()
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	want := dump(t, tbl)
	files := func() []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range ents {
			n = append(n, e.Name())
		}
		return n
	}
	saved := files()
	update(t, tbl, []int64{3}, 2, 2, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := embedding.SaveWith(ctx, dir, []*embedding.Table{tbl}, map[string]func(io.Writer) error{
		"x": func(io.Writer) error { cancel(); return nil }, // cancelled midway: the table is written
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("SaveWith cancelled midway: %v, want context.Canceled", err)
	}
	if got := files(); !reflect.DeepEqual(got, saved) {
		t.Errorf("files after the cancelled save: %v, want %v", got, saved)
	}
	loaded, err := embedding.LoadRenamed(context.Background(), dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer loaded[0].Close()
	sameDump(t, "checkpoint after a cancelled save", dump(t, loaded[0]), want)
	if err := embedding.Save(ctx, dir, tbl); !errors.Is(err, context.Canceled) {
		t.Errorf("Save with a cancelled context: %v, want context.Canceled", err)
	}
}

// A cancelled load opens nothing and changes nothing.
func TestLoadCancelledChangesNothing(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2})
	update(t, tbl, []int64{1}, 1, 1)
	dir := t.TempDir()
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	update(t, tbl, []int64{2}, 1, 1)
	before, names := dump(t, tbl), embedding.Names()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := embedding.LoadInto(ctx, dir, []*embedding.Table{tbl}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("LoadInto with a cancelled context: %v, want context.Canceled", err)
	}
	sameDump(t, "table after a cancelled LoadInto", dump(t, tbl), before)
	if ts, err := embedding.LoadRenamed(ctx, dir, func(s string) string { return s + "/copy" }); !errors.Is(err, context.Canceled) || ts != nil {
		t.Errorf("LoadRenamed with a cancelled context: %v, %v", ts, err)
	}
	if got := embedding.Names(); !reflect.DeepEqual(got, names) {
		t.Errorf("open tables after a cancelled load: %v, want %v", got, names)
	}
}

// ExportEach stops at the chunk after its context is cancelled.
func TestExportEachCancelled(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 1})
	lookup(t, tbl, 1, 2, 3, 4, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := tbl.ExportEach(ctx, 2, func(*embedding.ExportChunk) error { calls++; cancel(); return nil })
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("ExportEach cancelled in its first chunk: %v after %d calls, want context.Canceled after 1", err, calls)
	}
}

// A cancelled eviction removes nothing.
func TestEvictCancelled(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 1, TrackAccess: true})
	lookup(t, tbl, 1, 2, 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tbl.Evict(ctx, embedding.KeepRecent(0), false); !errors.Is(err, context.Canceled) || tbl.Len() != 3 {
		t.Errorf("Evict with a cancelled context: %v, %d ids left, want context.Canceled and 3", err, tbl.Len())
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	_, err := tbl.EvictIf(ctx, func(int64, int64, int64) bool { cancel(); return true })
	if !errors.Is(err, context.Canceled) || tbl.Len() != 3 {
		t.Errorf("EvictIf cancelled by its predicate: %v, %d ids left, want context.Canceled and 3", err, tbl.Len())
	}
}
