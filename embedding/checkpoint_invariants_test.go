package embedding_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// patchTensor sets element i of the float32 tensor name in the table file tf of the one-table
// checkpoint in dir to v, and updates the manifest's checksum of that tensor: a crafted file
// whose checksums all hold.
func patchTensor(t *testing.T, dir, tf, name string, i int, v float32) {
	t.Helper()
	b, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	var ten struct {
		Offsets [2]int `json:"data_offsets"`
	}
	if err := json.Unmarshal(hdr[name], &ten); err != nil {
		t.Fatalf("tensor %q: %v", name, err)
	}
	data := b[8+int(n)+ten.Offsets[0] : 8+int(n)+ten.Offsets[1]]
	binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	if err := os.WriteFile(tf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	editManifest(t, dir, func(m map[string]any) {
		sums := m["tables"].([]any)[0].(map[string]any)["crc32c"].(map[string]any)
		sums[name] = crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	})
}

// editManifest rewrites dir's manifest through f and seals it again (its checksum).
func editManifest(t *testing.T, dir string, f func(m map[string]any)) {
	t.Helper()
	man, _ := checkpointFiles(t, dir)
	b, err := os.ReadFile(man)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if b, err = embedding.SealManifest(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(man, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint whose states break its optimizer's invariants (a negative Adagrad or row-wise
// Adagrad accumulator, a negative Adam second moment, a negative FTRL n), with valid checksums,
// is ErrCorrupt on load: one update on it put NaN in a row (the square root of a negative
// number). The same file with the value made positive loads (the patching is right). Before
// the fix every one of them loaded.
func TestLoadRefusesBrokenOptimizerInvariants(t *testing.T) {
	cases := []struct {
		name  string
		opt   embedding.Optimizer
		state string
	}{
		{"adagrad", embedding.Adagrad{}, "state.sum"},
		{"rowwise-adagrad", embedding.RowWiseAdagrad{}, "state.sum"},
		{"sparse-adam", embedding.SparseAdam{}, "state.exp_avg_sq"},
		{"adamw", embedding.AdamW{}, "state.exp_avg_sq"},
		{"ftrl", embedding.FTRL{}, "state.n"},
	}
	for _, c := range cases {
		for _, v := range []float32{-0.5, 0.5} {
			dir := t.TempDir()
			tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: c.opt}, c.name)
			update(t, tbl, []int64{4, 5}, 1, 2, 3, 4, 5, 6)
			if err := embedding.Save(context.Background(), dir, tbl); err != nil {
				t.Fatal(err)
			}
			tbl.Close()
			_, tf := checkpointFiles(t, dir)
			patchTensor(t, dir, tf, c.state, 0, v)
			loaded, err := embedding.Load(context.Background(), dir)
			for _, l := range loaded {
				l.Close()
			}
			if v < 0 && !errors.Is(err, embedding.ErrCorrupt) {
				t.Errorf("%s: %s = %g: Load: %v, want ErrCorrupt", c.name, c.state, v, err)
			}
			if v > 0 && err != nil {
				t.Errorf("%s: %s = %g: Load: %v", c.name, c.state, v, err)
			}
		}
	}
}
