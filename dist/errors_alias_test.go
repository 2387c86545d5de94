package dist

import (
	"testing"

	"github.com/gorec/gorec/cgotorch"
)

// The sentinels that come from the C layer are cgotorch's, re-exported: the same values.
func TestSentinelsAreCgotorchs(t *testing.T) {
	for _, c := range []struct {
		name     string
		ours, ct error
	}{
		{"ErrTimeout", ErrTimeout, cgotorch.ErrTimeout},
		{"ErrPeer", ErrPeer, cgotorch.ErrPeer},
		{"ErrRefused", ErrRefused, cgotorch.ErrRefused},
		{"ErrBroken", ErrBroken, cgotorch.ErrBroken},
		{"ErrClosed", ErrClosed, cgotorch.ErrClosed},
		{"ErrInvalidArgument", ErrInvalidArgument, cgotorch.ErrInvalidArgument},
		{"ErrMismatch", ErrMismatch, cgotorch.ErrMismatch},
	} {
		if c.ours != c.ct {
			t.Errorf("dist.%s is not cgotorch's sentinel", c.name)
		}
	}
}
