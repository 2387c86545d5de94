package nn

import (
	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// EmbeddingBag is torch.nn.EmbeddingBag over a dynamic hash embedding table: the rows of each
// bag of ids pooled by Mode (embedding.Sum, Mean or Max) into one row, without materialising
// the per-id rows' output. Training, evaluation, Fused, padding, MaxNorm, stepping, the bound on
// pending gradients and the error policy are as for Embedding.
//
// It is a Module whose Forward takes the bags' offsets besides the ids: Add it to a model's
// Container like any child and call its Forward from the model's Forward; an optimizer made
// from the model steps its table.
type EmbeddingBag struct {
	Base
	Table EmbeddingTable
	Mode  embedding.BagMode
	EmbeddingOptions
	guard lookupGuard
}

// NewEmbeddingBag returns an EmbeddingBag over t, in training mode.
func NewEmbeddingBag(t EmbeddingTable, mode embedding.BagMode, opts EmbeddingOptions) *EmbeddingBag {
	return &EmbeddingBag{Table: t, Mode: mode, EmbeddingOptions: opts}
}

// Forward pools bags of ids into float32 [B, Dim]: ids int64 [N] with offsets int64 [B] (bag i
// holds ids[offsets[i]:offsets[i+1]], the last one runs to N), or ids [B, L] (B bags of L ids)
// with nil offsets. Empty bags give zero rows.
func (b *EmbeddingBag) Forward(ids, offsets *Tensor) *Tensor {
	return b.ForwardWeighted(ids, offsets, nil)
}

// ForwardWeighted is Forward with per-sample weights (float32, shaped like ids; Sum mode only):
// each row is scaled by its weight before the sum. weights may be nil.
func (b *EmbeddingBag) ForwardWeighted(ids, offsets, weights *Tensor) *Tensor {
	out, err := b.Table.ForwardBag(ids, offsets, weights, b.Mode, b.forward(b.Training()))
	if err != nil {
		panic(tensorError("embedding bag forward", err))
	}
	b.guard.check("embedding bag forward", b.Table, b.Fused, out)
	return out
}

// ForwardLengths is ForwardWeighted with the bags given by their lengths (int64 [B], adding up
// to N), turned into bounds on the C side (Sum and Mean; Table an *embedding.Table). weights
// may be nil.
func (b *EmbeddingBag) ForwardLengths(ids, lengths, weights *Tensor) *Tensor {
	const op = "embedding bag forward"
	t, ok := b.Table.(*embedding.Table)
	if !ok {
		panic(&cgotorch.Error{Op: op, Kind: cgotorch.ErrInvalidArgument, Msg: "ForwardLengths needs an *embedding.Table"})
	}
	f := embedding.BagFeature{Table: t, Mode: b.Mode, Options: b.forward(b.Training())}
	out, err := embedding.ForwardBags([]embedding.BagFeature{f}, 1, ids, lengths, weights, embedding.Lengths)
	if err != nil {
		panic(tensorError(op, err))
	}
	b.guard.check(op, b.Table, b.Fused, out)
	return out
}

// Parameters returns nil: the rows live in the table, which its Steppers update.
func (b *EmbeddingBag) Parameters() []NamedParameter { return nil }

// ZeroGrad drops the table's pending gradients (idempotent).
func (b *EmbeddingBag) ZeroGrad() { zeroTable("embedding bag zero grad", b.Table) }

// Step applies one step of the table's optimizer from the pending gradients (nothing when none
// are pending).
func (b *EmbeddingBag) Step() error { return b.Table.Step() }

// LR is the table's learning rate.
func (b *EmbeddingBag) LR() float64 { return b.Table.LR() }

// SetLR sets the table's learning rate (embedding.Table.SetLR).
func (b *EmbeddingBag) SetLR(lr float64) error { return b.Table.SetLR(lr) }

// Steppers returns the EmbeddingBag itself.
func (b *EmbeddingBag) Steppers() []Stepper { return []Stepper{b} }

var (
	_ Module       = (*EmbeddingBag)(nil)
	_ SparseModule = (*EmbeddingBag)(nil)
	_ Stepper      = (*EmbeddingBag)(nil)
)
