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
	co := C.ct_optim_options{
		kind: C.int32_t(o.Kind), lr: C.double(o.LR), weight_decay: C.double(o.WeightDecay),
		momentum: C.double(o.Momentum), dampening: C.double(o.Dampening), nesterov: cBool(o.Nesterov),
		beta1: C.double(o.Beta1), beta2: C.double(o.Beta2), eps: C.double(o.Eps), amsgrad: cBool(o.AMSGrad),
		lr_decay: C.double(o.LRDecay),
	}
	must("optimizer step", C.ct_optim_step(param.c(), grad.c(), cs[0], cs[1], cs[2], C.int64_t(step), &co))
	runtime.KeepAlive(param)
	runtime.KeepAlive(grad)
	runtime.KeepAlive(states)
}
