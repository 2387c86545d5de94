package embedding_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// A checkpoint or delta that cannot be read gives the sentinel (ErrNotFound, ErrCorrupt) and
// keeps the cause: the OS error, the reader's, the JSON decoder's, the C layer's.

// isBoth fails the test unless err wraps both the sentinel and the cause.
func isBoth(t *testing.T, what string, err, sentinel, cause error) {
	t.Helper()
	if !errors.Is(err, sentinel) || !errors.Is(err, cause) {
		t.Errorf("%s: %v; want errors.Is %q and %q", what, err, sentinel, cause)
	}
}

func TestMissingFilesKeepTheOSError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := embedding.Load(context.Background(), missing)
	isBoth(t, "Load of a missing directory", err, embedding.ErrNotFound, fs.ErrNotExist)
	_, _, err = embedding.ReadDelta(missing)
	isBoth(t, "ReadDelta of a missing file", err, embedding.ErrNotFound, fs.ErrNotExist)

	// A manifest that is there but cannot be read is not "not found".
	unreadable := t.TempDir()
	if err := os.Mkdir(filepath.Join(unreadable, "manifest.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = embedding.Load(context.Background(), unreadable)
	if !errors.Is(err, embedding.ErrInternal) || errors.Is(err, embedding.ErrNotFound) {
		t.Errorf("Load of a manifest that is a directory: %v; want ErrInternal, not ErrNotFound", err)
	}

	// A file the manifest names is gone: the checkpoint is corrupt, and the cause is kept.
	dir := t.TempDir()
	tbl := newTable(t, embedding.Config{Dim: 2}, "t")
	write(t, tbl, []int64{1}, 1, 2)
	if err := embedding.SaveWith(context.Background(), dir, []*embedding.Table{tbl}, map[string]func(io.Writer) error{
		"extra": func(w io.Writer) error { _, err := w.Write([]byte("x")); return err },
	}); err != nil {
		t.Fatal(err)
	}
	extra, _ := filepath.Glob(filepath.Join(dir, "g*.f.extra"))
	if len(extra) != 1 {
		t.Fatalf("extra files: %v", extra)
	}
	os.Remove(extra[0])
	err = embedding.LoadInto(context.Background(), dir, nil, map[string]func(io.Reader) error{"extra": func(io.Reader) error { return nil }})
	isBoth(t, "LoadInto without the extra file", err, embedding.ErrCorrupt, fs.ErrNotExist)
	_, tf := checkpointFiles(t, dir)
	os.Remove(tf)
	_, err = embedding.LoadRenamed(context.Background(), dir, func(s string) string { return s + "-2" })
	isBoth(t, "Load without the table file", err, embedding.ErrCorrupt, fs.ErrNotExist)
}

func TestCorruptFilesKeepTheCause(t *testing.T) {
	var syn *json.SyntaxError
	if err := embedding.ParseManifest([]byte(`{"format":`)); !errors.Is(err, embedding.ErrCorrupt) || !errors.As(err, &syn) {
		t.Errorf("manifest garbage: %v; want ErrCorrupt and a *json.SyntaxError", err)
	}

	table, _ := validTableFile(t)
	garbage := append([]byte(nil), table...)
	copy(garbage[8:], `{"ids":[1,2]`)
	if err := embedding.LoadTableBytes(garbage); !errors.Is(err, embedding.ErrCorrupt) || !errors.As(err, &syn) {
		t.Errorf("table header garbage: %v; want ErrCorrupt and a *json.SyntaxError", err)
	}
	err := embedding.LoadTableBytes(table[:20])
	isBoth(t, "table file cut in its header", err, embedding.ErrCorrupt, io.ErrUnexpectedEOF)

	// A NaN row with a matching checksum: refused by the C side, whose error is kept.
	nan := append([]byte(nil), table...)
	hlen := binary.LittleEndian.Uint64(nan)
	var hdr map[string]struct {
		Offsets [2]int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(nan[8:8+hlen], &hdr); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(nan[8+int64(hlen)+hdr["rows"].Offsets[0]:], math.Float32bits(float32(math.NaN())))
	err = embedding.LoadTableBytes(nan)
	var ce *cgotorch.Error
	if !errors.Is(err, embedding.ErrCorrupt) || !errors.Is(err, cgotorch.ErrInvalidArgument) || !errors.As(err, &ce) {
		t.Errorf("NaN row: %v; want ErrCorrupt wrapping the *cgotorch.Error", err)
	}

	path := filepath.Join(t.TempDir(), "delta")
	if err := embedding.WriteDelta(path, &embedding.Delta{IDs: []int64{1}, Rows: []float32{1, 2}, Meta: make([]int64, 3)}, 2); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 20); err != nil {
		t.Fatal(err)
	}
	_, _, err = embedding.ReadDelta(path)
	isBoth(t, "delta cut in its header", err, embedding.ErrCorrupt, io.ErrUnexpectedEOF)
}
