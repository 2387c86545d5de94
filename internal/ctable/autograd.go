package ctable

// #include "../../cgotorch/cgotorch.h"
import "C"

import (
	"runtime"

	"github.com/gorec/gorec/cgotorch"
)

// BagMode is the pooling of ForwardBag.
type BagMode int32

// The poolings of an embedding bag.
const (
	BagSum  BagMode = C.CT_BAG_SUM
	BagMean BagMode = C.CT_BAG_MEAN
	BagMax  BagMode = C.CT_BAG_MAX
)

// ForwardOptions are the options of Forward and ForwardBag (ct_table_forward_options but its
// default_mode, the argument def). Its fields are those of embedding.ForwardOptions, which
// documents them and converts to it as it is (ForwardOptions(o)): keep the two alike.
type ForwardOptions struct {
	Train, Fused bool
	Padding      bool
	PaddingID    int64
	MaxNorm      float64
}

func (o ForwardOptions) c(def ReadDefault) C.ct_table_forward_options {
	var c C.ct_table_forward_options
	if o.Train {
		c.train = 1
	}
	if o.Fused {
		c.fused = 1
	}
	if o.Padding {
		c.has_padding_id = 1
	}
	c.padding_id = C.int64_t(o.PaddingID)
	c.max_norm = C.double(o.MaxNorm)
	c.default_mode = C.int32_t(def)
	return c
}

// Forward returns the rows of ids (int64, any shape) as float32 ids.shape + [dim] on the ids'
// device, as part of the autograd graph when training: a backward pass hands the gradient of
// the rows to the table (pending until Step, or applied at once with Fused). Absent ids of a
// read-only lookup get the def row.
func (t *Table) Forward(ids *cgotorch.Tensor, opts ForwardOptions, def ReadDefault) (*cgotorch.Tensor, error) {
	const op = "table forward"
	k, err := tensorArg(op, "ids", ids)
	if err != nil {
		return nil, err
	}
	p, err := t.acquire(op)
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	o := opts.c(def)
	var out C.ct_tensor
	err = toError(op, C.ct_table_forward(&out, p, k, &o))
	runtime.KeepAlive(ids)
	runtime.KeepAlive(t)
	if err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// ForwardBag returns pooled rows (an embedding bag) as float32 [B, dim]: ids int64 [N] with
// offsets int64 [B] (bag i holds ids[offsets[i]:offsets[i+1]], the last one runs to N), or ids
// [B, L] with nil offsets. weights (per-sample weights shaped like ids, sum mode only) may be
// nil. Empty bags give zero rows. Gradients reach the table as with Forward.
func (t *Table) ForwardBag(ids, offsets, weights *cgotorch.Tensor, mode BagMode, opts ForwardOptions,
	def ReadDefault) (*cgotorch.Tensor, error) {
	const op = "table forward bag"
	k, err := tensorArg(op, "ids", ids)
	if err != nil {
		return nil, err
	}
	var off, w C.ct_tensor
	if offsets != nil {
		if off, err = tensorArg(op, "offsets", offsets); err != nil {
			return nil, err
		}
	}
	if weights != nil {
		if w, err = tensorArg(op, "weights", weights); err != nil {
			return nil, err
		}
	}
	p, err := t.acquire(op)
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	o := opts.c(def)
	var out C.ct_tensor
	err = toError(op, C.ct_table_forward_bag(&out, p, k, off, w, C.int32_t(mode), &o))
	runtime.KeepAlive(ids)
	runtime.KeepAlive(offsets)
	runtime.KeepAlive(weights)
	runtime.KeepAlive(t)
	if err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// Step applies one optimizer step from the gradients pending since the last Step or ZeroGrad
// and drops them. stepped is false when none were pending (then no step is counted). A step
// that fails (NaN or Inf gradients: ErrInvalidArgument) changes nothing and keeps them.
func (t *Table) Step() (stepped bool, err error) {
	const op = "table step"
	p, err := t.acquire(op)
	if err != nil {
		return false, err
	}
	defer t.mu.RUnlock()
	var s C.int32_t
	err = toError(op, C.ct_table_step(&s, p))
	runtime.KeepAlive(t)
	return s != 0, err
}

// ZeroGrad drops the pending gradients.
func (t *Table) ZeroGrad() error {
	const op = "table zero grad"
	p, err := t.acquire(op)
	if err != nil {
		return err
	}
	defer t.mu.RUnlock()
	err = toError(op, C.ct_table_zero_grad(p))
	runtime.KeepAlive(t)
	return err
}

// PendingGrad returns the pending gradients coalesced: ids ascending (int64 [M]) and their
// summed gradients (float32 [M, dim]).
func (t *Table) PendingGrad() (ids, grads *cgotorch.Tensor, err error) {
	const op = "table pending grad"
	p, err := t.acquire(op)
	if err != nil {
		return nil, nil, err
	}
	defer t.mu.RUnlock()
	var i, g C.ct_tensor
	err = toError(op, C.ct_table_pending_grad(&i, &g, p))
	runtime.KeepAlive(t)
	if err != nil {
		return nil, nil, err
	}
	return newTensor(i), newTensor(g), nil
}
