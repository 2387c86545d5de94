package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"runtime"
	"strconv"
)

// Reduction says how a loss combines its per-element values (libtorch's at::Reduction).
type Reduction int

// The reductions of the losses.
const (
	// ReduceNone returns the per-element losses.
	ReduceNone Reduction = C.CT_REDUCTION_NONE
	// ReduceMean returns their mean (a 0-dim tensor).
	ReduceMean Reduction = C.CT_REDUCTION_MEAN
	// ReduceSum returns their sum (a 0-dim tensor).
	ReduceSum Reduction = C.CT_REDUCTION_SUM
)

// String names the reduction as libtorch does ("none", "mean", "sum").
func (r Reduction) String() string {
	switch r {
	case ReduceNone:
		return "none"
	case ReduceMean:
		return "mean"
	case ReduceSum:
		return "sum"
	}
	return "Reduction(" + strconv.Itoa(int(r)) + ")"
}

func loss(op C.int32_t, input, target *Tensor, r Reduction, name string) *Tensor {
	var out C.ct_tensor
	must(name, C.ct_loss(&out, op, input.c(), target.c(), C.int32_t(r)))
	runtime.KeepAlive(input)
	runtime.KeepAlive(target)
	return newTensor(out)
}

// MSELoss is the squared error (input - target)^2; target is shaped like input (libtorch, as
// PyTorch, broadcasts the two otherwise).
func MSELoss(input, target *Tensor, r Reduction) *Tensor {
	return loss(C.CT_LOSS_MSE, input, target, r, "mse loss")
}

// L1Loss is the absolute error |input - target|; target is shaped like input (or broadcast,
// as in MSELoss).
func L1Loss(input, target *Tensor, r Reduction) *Tensor {
	return loss(C.CT_LOSS_L1, input, target, r, "l1 loss")
}

// SmoothL1Loss is 0.5*d^2 where |d| < 1 and |d| - 0.5 elsewhere, with d = input - target.
func SmoothL1Loss(input, target *Tensor, r Reduction) *Tensor {
	return loss(C.CT_LOSS_SMOOTH_L1, input, target, r, "smooth l1 loss")
}

// BCELoss is the binary cross entropy of probabilities input (in [0, 1]) against target (same
// shape, in [0, 1]; another shape panics, as PyTorch raises). Prefer BCEWithLogitsLoss, which is
// stabler.
func BCELoss(input, target *Tensor, r Reduction) *Tensor {
	return loss(C.CT_LOSS_BCE, input, target, r, "bce loss")
}

// BCEWithLogitsLoss is the binary cross entropy of sigmoid(input) against target (same shape,
// in [0, 1]; another shape panics, as PyTorch raises), computed stably from the logits: the loss
// of CTR models.
func BCEWithLogitsLoss(input, target *Tensor, r Reduction) *Tensor {
	return loss(C.CT_LOSS_BCE_WITH_LOGITS, input, target, r, "bce with logits loss")
}

// CrossEntropyLoss is the cross entropy of softmax(input) along dimension 1 (input: logits
// [N, C] or [N, C, d...]) against target: Int64 classes [N] (or [N, d...]), or class
// probabilities shaped like input.
func CrossEntropyLoss(input, target *Tensor, r Reduction) *Tensor {
	return loss(C.CT_LOSS_CROSS_ENTROPY, input, target, r, "cross entropy loss")
}

// NLLLoss is the negative log-likelihood of Int64 classes target [N] (or [N, d...]) under
// log-probabilities input [N, C] (or [N, C, d...]), e.g. from LogSoftmax(1).
func NLLLoss(input, target *Tensor, r Reduction) *Tensor {
	return loss(C.CT_LOSS_NLL, input, target, r, "nll loss")
}
