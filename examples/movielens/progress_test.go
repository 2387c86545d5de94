package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBar(t *testing.T) {
	var out bytes.Buffer
	b := newBar(&out, "epoch 1", 1000, false)
	b.Add(250)
	if out.Len() != 0 {
		t.Fatalf("a bar that is not live wrote %q before Done", out.String())
	}
	if line := b.Line(); !strings.Contains(line, " 25% 250/1000 ") || !strings.Contains(line, "[======                  ]") {
		t.Errorf("line %q", line)
	}
	b.Add(750)
	b.Done("done")
	got := out.String()
	if !strings.HasPrefix(got, "epoch 1 [========================] 100% 1000/1000 ") || !strings.HasSuffix(got, " done\n") ||
		!strings.Contains(got, "ETA -") || strings.Contains(got, "\r") {
		t.Errorf("final line %q", got)
	}
}

func TestLiveBarRedrawsInPlace(t *testing.T) {
	var out bytes.Buffer
	b := newBar(&out, "x", 10, true)
	b.Done("")
	if !strings.HasPrefix(out.String(), "\rx [") {
		t.Errorf("live bar wrote %q", out.String())
	}
}
