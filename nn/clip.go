package nn

import (
	"errors"
	"fmt"
	"math"

	"github.com/gorec/gorec/cgotorch"
)

// ClipGradNorm scales the gradients of params in place so that their total norm is at most
// maxNorm, as torch.nn.utils.clip_grad_norm_ of PyTorch 1.13 does, and returns the total norm
// before clipping. The total norm is the normType-norm of the vector of the gradients' own
// normType-norms (math.Inf(1): the largest absolute element); every gradient is multiplied by
// min(1, maxNorm / (total + 1e-6)), computed in the total norm's dtype. A parameter listed
// twice (a module shared under two names) counts once, as in torch's parameters(). As in torch, nothing
// checks the total: a NaN total (or an infinite one with an infinite maxNorm) makes every
// gradient NaN. Parameters without a gradient are skipped (no gradient at all: 0). It clips the
// dense parameters only: the embedding tables keep their gradients pending on the C side (see
// embedding.Table.PendingGrad). A normType <= 0 or NaN, or a maxNorm < 0 or NaN, is an error
// wrapping cgotorch.ErrInvalidArgument; a failing tensor operation (a closed parameter, say) is
// returned as an error.
func ClipGradNorm(params []NamedParameter, maxNorm, normType float64) (total float64, err error) {
	if !(normType > 0) || !(maxNorm >= 0) {
		return 0, invalid("clip grad norm: max norm %v must be >= 0 and norm type %v > 0", maxNorm, normType)
	}
	var itemErr error
	err = cgotorch.Try(func() {
		cgotorch.NoGrad(func() {
			cgotorch.WithScope(func(*cgotorch.Scope) {
				var grads, norms []*Tensor
				seen := map[*Tensor]bool{} // a module added twice lists its parameters twice
				for _, p := range params {
					if seen[p.Tensor] {
						continue
					}
					seen[p.Tensor] = true
					if g := p.Tensor.Grad(); g != nil {
						grads = append(grads, g)
						norms = append(norms, vectorNorm(g, normType))
					}
				}
				if len(grads) == 0 {
					return
				}
				t := cgotorch.Stack(norms, 0)
				if math.IsInf(normType, 1) {
					t = t.Max()
				} else {
					t = vectorNorm(t, normType)
				}
				v, err := t.Item()
				if err != nil {
					itemErr = err
					return
				}
				total = v
				// max_norm / (total + 1e-6) clamped to 1, on the norm's tensor (in its dtype) as
				// torch computes it, and multiplied in unconditionally: a NaN or infinite norm
				// spreads into every gradient as it does in torch
				coef := t.AddScalar(1e-6).Reciprocal().MulScalar(maxNorm).ClampMax(1)
				for _, g := range grads {
					g.MulInPlace(coef)
				}
			})
		})
	})
	if err = errors.Join(err, itemErr); err != nil {
		return 0, fmt.Errorf("nn: clip grad norm: %w", err)
	}
	return total, nil
}

// vectorNorm is the p-norm of all of t's elements (torch.norm(t, p)).
func vectorNorm(t *Tensor, p float64) *Tensor {
	switch {
	case math.IsInf(p, 1):
		return t.Abs().Max()
	case p == 2:
		return t.Norm()
	default:
		return t.Abs().PowScalar(p).Sum().PowScalar(1 / p)
	}
}
