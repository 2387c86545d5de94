package nn

import (
	"fmt"
	"sync/atomic"

	"github.com/gorec/gorec/cgotorch"
)

// MaxLookupsWithoutStep bounds the gradients that an Embedding's or EmbeddingBag's table keeps
// pending: the number of training lookups joining the autograd graph (each leaves one batch of
// gradients pending after its backward pass) that a module makes while its table takes no
// step. The next such lookup panics. It allows gradient accumulation over that many
// micro-batches per step.
const MaxLookupsWithoutStep = 1000

// lookupGuard counts a module's training lookups since its table last took a step, so that a
// table no optimizer steps fails loudly instead of growing its pending gradients without bound.
// Any step counts (an Optimizer's, the module's Step, the table's own Step or Update), as seen
// in the table's step count, which it reads once per MaxLookupsWithoutStep lookups.
type lookupGuard struct {
	n        atomic.Int64 // lookups since the count was last reset
	lastStep atomic.Int64 // the table's step count at that reset
}

// check counts a lookup whose result out may leave gradients pending (it requires a gradient,
// and the module is not fused), and panics when the table took no step during the last
// MaxLookupsWithoutStep of them.
func (g *lookupGuard) check(op string, t EmbeddingTable, fused bool, out *Tensor) {
	if fused || !out.RequiresGrad() || g.n.Add(1) <= MaxLookupsWithoutStep {
		return
	}
	st, err := t.Stats()
	if err != nil {
		panic(tensorError(op, err))
	}
	if st.Step != g.lastStep.Swap(st.Step) {
		g.n.Store(1)
		return
	}
	out.Close()
	panic(&cgotorch.Error{Op: op, Kind: cgotorch.ErrInvalidArgument, Msg: fmt.Sprintf(
		"table %q took no step during %d training lookups: no optimizer steps it, and its pending gradients "+
			"would grow without bound (make the optimizer from the whole model, nn.NewAdam(model, ...), "+
			"or put a frozen table's module in evaluation mode)", t.Name(), MaxLookupsWithoutStep)})
}
