package embedding_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// SegmentSpans cuts the ids into segments of bags by any form of bounds, and refuses bounds
// that do not fit the ids.
func TestSegmentSpans(t *testing.T) {
	for _, c := range []struct {
		name     string
		n        int64
		bounds   []int64
		kind     embedding.BagBounds
		segments int
		want     string // fmt of the spans, or "error"
	}{
		{"lengths", 7, []int64{1, 2, 0, 4}, embedding.Lengths, 2, "[[0 3] [3 7]]"},
		{"offsets", 7, []int64{0, 1, 3, 3}, embedding.Offsets, 2, "[[0 3] [3 7]]"},
		{"offsets with the last", 7, []int64{0, 1, 3, 3, 7}, embedding.OffsetsIncludeLast, 2, "[[0 3] [3 7]]"},
		{"no bags", 0, nil, embedding.Offsets, 3, "[[0 0] [0 0] [0 0]]"},
		{"one segment", 5, []int64{0, 2}, embedding.Offsets, 1, "[[0 5]]"},
		{"lengths short", 7, []int64{1, 2, 0, 3}, embedding.Lengths, 2, "error"},
		{"negative length", 1, []int64{2, -1}, embedding.Lengths, 1, "error"},
		{"not segments", 7, []int64{1, 2, 4}, embedding.Lengths, 2, "error"},
		{"offsets past the ids", 7, []int64{0, 8}, embedding.Offsets, 2, "error"},
		{"offsets falling", 7, []int64{0, 5, 3, 7}, embedding.Offsets, 2, "error"},
		{"no segment", 0, nil, embedding.Lengths, 0, "error"},
	} {
		spans, err := embedding.SegmentSpans(c.n, c.bounds, c.kind, c.segments)
		got := fmt.Sprint(spans)
		if err != nil {
			got = "error"
			if !errors.Is(err, embedding.ErrBadInput) {
				t.Errorf("%s: %v, want ErrBadInput", c.name, err)
			}
		}
		if got != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, got, err, c.want)
		}
	}
}
