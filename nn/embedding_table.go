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

// JointTable is an EmbeddingTable that steps best together with other tables: the sharded
// tables of one process group (dist.ShardedTable) send all their gradients to their owners in
// one exchange, instead of one per table. Optimizer.Step steps the tables of its Embeddings
// and EmbeddingBags that are JointTables with the same StepGroup in one StepTables call (each
// table once), where it would have called the first one's Step.
type JointTable interface {
	EmbeddingTable
	// StepGroup says which tables step together: those returning the same key.
	StepGroup() any
	// StepTables steps tables (of this table's group), as Step of each would.
	StepTables(tables []EmbeddingTable) error
}
