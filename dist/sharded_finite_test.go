package dist

import (
	"errors"
	"math"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// finite clears finite values, those whose sum overflows included, and refuses a NaN, an Inf,
// or both infinities (whose sum is NaN).
func TestFiniteCheck(t *testing.T) {
	s := &ShardedTable{name: "t"}
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		v  []float32
		ok bool
	}{
		{[]float32{1, -2, 3.5, 0}, true},
		{[]float32{3e38, 3e38, 3e38}, true}, // the sum overflows to +Inf
		{[]float32{-3e38, -3e38}, true},
		{[]float32{1, float32(math.NaN())}, false},
		{[]float32{1, inf}, false},
		{[]float32{inf, -inf}, false},
		{[]float32{3e38, 3e38, -inf}, false},
	} {
		v := cgotorch.MustFromSlice(c.v, int64(len(c.v)), 1)
		err := s.finite("update", "gradients", v)
		v.Close()
		if c.ok && err != nil || !c.ok && !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("%v: %v, want finite %v", c.v, err, c.ok)
		}
	}
}
