package embedding_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// New makes unnamed tables: no registry entry, no name to invent or to clash, but no lookup by
// name and no checkpoint either.
func TestUnnamedTables(t *testing.T) {
	before := embedding.Names()
	a, err := embedding.New(embedding.Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := embedding.New(embedding.Config{Dim: 2})
	if err != nil {
		t.Fatalf("a second unnamed table: %v", err)
	}
	defer b.Close()
	if a.Name() != "" || !slices.Equal(embedding.Names(), before) {
		t.Errorf("unnamed tables: Name %q, Names %v (before %v)", a.Name(), embedding.Names(), before)
	}
	if _, ok := embedding.Get(""); ok {
		t.Errorf(`Get("") found a table`)
	}
	update(t, a, []int64{1}, 1, 1)
	if a.Len() != 1 || b.Len() != 0 {
		t.Errorf("lengths %d and %d, want 1 and 0", a.Len(), b.Len())
	}
	dir := t.TempDir()
	if err := embedding.Save(context.Background(), dir, a); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("Save of an unnamed table: %v, want ErrBadInput", err)
	}
	named := newTable(t, embedding.Config{Dim: 2})
	if err := embedding.Save(context.Background(), dir, named); err != nil {
		t.Fatal(err)
	}
	if err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{a}, nil); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("LoadInto an unnamed table: %v, want ErrBadInput", err)
	}
	if _, err := embedding.NewNamed("", embedding.Config{Dim: 2}); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf(`NewNamed(""): %v, want ErrBadInput`, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := a.LookupIDs([]int64{1}); !errors.Is(err, embedding.ErrClosed) {
		t.Errorf("Lookup after Close: %v, want ErrClosed", err)
	}
}
