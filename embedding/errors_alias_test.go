package embedding_test

import (
	"errors"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// The sentinels that come from the C layer are cgotorch's, re-exported: the same values.
func TestSentinelsAreCgotorchs(t *testing.T) {
	for _, c := range []struct {
		name     string
		ours, ct error
	}{
		{"ErrBadInput", embedding.ErrBadInput, cgotorch.ErrInvalidArgument},
		{"ErrClosed", embedding.ErrClosed, cgotorch.ErrClosed},
		{"ErrNameTaken", embedding.ErrNameTaken, cgotorch.ErrNameTaken},
		{"ErrNotFound", embedding.ErrNotFound, cgotorch.ErrNotFound},
		{"ErrUnknownPrefetch", embedding.ErrUnknownPrefetch, cgotorch.ErrUnknownPrefetch},
		{"ErrDevice", embedding.ErrDevice, cgotorch.ErrDevice},
		{"ErrIncompatible", embedding.ErrIncompatible, cgotorch.ErrIncompatible},
	} {
		if c.ours != c.ct {
			t.Errorf("embedding.%s is not cgotorch's sentinel", c.name)
		}
	}
}

// Bad input found on the Go side answers errors.Is for both names of the sentinel, as bad input
// found by the C layer does.
func TestBadInputIsInvalidArgument(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2})
	_, goSide := tbl.Forward(ids64(t, []int64{1}), embedding.ForwardOptions{MaxNorm: -1})
	_, cSide := tbl.Forward(cgotorch.MustFromSlice([]float32{1}), embedding.ForwardOptions{})
	for name, err := range map[string]error{"Go side": goSide, "C side": cSide} {
		if !errors.Is(err, embedding.ErrBadInput) || !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: %v; want errors.Is ErrBadInput and cgotorch.ErrInvalidArgument", name, err)
		}
	}
}
