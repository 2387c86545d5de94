package embedding_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// derivedSeed is the rule of Config.Seed (cgotorch.h, CT_TABLE_SEED_FROM_NAME), written out
// here so that a change of it, which would change every default-seeded table's rows, fails.
func derivedSeed(name string, seed uint64) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 0x100000001b3
	}
	z := seed ^ h
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func initialRows(t *testing.T, tbl *embedding.Table, ids ...int64) [][]float32 {
	t.Helper()
	return lookup(t, tbl, ids...)
}

// Tables with the default seed start apart: user 42 and movie 42 do not get the same row. Before
// the seed was derived from the name, every default-seeded table started at f(0, id).
func TestDefaultSeedDiffersByName(t *testing.T) {
	users := newTable(t, embedding.Config{Dim: 8}, "users")
	movies := newTable(t, embedding.Config{Dim: 8}, "movies")
	u, m := initialRows(t, users, 42, 7), initialRows(t, movies, 42, 7)
	for i := range u {
		if reflect.DeepEqual(u[i], m[i]) {
			t.Errorf("id %d: tables %q and %q start with the same row %v", []int64{42, 7}[i], users.Name(), movies.Name(), u[i])
		}
	}
	for _, tbl := range []*embedding.Table{users, movies} {
		if got, want := tbl.Config().Seed, derivedSeed(tbl.Name(), 0); got != want {
			t.Errorf("%q: Config().Seed %#x, want %#x (the seed derived from the name)", tbl.Name(), got, want)
		}
	}
}

// A name gives the same rows whenever a table of it is made (this process or another: the
// derivation is a pure function of the name, pinned by derivedSeed), in any insertion order;
// the seed Config reports reproduces them under any other name.
func TestDefaultSeedSameNameSameRows(t *testing.T) {
	name := t.Name() + "/items"
	a, err := embedding.NewNamed(name, embedding.Config{Dim: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := initialRows(t, a, 1, 2, 3)
	seed := a.Config().Seed
	a.Close()
	b, err := embedding.NewNamed(name, embedding.Config{Dim: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := initialRows(t, b, 3, 2, 1); !reflect.DeepEqual(got, [][]float32{want[2], want[1], want[0]}) {
		t.Errorf("a table made again under %q: rows %v, want %v", name, got, want)
	}
	c := newTable(t, embedding.Config{Dim: 4, Seed: seed}, "other")
	if got := initialRows(t, c, 1, 2, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("a table of another name with Config().Seed: rows %v, want %v", got, want)
	}
}

// An explicit seed is used as is, whatever the name: f(seed, id), as before; an unnamed table
// uses its Seed as is, 0 included.
func TestExplicitSeedIgnoresName(t *testing.T) {
	a := newTable(t, embedding.Config{Dim: 4, Seed: 7}, "a")
	b := newTable(t, embedding.Config{Dim: 4, Seed: 7}, "b")
	u, err := embedding.New(embedding.Config{Dim: 4, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	want := initialRows(t, a, 5, 6)
	if got := initialRows(t, b, 5, 6); !reflect.DeepEqual(got, want) {
		t.Errorf("seed 7, another name: %v, want %v", got, want)
	}
	if got := initialRows(t, u, 5, 6); !reflect.DeepEqual(got, want) {
		t.Errorf("seed 7, unnamed: %v, want %v", got, want)
	}
	if s := a.Config().Seed; s != 7 {
		t.Errorf("Config().Seed %d, want 7", s)
	}
	z, err := embedding.New(embedding.Config{Dim: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if s := z.Config().Seed; s != 0 {
		t.Errorf("unnamed table with the default seed: Config().Seed %d, want 0", s)
	}
}

// A checkpoint keeps the seed in use: a table loaded under another name (or none) gives new
// ids the rows the saved table would have given them.
func TestLoadKeepsDerivedSeed(t *testing.T) {
	a := newTable(t, embedding.Config{Dim: 3, ReadDefault: embedding.ReadInitial})
	initialRows(t, a, 1)
	dir := t.TempDir()
	if err := embedding.Save(context.Background(), dir, a); err != nil {
		t.Fatal(err)
	}
	want, _ := read(t, a, 99)
	for _, name := range []string{t.Name() + "/renamed", ""} {
		ts, err := embedding.LoadRenamed(context.Background(), dir, func(string) string { return name })
		if err != nil {
			t.Fatal(err)
		}
		got, _ := read(t, ts[0], 99)
		if ts[0].Name() != name || !reflect.DeepEqual(got, want) {
			t.Errorf("loaded as %q (%q): initial row %v, want %v", name, ts[0].Name(), got, want)
		}
		ts[0].Close()
	}
}
