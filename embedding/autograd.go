package embedding

import (
	"math"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// BagMode is the pooling of an embedding bag (ForwardBag).
type BagMode int

// The poolings.
const (
	Sum BagMode = iota
	Mean
	Max
)

func (m BagMode) c() (ctable.BagMode, bool) {
	switch m {
	case Sum:
		return ctable.BagSum, true
	case Mean:
		return ctable.BagMean, true
	case Max:
		return ctable.BagMax, true
	}
	return 0, false
}

// String is the mode's PyTorch name.
func (m BagMode) String() string {
	switch m {
	case Sum:
		return "sum"
	case Mean:
		return "mean"
	case Max:
		return "max"
	}
	return "BagMode(?)"
}

// ForwardOptions configures Forward and ForwardBag.
type ForwardOptions struct {
	// Train makes a training lookup: absent ids are inserted, and when grad mode is on the
	// result joins the autograd graph with the table as its parameter. Otherwise the lookup is
	// an inference read: nothing is inserted, absent ids get the Config's ReadDefault row, and
	// the result does not require a gradient.
	Train bool
	// Fused applies one optimizer step during each backward pass instead of keeping the
	// gradient pending until Step (TorchRec's fused optimizers). It needs an optimizer. The
	// step comes at the end of the pass, on the gradients of every fused lookup of the table
	// that the pass reached, summed: a table looked up several times in one graph takes one
	// step, as accumulate + Step gives.
	Fused bool
	// Padding makes PaddingID the padding id (PyTorch's padding_idx): it is never looked up
	// or inserted, its positions give zero rows (Forward) or are left out of a bag's reduction
	// and of its mean's count (ForwardBag), and it gets no gradient.
	Padding   bool
	PaddingID int64
	// MaxNorm > 0 renormalises each looked-up row whose Euclidean norm exceeds it to
	// MaxNorm / (norm + 1e-7) times itself. In training the rows are renormalised in the table,
	// as PyTorch's max_norm does to its weight; in inference only the result is (the table is
	// not written).
	MaxNorm float64
}

// checkForward checks o; it converts to the binding's options as it is.
func (t *Table) checkForward(op string, o ForwardOptions) error {
	if math.IsNaN(o.MaxNorm) || math.IsInf(o.MaxNorm, 0) || o.MaxNorm < 0 {
		return badInput(op, t.name, "MaxNorm must be finite and >= 0, got %v", o.MaxNorm)
	}
	return nil
}

// Forward returns the rows of ids (int64, any shape, any device) as float32
// ids.shape + [Dim] on the ids' device. A training lookup with grad mode on is part of the
// autograd graph: a backward pass through the result sums the gradients of repeated ids and
// hands them to the table, which keeps them pending until Step (or, Fused, applies them at
// once). The ids of a batch are de-duplicated and each distinct id is looked up once.
//
// Errors follow the table policy: bad ids or options (ErrBadInput), a closed table (ErrClosed).
// The backward pass itself is tensor math: it panics (with a *cgotorch.Error) if the table was
// closed in between, or, Fused, when a gradient is NaN or Inf.
func (t *Table) Forward(ids *cgotorch.Tensor, opts ForwardOptions) (*cgotorch.Tensor, error) {
	if t == nil {
		return nil, errNilTable
	}
	if err := t.checkForward("forward", opts); err != nil {
		return nil, err
	}
	r, err := t.t.Forward(ids, ctable.ForwardOptions(opts), t.conf().ReadDefault.c())
	return r, wrap("forward", t.name, err)
}

// ForwardBag returns pooled rows (PyTorch's EmbeddingBag) as float32 [B, Dim]: ids int64 [N]
// with offsets int64 [B] (bag i holds ids[offsets[i]:offsets[i+1]], the last one runs to N;
// offsets start at 0 and do not decrease), or ids [B, L] (B bags of L ids) with nil offsets.
// weights (per-sample weights, float32 shaped like ids; Sum only) may be nil. Empty bags give
// zero rows. Gradients reach the table as with Forward: Mean scales each occurrence's by
// 1/|bag|, Max sends each column's to the row that holds the maximum.
func (t *Table) ForwardBag(ids, offsets, weights *cgotorch.Tensor, mode BagMode, opts ForwardOptions) (*cgotorch.Tensor, error) {
	if t == nil {
		return nil, errNilTable
	}
	if err := t.checkForward("forward bag", opts); err != nil {
		return nil, err
	}
	m, ok := mode.c()
	if !ok {
		return nil, badInput("forward bag", t.name, "unknown bag mode %d", int(mode))
	}
	r, err := t.t.ForwardBag(ids, offsets, weights, m, ctable.ForwardOptions(opts), t.conf().ReadDefault.c())
	return r, wrap("forward bag", t.name, err)
}

// Step applies one optimizer step from the gradients that backward passes left pending since
// the last Step or ZeroGrad (the gradients of an id from several passes are summed first:
// accumulating micro-batches and stepping once equals one step over the whole batch), then
// drops them. Without pending gradients it does nothing (the package doc's Steps). A batch of gradients holding NaN or Inf is rejected as a
// whole (ErrBadInput) and stays pending (drop it with ZeroGrad). Ids deleted since their
// lookup are inserted again, as Update does.
func (t *Table) Step() error {
	if t == nil {
		return errNilTable
	}
	_, err := t.t.Step()
	return wrap("step", t.name, err)
}

// ZeroGrad drops the pending gradients.
func (t *Table) ZeroGrad() error {
	if t == nil {
		return errNilTable
	}
	return wrap("zero grad", t.name, t.t.ZeroGrad())
}

// PendingGrad returns the pending gradients coalesced: the ids (ascending, int64 [M]) and the
// sum of their gradients (float32 [M, Dim]), what the next Step applies.
func (t *Table) PendingGrad() (ids, grads *cgotorch.Tensor, err error) {
	if t == nil {
		return nil, nil, errNilTable
	}
	ids, grads, err = t.t.PendingGrad()
	return ids, grads, wrap("pending grad", t.name, err)
}
