package nn

import "github.com/gorec/gorec/embedding"

// EmbeddingTable is what Embedding and EmbeddingBag look their rows up in and step: an
// *embedding.Table, or a table sharded across processes (dist.ShardedTable), whose rows the
// same model code then trains with no change.
type EmbeddingTable interface {
	Name() string
	Forward(ids *Tensor, opts embedding.ForwardOptions) (*Tensor, error)
	ForwardBag(ids, offsets, weights *Tensor, mode embedding.BagMode, opts embedding.ForwardOptions) (*Tensor, error)
	Step() error
	ZeroGrad() error
	LR() float64
	SetLR(lr float64) error
	Stats() (embedding.Stats, error)
}

var _ EmbeddingTable = (*embedding.Table)(nil)
