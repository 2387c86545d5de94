package embedding_test

import (
	"errors"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// TestForwardBagsErrors checks ForwardBags' refusals: a closed table (ErrClosed), a Max feature
// and a segment out of range (ErrBadInput); none inserts an id into the other, open table.
func TestForwardBagsErrors(t *testing.T) {
	open := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.SGD{LR: 1}}, "open")
	closed := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}}, "closed")
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	ids := cgotorch.MustFromSlice([]int64{1, 2, 3, 4})
	lengths := cgotorch.MustFromSlice([]int64{1, 1, 1, 1})
	train := embedding.ForwardOptions{Train: true}
	for name, tc := range map[string]struct {
		features []embedding.BagFeature
		kind     error
	}{
		"closed table": {[]embedding.BagFeature{{Table: open, Options: train}, {Table: closed, Options: train, Segment: 1}}, embedding.ErrClosed},
		"max":          {[]embedding.BagFeature{{Table: open, Options: train}, {Table: open, Mode: embedding.Max, Segment: 1}}, embedding.ErrBadInput},
		"segment":      {[]embedding.BagFeature{{Table: open, Options: train}, {Table: open, Options: train, Segment: 2}}, embedding.ErrBadInput},
	} {
		_, err := embedding.ForwardBags(tc.features, 2, ids, lengths, nil, embedding.Lengths)
		if !errors.Is(err, tc.kind) {
			t.Errorf("%s: %v, want %v", name, err, tc.kind)
		}
	}
	if st, err := open.Stats(); err != nil || st.Len != 0 {
		t.Fatalf("the open table holds %d ids (%v) after refused calls, want 0", st.Len, err)
	}
	if err := embedding.StepAll([]*embedding.Table{open, closed}); !errors.Is(err, embedding.ErrClosed) {
		t.Fatalf("StepAll with a closed table: %v", err)
	}
	if err := embedding.ZeroGradAll([]*embedding.Table{open, open}); err != nil {
		t.Fatalf("ZeroGradAll of one table twice: %v", err)
	}
}
