package nn

import (
	"runtime"
	"sync"
	"weak"
)

// Claim marks parameters as synchronized by a GradientSyncer (see ClaimParameters). It is
// held by the syncer; once neither is reachable the claim lapses.
type Claim struct {
	s    GradientSyncer
	keys []weak.Pointer[Tensor]
}

// claims maps a claimed parameter to its Claim, both weakly: a parameter or a syncer that the
// program dropped takes no memory here but its map entry, which the Claim's cleanup removes.
var claims sync.Map // weak.Pointer[Tensor] -> weak.Pointer[Claim]

// ClaimParameters marks the parameters of s as synchronized by s (dist.DataParallel claims
// its model's): an optimizer made from anything but s then refuses them (an error wrapping
// cgotorch.ErrInvalidArgument), so that a training loop cannot step them without the sync, as
// it would with an optimizer made from the model instead of the syncer. An optimizer made
// before the claim is not affected. s keeps the returned Claim for as long as it syncs; a
// later claim of a parameter replaces an earlier one.
func ClaimParameters(s GradientSyncer) *Claim {
	c := &Claim{s: s}
	wc := weak.Make(c)
	for _, p := range s.Parameters() {
		k := weak.Make(p.Tensor)
		c.keys = append(c.keys, k)
		claims.Store(k, wc)
	}
	runtime.AddCleanup(c, func(keys []weak.Pointer[Tensor]) {
		for _, k := range keys {
			claims.CompareAndDelete(k, wc)
		}
	}, c.keys)
	return c
}

// claimant is the GradientSyncer that claimed p, or nil.
func claimant(p *Tensor) GradientSyncer {
	v, ok := claims.Load(weak.Make(p))
	if !ok {
		return nil
	}
	if c := v.(weak.Pointer[Claim]).Value(); c != nil {
		return c.s
	}
	return nil
}
