package dist

import (
	"errors"
	"math"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// TrainStep trains on one batch as the plain loop does (opt.ZeroGrad, loss(b), its Backward,
// opt.Step), with the same results bit for bit, but fetches the rows of every sharded lookup
// that lookups(b) lists before the forward pass, in one exchange of ids and one of rows for all
// of them, instead of two exchanges per lookup during it (collective). It returns the loss.
//
// It is TrainPipeline's step without the overlap (and so without the patch): the same rules
// hold. The model must run exactly the lookups listed, in training, in the same order, and
// every rank must list the same tables in the same order (the ids differ). Unlike a broken
// TrainPipeline, an error here leaves nothing behind, but a failed collective still breaks the
// group.
func TrainStep[B any](opt *nn.Optimizer, lookups func(B) []Prefetch, loss func(B) (*cgotorch.Tensor, error), b B) (float64, error) {
	if opt == nil || lookups == nil || loss == nil {
		return math.NaN(), &Error{Op: "train step", Kind: ErrInvalidArgument, Err: errors.New("nil optimizer, lookups or loss")}
	}
	p := &TrainPipeline[B]{opt: opt, lookups: lookups, loss: loss}
	reqs := lookups(b)
	tables, err := p.views(reqs)
	if err != nil {
		return math.NaN(), err
	}
	fs, err := p.fetch(reqs, tables)
	if err != nil {
		return math.NaN(), err
	}
	p.hold(fs)
	defer p.Close()
	p.curB = b
	l, err := p.compute()
	if err == nil {
		_, err = p.step(nil)
	}
	return l, err
}
