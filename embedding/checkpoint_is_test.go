package embedding_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// IsCheckpoint tells a committed checkpoint from a missing, empty or uncommitted directory.
func TestIsCheckpoint(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ckpt")
	if embedding.IsCheckpoint(dir) || embedding.IsCheckpoint(root) {
		t.Fatal("a missing or empty directory is a checkpoint")
	}
	if err := os.MkdirAll(filepath.Join(root, "odd", "manifest.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if embedding.IsCheckpoint(filepath.Join(root, "odd")) {
		t.Fatal("a directory named manifest.json makes a checkpoint")
	}
	tbl := newTable(t, embedding.Config{Dim: 2})
	lookup(t, tbl, 1, 2)
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	if !embedding.IsCheckpoint(dir) {
		t.Fatal("a saved checkpoint is not one")
	}
}
