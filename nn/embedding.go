package nn

import (
	"errors"
	"fmt"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// EmbeddingOptions are the lookup options of Embedding and EmbeddingBag (see
// embedding.ForwardOptions for the exact rules).
type EmbeddingOptions struct {
	// Fused applies the table's optimizer step during each backward pass (TorchRec's fused
	// optimizers) instead of keeping the gradient until Step.
	Fused bool
	// Padding makes PaddingID the padding id (torch's padding_idx): zero rows, left out of a
	// bag's reduction and mean count, never inserted, no gradient.
	Padding   bool
	PaddingID int64
	// MaxNorm > 0 renormalises looked-up rows whose norm exceeds it (torch's max_norm; in
	// evaluation mode only the output is renormalised, the table is not written).
	MaxNorm float64
}

func (o EmbeddingOptions) forward(train bool) embedding.ForwardOptions {
	return embedding.ForwardOptions{Train: train, Fused: o.Fused, Padding: o.Padding, PaddingID: o.PaddingID, MaxNorm: o.MaxNorm}
}

// Embedding is torch.nn.Embedding over a dynamic hash embedding table: Forward maps int64 ids
// of any shape (raw feature ids, not row numbers) to ids.shape + [Dim] rows of Table, the
// shapes embedding.Table's operations take and give too. Forward takes a tensor, as every
// Module's does: ids in a Go []int64 go through cgotorch.FromSlice (the table's ...IDs forms
// take the slice itself).
//
// In training mode (the default) unseen ids are inserted and the output joins the autograd
// graph with the table as its parameter: a backward pass hands the gradient of the looked-up
// rows to the table, where it stays pending until Step applies one step of the table's own
// optimizer (set in embedding.Config), or, with Fused, is applied during the backward pass.
// In evaluation mode (Train(false)) lookups are read-only: unseen ids get the table's
// ReadDefault row, nothing is inserted, and the output has no gradient.
//
// The rows are not dense parameters: Parameters is empty, and an optimizer made from a model
// holding the Embedding (nn.NewAdam(model, ...)) steps the table through Steppers, and sets its
// rate with Optimizer.SetLR and Scheduler. Several modules may share a table: the first Step
// applies everything pending and the others find nothing left to do.
//
// Pending gradients are bounded: a training lookup that joins the autograd graph when the table
// has taken no step during the last MaxLookupsWithoutStep such lookups panics (ErrInvalidArgument)
// instead of letting them pile up: its table is in no optimizer (one made from
// ParamList(model.Parameters()), say). ZeroGrad drops them but does not reset the count. A table
// to keep frozen goes in evaluation mode (Train(false)).
//
// Forward is model math and follows the tensor policy: bad ids, a closed table or bad options
// panic with a *cgotorch.Error (cgotorch.Try turns the panic into an error). The
// embedding.Table methods return the same failures as errors.
type Embedding struct {
	Base
	Table EmbeddingTable
	EmbeddingOptions
	guard lookupGuard
}

// NewEmbedding returns an Embedding over t (an *embedding.Table, or a sharded table), in
// training mode.
func NewEmbedding(t EmbeddingTable, opts EmbeddingOptions) *Embedding {
	return &Embedding{Table: t, EmbeddingOptions: opts}
}

// Forward returns the rows of ids (int64, any shape) as float32 ids.shape + [Dim].
func (e *Embedding) Forward(ids *Tensor) *Tensor {
	out, err := e.Table.Forward(ids, e.forward(e.Training()))
	if err != nil {
		panic(tensorError("embedding forward", err))
	}
	e.guard.check("embedding forward", e.Table, e.Fused, out)
	return out
}

// Parameters returns nil: the rows live in the table, which its Steppers update.
func (e *Embedding) Parameters() []NamedParameter { return nil }

// ZeroGrad drops the table's pending gradients (idempotent).
func (e *Embedding) ZeroGrad() { zeroTable("embedding zero grad", e.Table) }

// Step applies one step of the table's optimizer from the pending gradients (nothing when none
// are pending).
func (e *Embedding) Step() error { return e.Table.Step() }

// LR is the table's learning rate.
func (e *Embedding) LR() float64 { return e.Table.LR() }

// SetLR sets the table's learning rate (embedding.Table.SetLR).
func (e *Embedding) SetLR(lr float64) error { return e.Table.SetLR(lr) }

// Steppers returns the Embedding itself.
func (e *Embedding) Steppers() []Stepper { return []Stepper{e} }

var (
	_ Layer        = (*Embedding)(nil)
	_ SparseModule = (*Embedding)(nil)
	_ Stepper      = (*Embedding)(nil)
)

// zeroTable drops t's pending gradients; a closed table has none to drop.
func zeroTable(op string, t EmbeddingTable) {
	if err := t.ZeroGrad(); err != nil && !errors.Is(err, embedding.ErrClosed) {
		panic(tensorError(op, err))
	}
}

// tensorError turns an error of the table into the *cgotorch.Error that module math panics
// with, keeping its sentinel (ErrInvalidArgument for bad input, ErrClosed, ErrDevice); any
// other error (a sharded table's failed peer, say) stays in the chain under ErrTorch.
func tensorError(op string, err error) *cgotorch.Error {
	kind := fmt.Errorf("%w: %w", cgotorch.ErrTorch, err) // another table's (a sharded one's) failure, kept
	for _, k := range []error{cgotorch.ErrInvalidArgument, cgotorch.ErrClosed, cgotorch.ErrDevice} {
		if errors.Is(err, k) { // embedding's sentinels are cgotorch's: nothing to map
			kind = k
			break
		}
	}
	return &cgotorch.Error{Op: op, Msg: err.Error(), Kind: kind}
}
