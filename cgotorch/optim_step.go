package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"fmt"
	"runtime"
)

// OptimizerKind selects the update rule of OptimizerStep.
type OptimizerKind int32

// The dense update rules of PyTorch 1.13's torch.optim.
const (
	OptimSGD     OptimizerKind = C.CT_OPTIM_SGD     // states: momentum buffer (with momentum)
	OptimAdam    OptimizerKind = C.CT_OPTIM_ADAM    // states: exp_avg, exp_avg_sq, max_exp_avg_sq (AMSGrad)
	OptimAdamW   OptimizerKind = C.CT_OPTIM_ADAMW   // states: as Adam
	OptimAdagrad OptimizerKind = C.CT_OPTIM_ADAGRAD // states: sum of squared gradients
)

// OptimizerOptions are the hyperparameters of OptimizerStep; each rule reads its own.
type OptimizerOptions struct {
	Kind              OptimizerKind
	LR, WeightDecay   float64
	Momentum          float64 // SGD
	Dampening         float64 // SGD
	Nesterov          bool    // SGD
	Beta1, Beta2, Eps float64 // Adam, AdamW; Eps also Adagrad
	AMSGrad           bool    // Adam, AdamW
	LRDecay           float64 // Adagrad
}

// OptimizerStep updates param in place from grad by one step of the rule (step counts from 1),
// with the tensor operations torch.optim uses, in the same order, in a single call. states are
// the rule's state tensors, shaped like param and updated in place (see OptimizerKind); unused
// trailing ones may be left out. Gradient recording is off inside. Like other tensor math it
// panics with a *Error on wrong shapes, missing states or a step below 1.
func OptimizerStep(o OptimizerOptions, step int64, param, grad *Tensor, states ...*Tensor) {
	if len(states) > 3 {
		panic(&Error{Op: "optimizer step", Msg: fmt.Sprintf("%d states, at most 3", len(states)), Kind: ErrInvalidArgument})
	}
	var cs [3]C.ct_tensor
	for i, s := range states {
		if s != nil {
			cs[i] = s.c()
		}
	}
	co := o.c()
	must("optimizer step", C.ct_optim_step(param.c(), grad.c(), cs[0], cs[1], cs[2], C.int64_t(step), &co))
	runtime.KeepAlive(param)
	runtime.KeepAlive(grad)
	runtime.KeepAlive(states)
}

func (o OptimizerOptions) c() C.ct_optim_options {
	return C.ct_optim_options{
		kind: C.int32_t(o.Kind), lr: C.double(o.LR), weight_decay: C.double(o.WeightDecay),
		momentum: C.double(o.Momentum), dampening: C.double(o.Dampening), nesterov: cBool(o.Nesterov),
		beta1: C.double(o.Beta1), beta2: C.double(o.Beta2), eps: C.double(o.Eps), amsgrad: cBool(o.AMSGrad),
		lr_decay: C.double(o.LRDecay),
	}
}

// OptimizerParam is one parameter of OptimizerStepParams: the tensor, its state tensors (nil
// where the rule has none, see OptimizerKind) and the number of its next step (from 1).
type OptimizerParam struct {
	Param  *Tensor
	States [3]*Tensor
	Step   int64
}

// OptimizerStepParams is OptimizerStep for several parameters in one call, each from its own
// gradient (its Grad, read on the C side: no handle is made for it); a parameter without one is
// skipped. It reports in stepped (when not nil, of len(ps)) which parameters were updated. Every
// parameter is checked before any changes: on a panic nothing has changed.
func OptimizerStepParams(o OptimizerOptions, ps []OptimizerParam, stepped []bool) {
	if stepped != nil && len(stepped) != len(ps) {
		panic(&Error{Op: "optimizer step", Msg: fmt.Sprintf("%d stepped flags for %d parameters", len(stepped), len(ps)), Kind: ErrInvalidArgument})
	}
	if len(ps) == 0 {
		return
	}
	params := make([]C.ct_tensor, len(ps))
	states := make([]C.ct_tensor, 3*len(ps))
	steps := make([]C.int64_t, len(ps))
	for i, p := range ps {
		params[i] = p.Param.c()
		for j, s := range p.States {
			if s != nil {
				states[3*i+j] = s.c()
			}
		}
		steps[i] = C.int64_t(p.Step)
	}
	flags := make([]C.int32_t, len(ps))
	co := o.c()
	must("optimizer step", C.ct_optim_step_params(&flags[0], C.int32_t(len(ps)), &params[0], &states[0], &steps[0], &co))
	runtime.KeepAlive(ps)
	for i := range stepped {
		stepped[i] = flags[i] != 0
	}
}
