package embedding_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// validTableFile saves a small dim-3 Adagrad table (with admission counts) and returns its
// table file and manifest.
func validTableFile(t testing.TB) (table, manifest []byte) {
	dir := t.TempDir()
	a, err := embedding.NewNamed("fuzz-seed", embedding.Config{Dim: 3, Optimizer: embedding.Adagrad{}, BlockRows: 4, Initializer: embedding.Zeros{}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	train(t, a, rand.New(rand.NewPCG(7, 7)), 3, 6, 20)
	if err := a.SetAdmission(2); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LookupIDs([]int64{500}); err != nil {
		t.Fatal(err)
	}
	if err := embedding.Save(context.Background(), dir, a); err != nil {
		t.Fatal(err)
	}
	man, tf := checkpointFiles(t, dir)
	table, _ = os.ReadFile(tf)
	manifest, _ = os.ReadFile(man)
	return table, manifest
}

// FuzzLoadTable: any bytes as a table file give a loaded table or ErrCorrupt, never a crash, an
// out-of-bounds read or a table left open. Seeds: testdata/fuzz/FuzzLoadTable and a fresh file.
func FuzzLoadTable(f *testing.F) {
	table, _ := validTableFile(f)
	f.Add(table)
	f.Add(table[:len(table)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		err := embedding.LoadTableBytes(data)
		if err != nil && !errors.Is(err, embedding.ErrCorrupt) {
			t.Fatalf("LoadTableBytes: %v (not ErrCorrupt)", err)
		}
		for _, n := range embedding.Names() {
			if strings.HasPrefix(n, "fuzz-") && n != "fuzz-seed" {
				t.Fatalf("table %q left open", n)
			}
		}
	})
}

// FuzzManifest: any bytes as a manifest parse or give ErrCorrupt.
func FuzzManifest(f *testing.F) {
	_, man := validTableFile(f)
	f.Add(man)
	f.Add([]byte(`{"format":"gorec-checkpoint","version":1,"tables":[{"file":"../x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := embedding.ParseManifest(data); err != nil && !errors.Is(err, embedding.ErrCorrupt) {
			t.Fatalf("ParseManifest: %v (not ErrCorrupt)", err)
		}
	})
}

// TestWriteFuzzSeeds regenerates the seed corpus: GOREC_WRITE_FUZZ_SEEDS=1 go test ./embedding
// -run TestWriteFuzzSeeds.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("GOREC_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set GOREC_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz")
	}
	table, man := validTableFile(t)
	seeds := map[string][]byte{
		"FuzzLoadTable/valid":         table,
		"FuzzLoadTable/truncated":     table[:len(table)-13],
		"FuzzLoadTable/header-only":   table[:8+int(table[0])+int(table[1])<<8],
		"FuzzLoadTable/bad-magic":     []byte(strings.Replace(string(table), "gorec-table", "gorec-tablx", 1)),
		"FuzzLoadTable/bad-version":   []byte(strings.Replace(string(table), `"version":"1"`, `"version":"7"`, 1)),
		"FuzzLoadTable/lying-shape":   []byte(strings.Replace(string(table), `"shape":[`, `"shape":[1`, 1)),
		"FuzzLoadTable/lying-offsets": []byte(strings.Replace(string(table), `"data_offsets":[0,`, `"data_offsets":[0,1`, 1)),
		"FuzzManifest/valid":          man,
		"FuzzManifest/bad-version":    []byte(strings.Replace(string(man), `"version": 2`, `"version": 9`, 1)),
	}
	for name, b := range seeds {
		path := "testdata/fuzz/" + name
		if err := os.MkdirAll(path[:strings.LastIndex(path, "/")], 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n[]byte(" + strconvQuote(b) + ")\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func strconvQuote(b []byte) string { return strconv.Quote(string(b)) }

// mutantLoads writes man, with byte pos xor-ed with x, as the manifest of dir (which holds the
// checkpoint's files) and loads it: an error that is not ErrCorrupt, a load with contents or a
// configuration other than want's, or a table left open is a failure.
func mutantLoads(t *testing.T, dir string, man []byte, pos int, x byte, want tableDump, wantCfg embedding.Config) {
	t.Helper()
	b := append([]byte(nil), man...)
	b[pos%len(b)] ^= x
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	names := embedding.Names()
	loaded, err := embedding.LoadRenamed(context.Background(), dir, func(s string) string { return s + "-mutant" })
	if err != nil {
		if !errors.Is(err, embedding.ErrCorrupt) {
			t.Fatalf("byte %d ^ %#x: Load: %v (not ErrCorrupt)", pos%len(b), x, err)
		}
		if got := embedding.Names(); !slices.Equal(got, names) {
			t.Fatalf("byte %d ^ %#x: tables %v left open", pos%len(b), x, got)
		}
		return
	}
	for _, l := range loaded {
		defer l.Close()
	}
	if len(loaded) != 1 {
		t.Fatalf("byte %d ^ %#x: loaded %d tables", pos%len(b), x, len(loaded))
	}
	got := dump(t, loaded[0])
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(loaded[0].Config(), wantCfg) {
		t.Fatalf("byte %d ^ %#x (%q): loaded other contents or configuration: %+v", pos%len(b), x, b[pos%len(b)], loaded[0].Config())
	}
}

// manifestMutants saves the fuzz seed table and returns its directory, manifest, dump and
// configuration as loaded from the intact checkpoint.
func manifestMutants(t testing.TB) (string, []byte, tableDump, embedding.Config) {
	dir := t.TempDir()
	a, err := embedding.NewNamed("fuzz-seed", embedding.Config{Dim: 3, Optimizer: embedding.Adagrad{}, BlockRows: 4, Initializer: embedding.Zeros{}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	train(t, a, rand.New(rand.NewPCG(7, 7)), 3, 6, 20)
	if err := embedding.Save(context.Background(), dir, a); err != nil {
		t.Fatal(err)
	}
	man, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := embedding.LoadRenamed(context.Background(), dir, func(s string) string { return s + "-mutant" })
	if err != nil {
		t.Fatal(err)
	}
	defer loaded[0].Close()
	return dir, man, dump(t, loaded[0]), loaded[0].Config()
}

// Flips of bits 0, 1 and 5 (digits into digits, letters into letters or their case) of a
// manifest, at every byte, are refused (ErrCorrupt) or load the same table with the same
// configuration (a flip the JSON does not see); FuzzManifestFlip tries any xor. Before the
// manifest had a checksum, such flips loaded another learning rate, eps, seed, step, block size,
// initializer or table name.
func TestManifestBitFlips(t *testing.T) {
	dir, man, want, cfg := manifestMutants(t)
	bits := []byte{1, 2, 32}
	if testing.Short() {
		bits = bits[:1]
	}
	for pos := range man {
		for _, x := range bits {
			mutantLoads(t, dir, man, pos, x, want, cfg)
		}
	}
}

// FuzzManifestFlip: a valid checkpoint whose manifest has one byte xor-ed with any value is
// refused (ErrCorrupt, nothing left open) or loads exactly the saved table.
func FuzzManifestFlip(f *testing.F) {
	dir, man, want, cfg := manifestMutants(f)
	f.Add(uint16(10), byte(1))
	f.Add(uint16(len(man)-3), byte(0x20))
	f.Fuzz(func(t *testing.T, pos uint16, x byte) {
		mutantLoads(t, dir, man, int(pos), x, want, cfg)
	})
}
