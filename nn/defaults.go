package nn

import "math"

// Zero returns the value that asks for an exact 0 in an option field where 0 means the
// default: negative zero, which is 0 in every computation. The rule is embedding.Config's: a
// zero field means the documented default (AdamOptions{LR: 1e-3} has PyTorch's betas and eps);
// a field whose default is 0 takes 0 either way. So AdamOptions{LR: 1e-3, Eps: nn.Zero()} is
// Adam without eps, and ParamGroup{LR: nn.Zero()} a frozen group.
func Zero() float64 { return math.Copysign(0, -1) }

// orDefault is v, def when v is a plain 0, and 0 when v is Zero().
func orDefault(v, def float64) float64 {
	if v != 0 {
		return v
	}
	if math.Signbit(v) {
		return 0
	}
	return def
}

// The defaults of the optimizers' options (PyTorch's; SGD's LR, which torch requires, is
// embedding.SGD's).
const (
	defaultSGDLR      = 0.01
	defaultAdamLR     = 1e-3
	defaultAdamBeta1  = 0.9
	defaultAdamBeta2  = 0.999
	defaultAdamEps    = 1e-8
	defaultAdagradLR  = 1e-2
	defaultAdagradEps = 1e-10
)

// resolved is o with its defaults filled in and Zero() read as 0.
func (o SGDOptions) resolved() SGDOptions {
	o.LR = orDefault(o.LR, defaultSGDLR)
	o.Momentum, o.Dampening, o.WeightDecay = orDefault(o.Momentum, 0), orDefault(o.Dampening, 0), orDefault(o.WeightDecay, 0)
	return o
}

// resolved is o with its defaults filled in and Zero() read as 0.
func (o AdamOptions) resolved() AdamOptions {
	o.LR, o.Eps = orDefault(o.LR, defaultAdamLR), orDefault(o.Eps, defaultAdamEps)
	o.Beta1, o.Beta2 = orDefault(o.Beta1, defaultAdamBeta1), orDefault(o.Beta2, defaultAdamBeta2)
	o.WeightDecay = orDefault(o.WeightDecay, 0)
	return o
}

// resolved is o with its defaults filled in and Zero() read as 0.
func (o AdagradOptions) resolved() AdagradOptions {
	o.LR, o.Eps = orDefault(o.LR, defaultAdagradLR), orDefault(o.Eps, defaultAdagradEps)
	o.LRDecay, o.WeightDecay = orDefault(o.LRDecay, 0), orDefault(o.WeightDecay, 0)
	o.InitialAccumulatorValue = orDefault(o.InitialAccumulatorValue, 0)
	return o
}
