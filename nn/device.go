package nn

import (
	"fmt"

	"github.com/gorec/gorec/cgotorch"
)

// To moves m's parameters, their gradients and m's buffers to device d and, unless dtype is
// cgotorch.KeepDType, converts the floating-point ones to dtype (integer buffers such as
// BatchNorm1d's batch count keep theirs), in place, as PyTorch's module.to(device, dtype) does:
// each stays the same *Tensor (Parameters and Buffers hand out the same values, now on d), so
// a model built on the CPU can be trained on a GPU. Move a model before creating its
// optimizers: they allocate their state next to the parameters when the parameters are added.
// Hash embedding tables (the Steppers of Embedding and EmbeddingBag) stay where their
// embedding.Config put them; their lookups return rows on the ids' device.
//
// Every copy is made before anything changes, so an error (cgotorch.ErrDevice for a device
// that is not available, out of memory on it, cgotorch.ErrInvalidArgument for a dtype that is
// not floating-point) leaves the model as it was.
func To(m Module, d cgotorch.Device, dtype cgotorch.DType) error {
	if dtype != cgotorch.KeepDType && !dtype.IsFloat() {
		return fmt.Errorf("%w: nn: a model's dtype must be floating-point, got %v", cgotorch.ErrInvalidArgument, dtype)
	}
	var grads []*Tensor // handles of the gradients, closed at the end (not the gradients)
	defer func() { closeAll(grads) }()
	var ts []*Tensor
	seen := map[*Tensor]bool{}
	for _, p := range append(m.Parameters(), Buffers(m)...) {
		t := p.Tensor
		if t == nil || seen[t] {
			continue
		}
		seen[t] = true
		ts = append(ts, t)
		if t.Closed() {
			continue // To reports it below
		}
		if g := t.Grad(); g != nil {
			grads = append(grads, g)
			ts = append(ts, g)
		}
	}
	moved := make([]*Tensor, 0, len(ts))
	defer func() { closeAll(moved) }()
	for _, t := range ts {
		dt := dtype
		if t.Closed() || !t.DType().IsFloat() {
			dt = cgotorch.KeepDType
		}
		c, err := t.To(d, dt)
		if err != nil {
			return fmt.Errorf("nn: moving the model to %v: %w", d, err)
		}
		moved = append(moved, c)
	}
	for i, t := range ts {
		if err := t.SetData(moved[i]); err != nil { // dense onto dense: libtorch accepts any
			return fmt.Errorf("nn: moving the model to %v: %w", d, err)
		}
	}
	return nil
}

func closeAll(ts []*Tensor) {
	for _, t := range ts {
		t.Close()
	}
}
