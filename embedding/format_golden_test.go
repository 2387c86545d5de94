package embedding_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// The on-disk formats are fixed: testdata/golden holds a checkpoint and a delta file written
// by an earlier gorec. They must keep loading, and writing the same content again must give
// the same bytes. GOREC_WRITE_GOLDEN=1 go test ./embedding -run Golden rewrites them: only on
// purpose, with a format version bump, since files already written must keep loading.

const goldenDir = "testdata/golden"

func writeGolden() bool { return os.Getenv("GOREC_WRITE_GOLDEN") != "" }

// goldenTable builds the same small table every time: written rows, Adagrad updates (one
// inserting a new id), access metadata and admission counts.
func goldenTable(t *testing.T) *embedding.Table {
	tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.Adagrad{LR: 0.1}, BlockRows: 4,
		Initializer: embedding.Constant{Value: 0.5}, TrackAccess: true}, "golden")
	write(t, tbl, []int64{7, -3, 42, 1000}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	update(t, tbl, []int64{42, 7, 5}, 0.5, -1, 2, 0.25, 0.125, -4, 1, 1, 1)
	update(t, tbl, []int64{5}, 3, -3, 0.75)
	if err := tbl.SetAdmission(2); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.LookupIDs([]int64{99, 5}); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// withoutGeneration is a manifest with its generation prefix replaced by "G" and its checksum
// (which covers the generation) by 0.
func withoutGeneration(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Generation string
		Checksum   uint32 `json:"manifest_crc32c"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Generation == "" || m.Checksum == 0 {
		t.Fatalf("%s: generation %q, checksum %d, %v", path, m.Generation, m.Checksum, err)
	}
	s := strings.Replace(string(b), fmt.Sprintf(`"manifest_crc32c": %d`, m.Checksum), `"manifest_crc32c": 0`, 1)
	return strings.ReplaceAll(s, m.Generation, "G")
}

// A checkpoint of format version 1 (before the manifest carried a checksum), written by an
// earlier gorec, still loads with the same contents.
func TestGoldenCheckpointVersion1(t *testing.T) {
	want := goldenTable(t)
	loaded, err := embedding.LoadRenamed(context.Background(), filepath.Join(goldenDir, "checkpoint-v1"), func(s string) string { return s + "-v1" })
	if err != nil {
		t.Fatalf("loading a version 1 checkpoint: %v", err)
	}
	defer loaded[0].Close()
	sameDump(t, "version 1 checkpoint", dump(t, loaded[0]), dump(t, want))
	// A saved seed is kept as it is, not derived again from the name the table is loaded under.
	if s := loaded[0].Config().Seed; s != 0 {
		t.Errorf("seed %d after loading a checkpoint saved with seed 0", s)
	}
}

func TestGoldenCheckpoint(t *testing.T) {
	want := goldenTable(t)
	dir := filepath.Join(goldenDir, "checkpoint")
	if writeGolden() {
		os.RemoveAll(dir)
		if err := embedding.Save(context.Background(), dir, want); err != nil {
			t.Fatal(err)
		}
	}
	loaded, err := embedding.LoadRenamed(context.Background(), dir, func(s string) string { return s + "-loaded" })
	if err != nil {
		t.Fatalf("loading the checkpoint of an earlier gorec: %v", err)
	}
	defer loaded[0].Close()
	if len(loaded) != 1 {
		t.Fatalf("%d tables", len(loaded))
	}
	sameDump(t, "golden checkpoint", dump(t, loaded[0]), dump(t, want))

	again := t.TempDir()
	if err := embedding.Save(context.Background(), again, want); err != nil {
		t.Fatal(err)
	}
	gm, gtf := checkpointFiles(t, dir)
	am, atf := checkpointFiles(t, again)
	if g, a := withoutGeneration(t, gm), withoutGeneration(t, am); g != a {
		t.Errorf("manifest differs from the golden one:\n%s\nwant:\n%s", a, g)
	}
	gb, _ := os.ReadFile(gtf)
	ab, _ := os.ReadFile(atf)
	if len(gb) == 0 || !bytes.Equal(gb, ab) {
		t.Errorf("table file (%d bytes) differs from the golden one (%d bytes)", len(ab), len(gb))
	}
}

// TestGoldenDelta: a delta without a chain (version 1, the format of an earlier gorec) and one
// with its chain and table-wide state (version 2).
func TestGoldenDelta(t *testing.T) {
	v1 := &embedding.Delta{
		IDs:     []int64{-3, 7, 42},
		Rows:    []float32{1, -2, 0.5, 4, 1e-3, -7},
		States:  [][]float32{{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {9, 8, 7}},
		Meta:    []int64{5, 1, 5, 6, 2, 6, 7, 3, 4},
		Deleted: []int64{5, 11},
		Step:    17,
	}
	v2 := *v1
	v2.Optimizer, v2.Lineage, v2.Base, v2.Seq = "sgd", 0xfedcba9876543210, 4, 5
	v2.OptParams = [8]float64{0.1, 0.9, 0.25, 1e-8, 0, 0, 0, 0}
	v2.AdmitAfter, v2.CountIDs, v2.Counts = 3, []int64{-8, 100}, []int64{2, 0}
	for file, d := range map[string]*embedding.Delta{"delta.safetensors": v1, "delta-v2.safetensors": &v2} {
		path := filepath.Join(goldenDir, file)
		if writeGolden() {
			if err := embedding.WriteDelta(path, d, 2); err != nil {
				t.Fatal(err)
			}
		}
		got, dim, err := embedding.ReadDelta(path)
		if err != nil || dim != 2 || !reflect.DeepEqual(got, d) {
			t.Fatalf("%s: ReadDelta of an earlier gorec's file: %+v, dim %d, %v; want %+v", file, got, dim, err, d)
		}
		again := filepath.Join(t.TempDir(), "delta")
		if err := embedding.WriteDelta(again, d, 2); err != nil {
			t.Fatal(err)
		}
		gb, _ := os.ReadFile(path)
		ab, _ := os.ReadFile(again)
		if len(gb) == 0 || !bytes.Equal(gb, ab) {
			t.Errorf("%s: WriteDelta wrote %d bytes that differ from the golden file's %d", file, len(ab), len(gb))
		}
	}
}
