package embedding_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// validTableFile saves a small dim-3 Adagrad table (with admission counts) and returns its
// table file and manifest.
func validTableFile(t testing.TB) (table, manifest []byte) {
	dir := t.TempDir()
	a, err := embedding.New("fuzz-seed", embedding.Config{Dim: 3, Optimizer: embedding.Adagrad{}, BlockRows: 4, Initializer: embedding.Zeros{}})
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
	if err := embedding.Save(dir, a); err != nil {
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
		"FuzzManifest/bad-version":    []byte(strings.Replace(string(man), `"version": 1`, `"version": 9`, 1)),
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
