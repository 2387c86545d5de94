package nn

import (
	"slices"

	"github.com/gorec/gorec/embedding"
)

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
// one exchange, instead of one per table. Optimizer.Step steps the tables of its Embeddings,
// EmbeddingBags and EmbeddingBagCollections that are JointTables with the same StepGroup in
// one StepTables call (each table once), where it would have called the first one's Step.
type JointTable interface {
	EmbeddingTable
	// StepGroup says which tables step together: those returning the same key.
	StepGroup() any
	// StepTables steps tables (of this table's group), as Step of each would.
	StepTables(tables []EmbeddingTable) error
}

// JointLookupTable is a JointTable that looks up the features of a collection, whose tables are
// of its StepGroup, in one call: an EmbeddingBagCollection over such tables calls ForwardBags of
// its first feature's table instead of embedding.ForwardBags, and an EmbeddingCollection calls
// ForwardEach (dist.ShardedTable fetches the rows of every feature in one exchange of ids and
// one of rows).
type JointLookupTable interface {
	JointTable
	Config() embedding.Config
	// ForwardBags is embedding.ForwardBags of features over these tables, every feature with
	// opts: the bags of segments segments of B bags each in ids, delimited by bounds as kind
	// says, with per-sample weights (may be nil).
	ForwardBags(features []JointBag, segments int, ids, bounds, weights *Tensor, kind embedding.BagBounds, opts embedding.ForwardOptions) (*Tensor, error)
	// ForwardEach is Forward of ids[i] on tables[i] (these tables), for every i, with opts.
	ForwardEach(tables []EmbeddingTable, ids []*Tensor, opts embedding.ForwardOptions) ([]*Tensor, error)
	// RefuseLookup is this rank's part, refusing its input with err (not nil), in the lookup
	// that ForwardBags or ForwardEach over tables (these tables, in the order of the
	// features) with opts runs on the other ranks: a collection calls it for an input it
	// cannot even cut into features (a missing key, bad bounds), so that every rank's call
	// fails together and no table changes. It returns err, joined with the exchange's error.
	RefuseLookup(tables []EmbeddingTable, opts embedding.ForwardOptions, err error) error
}

// JointBag is one feature of JointLookupTable.ForwardBags: the bags of input segment Segment,
// pooled by Mode (Sum or Mean) from Table.
type JointBag struct {
	Table   EmbeddingTable
	Mode    embedding.BagMode
	Segment int
}

// lookupTable is the table of an Embedding or EmbeddingBag (nil for anything else).
func lookupTable(m any) EmbeddingTable {
	switch e := m.(type) {
	case *Embedding:
		return e.Table
	case *EmbeddingBag:
		return e.Table
	}
	return nil
}

// LookupTables returns the tables module (or Stepper) m looks up: an Embedding's or
// EmbeddingBag's table, a collection's distinct tables (EmbeddingBagCollection,
// EmbeddingCollection); nil for anything else. Package dist finds a model's sharded tables with
// it.
func LookupTables(m any) []EmbeddingTable {
	if c := collectionOf(m); c != nil {
		return slices.Clone(c.tables)
	}
	if t := lookupTable(m); t != nil {
		return []EmbeddingTable{t}
	}
	return nil
}

// collectionOf is the tables of an EmbeddingBagCollection or EmbeddingCollection (nil for
// anything else).
func collectionOf(m any) *collectionTables {
	if c, ok := m.(interface{ core() *collectionTables }); ok {
		return c.core()
	}
	return nil
}
