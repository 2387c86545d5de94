package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got:\n%s", out.String())
	}
	var loss [2]float64
	for i, l := range lines {
		var step int
		if _, err := fmt.Sscanf(l, "step %d: logits [4 1], 3 ids in the table, loss %f", &step, &loss[i]); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
	}
	if !(loss[1] < loss[0]) {
		t.Errorf("loss went from %v to %v", loss[0], loss[1])
	}
}

// TestREADMEHasTheProgram keeps the README's quickstart identical to this program.
func TestREADMEHasTheProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, src) {
		t.Error("README.md's quickstart differs from examples/quickstart/main.go: copy the program into it")
	}
}
