package nn

import (
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// EmbeddingBagFeature is one feature of an EmbeddingBagCollection: its name (its key in the
// input), the table its bags pool from (several features may share one) and the pooling (Sum or
// Mean). The tables of a collection are all *embedding.Table, or all JointLookupTables of one
// StepGroup (the sharded tables of one group: dist.ShardedTable).
type EmbeddingBagFeature struct {
	Name  string
	Table EmbeddingTable
	Mode  embedding.BagMode
}

// EmbeddingBagCollection is TorchRec's EmbeddingBagCollection over dynamic hash embedding
// tables, fused in the manner of FBGEMM's table-batched embedding bags: Forward looks up and
// pools every feature's bags in one C call, and Step and ZeroGrad reach every table in one call
// each. Its numbers and gradients are those of one EmbeddingBag per feature (with the same
// options), and so is everything else: training and evaluation mode, Fused, padding, MaxNorm,
// the bound on pending gradients, the error policy.
//
// Over sharded tables (JointLookupTable), as TorchRec's sharded collection, Forward fetches the
// rows of every feature in one exchange of ids and one of rows (JointLookupTable.ForwardBags),
// and Step sends every table's gradients in one exchange (JointTable.StepTables): the same
// model code trains on local or sharded tables. Forward is then collective, and so is its
// refusal of bad input: the refusing rank still takes part in the exchange (with its error as
// its verdict), so that every rank's Forward panics (the others' with ErrMismatch), no table
// changes, and the ranks stay in step for the next call.
type EmbeddingBagCollection struct {
	Base
	EmbeddingOptions
	collectionTables
	features []EmbeddingBagFeature
	guard    lookupGuard
}

// NewEmbeddingBagCollection returns a collection of features (names distinct and not empty,
// tables not nil and all local or all joint, modes Sum or Mean), in training mode.
func NewEmbeddingBagCollection(features []EmbeddingBagFeature, opts EmbeddingOptions) (*EmbeddingBagCollection, error) {
	if len(features) == 0 {
		return nil, fmt.Errorf("%w: an embedding bag collection needs a feature", cgotorch.ErrInvalidArgument)
	}
	c := &EmbeddingBagCollection{EmbeddingOptions: opts, features: slices.Clone(features)}
	for _, f := range features {
		if f.Mode != embedding.Sum && f.Mode != embedding.Mean {
			return nil, fmt.Errorf("%w: feature %q: mode %v (a collection pools by sum or mean)", cgotorch.ErrInvalidArgument, f.Name, f.Mode)
		}
		if err := c.add(f.Name, f.Table); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Features returns the collection's features, in the order of its output's columns.
func (c *EmbeddingBagCollection) Features() []EmbeddingBagFeature { return slices.Clone(c.features) }

// Forward pools every feature's bags into float32 [B, sum of the features' dims], feature i's
// columns after feature i-1's (Split cuts them apart). in must hold a key for every feature (in
// any order; keys of no feature are ignored).
func (c *EmbeddingBagCollection) Forward(in KeyedJagged) *Tensor {
	const op = "embedding bag collection forward"
	fo := c.forward(c.Training())
	bounds, kind, err := in.Bounds()
	var segs []int
	if err == nil {
		segs, err = c.segments(in)
	}
	if err != nil {
		panic(tensorError(op, c.refuse(fo, err)))
	}
	var out *Tensor
	if c.joint != nil {
		fs := make([]JointBag, len(c.features))
		for i, f := range c.features {
			fs[i] = JointBag{Table: f.Table, Mode: f.Mode, Segment: segs[i]}
		}
		out, err = c.joint.ForwardBags(fs, len(in.Keys), in.Values, bounds, in.Weights, kind, fo)
	} else {
		fs := make([]embedding.BagFeature, len(c.features))
		for i, f := range c.features {
			fs[i] = embedding.BagFeature{Table: f.Table.(*embedding.Table), Mode: f.Mode, Options: fo, Segment: segs[i]}
		}
		out, err = embedding.ForwardBags(fs, len(in.Keys), in.Values, bounds, in.Weights, kind)
	}
	if err != nil {
		panic(tensorError(op, err))
	}
	c.guard.check(op, c.tables[0], c.Fused, out)
	return out
}

// TableIDs is Collection.TableIDs.
func (c *EmbeddingBagCollection) TableIDs(in KeyedJagged) ([]EmbeddingTable, [][]int64, error) {
	return c.tableIDs(in, c.EmbeddingOptions)
}

// Split cuts Forward's output into one [B, dim] view per feature (Tensor.Split: the backward
// pass joins their gradients in one concatenation).
func (c *EmbeddingBagCollection) Split(out *Tensor) []*Tensor { return out.Split(c.dims, 1) }

// Parameters returns nil: the rows live in the tables, which its Steppers update.
func (c *EmbeddingBagCollection) Parameters() []NamedParameter { return nil }

// Steppers returns the collection itself.
func (c *EmbeddingBagCollection) Steppers() []Stepper { return []Stepper{c} }

var (
	_ Module       = (*EmbeddingBagCollection)(nil)
	_ Collection   = (*EmbeddingBagCollection)(nil)
	_ TableModule  = (*EmbeddingBagCollection)(nil)
	_ SparseModule = (*EmbeddingBagCollection)(nil)
	_ Stepper      = (*EmbeddingBagCollection)(nil)
)
