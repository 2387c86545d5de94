package nn

import "github.com/gorec/gorec/cgotorch"

// Reduction says how a loss combines its per-element values.
type Reduction = cgotorch.Reduction

// The reductions of the losses.
const (
	ReduceNone = cgotorch.ReduceNone
	ReduceMean = cgotorch.ReduceMean
	ReduceSum  = cgotorch.ReduceSum
)

// Loss computes a loss from a model's output and the target.
type Loss func(input, target *Tensor) *Tensor

// BCEWithLogits is the binary cross entropy of sigmoid(input) against target (same shape, in
// [0, 1]), computed stably from the logits: PyTorch's nn.BCEWithLogitsLoss.
func BCEWithLogits(r Reduction) Loss {
	return func(input, target *Tensor) *Tensor { return cgotorch.BCEWithLogitsLoss(input, target, r) }
}

// MSE is the squared error (input - target)²: PyTorch's nn.MSELoss.
func MSE(r Reduction) Loss {
	return func(input, target *Tensor) *Tensor { return cgotorch.MSELoss(input, target, r) }
}

// CrossEntropy is the cross entropy of softmax(input) over dimension 1 (logits [N, C]) against
// Int64 classes [N] or class probabilities shaped like input: PyTorch's nn.CrossEntropyLoss.
func CrossEntropy(r Reduction) Loss {
	return func(input, target *Tensor) *Tensor { return cgotorch.CrossEntropyLoss(input, target, r) }
}
