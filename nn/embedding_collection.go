package nn

import (
	"fmt"

	"github.com/gorec/gorec/cgotorch"
)

// EmbeddingFeature is one feature of an EmbeddingCollection: its name (its key in the input) and
// the table its ids are looked up in (several features may share one). The tables of a
// collection are all *embedding.Table, or all JointLookupTables of one StepGroup (the sharded
// tables of one group: dist.ShardedTable).
type EmbeddingFeature struct {
	Name  string
	Table EmbeddingTable
}

// EmbeddingCollection is TorchRec's EmbeddingCollection over dynamic hash embedding tables:
// several features' ids (sequences: a KeyedJagged input, whose lengths say where each
// sequence ends) looked up without pooling, each in its table. Its numbers and gradients are
// those of one Embedding per feature (with the same options), and so is everything else:
// training and evaluation mode, Fused, padding, MaxNorm, the bound on pending gradients, the
// error policy. Step and ZeroGrad reach every table in one call each.
//
// Over sharded tables (JointLookupTable) Forward fetches the rows of every feature in one
// exchange of ids and one of rows (JointLookupTable.ForwardEach), and Step sends every table's
// gradients in one exchange, where an Embedding per feature would exchange twice per feature.
// Forward is then collective, and so is its refusal of bad input: the refusing rank still
// takes part in the exchange (with its error as its verdict), so that every rank's Forward
// panics (the others' with ErrMismatch), no table changes, and the ranks stay in step.
type EmbeddingCollection struct {
	Base
	EmbeddingOptions
	collectionTables
	guard lookupGuard
}

// NewEmbeddingCollection returns a collection of features (names distinct and not empty, tables
// not nil and all local or all joint), in training mode.
func NewEmbeddingCollection(features []EmbeddingFeature, opts EmbeddingOptions) (*EmbeddingCollection, error) {
	if len(features) == 0 {
		return nil, fmt.Errorf("%w: an embedding collection needs a feature", cgotorch.ErrInvalidArgument)
	}
	c := &EmbeddingCollection{EmbeddingOptions: opts}
	for _, f := range features {
		if err := c.add(f.Name, f.Table); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Features returns the collection's features, in the order of Forward's results.
func (c *EmbeddingCollection) Features() []EmbeddingFeature {
	out := make([]EmbeddingFeature, len(c.names))
	for i, name := range c.names {
		out[i] = EmbeddingFeature{Name: name, Table: c.of[i]}
	}
	return out
}

// Forward returns, for each feature, the rows of its ids in in as float32 [N_f, Dim], in their
// order in in.Values (TorchRec's JaggedTensor values: in's lengths or offsets of the feature's
// key delimit its sequences). in must hold a key for every feature (in any order; keys of no
// feature are ignored) and no weights.
func (c *EmbeddingCollection) Forward(in KeyedJagged) []*Tensor {
	const op = "embedding collection forward"
	fo := c.forward(c.Training())
	ids, err := c.featureIDs(in)
	if err != nil {
		panic(tensorError(op, c.refuse(fo, err)))
	}
	var outs []*Tensor
	if c.joint != nil {
		outs, err = c.joint.ForwardEach(c.of, ids, fo)
	} else {
		outs = make([]*Tensor, len(ids))
		for i, t := range c.of {
			if outs[i], err = t.Forward(ids[i], fo); err != nil {
				break
			}
		}
	}
	if err != nil {
		panic(tensorError(op, err))
	}
	c.guard.check(op, c.tables[0], c.Fused, outs[0])
	return outs
}

// featureIDs returns, for each feature, its ids in in: views of in.Values.
func (c *EmbeddingCollection) featureIDs(in KeyedJagged) ([]*Tensor, error) {
	segs, err := c.segments(in)
	var spans [][2]int64
	if err == nil {
		spans, err = in.Spans()
	}
	if err == nil {
		err = unpooled(in)
	}
	if err != nil {
		return nil, err
	}
	ids := make([]*Tensor, len(c.names))
	for i, seg := range segs {
		ids[i] = in.Values.Narrow(0, spans[seg][0], spans[seg][1]-spans[seg][0])
	}
	return ids, nil
}

// TableIDs is Collection.TableIDs; it refuses what Forward refuses before any lookup.
func (c *EmbeddingCollection) TableIDs(in KeyedJagged) ([]EmbeddingTable, [][]int64, error) {
	tables, ids, err := c.tableIDs(in, c.EmbeddingOptions)
	if err == nil {
		err = unpooled(in)
	}
	if err != nil {
		return nil, nil, err
	}
	return tables, ids, nil
}

// unpooled checks what an EmbeddingCollection asks of in (open values, as Spans checks): no
// weights, and values of one dimension (its features' ids are cut from them).
func unpooled(in KeyedJagged) error {
	if in.Weights != nil {
		return fmt.Errorf("%w: an embedding collection takes no weights", cgotorch.ErrInvalidArgument)
	}
	if sh := in.Values.Shape(); len(sh) != 1 {
		return fmt.Errorf("%w: values of shape %v, want [N]", cgotorch.ErrInvalidArgument, sh)
	}
	return nil
}

// Parameters returns nil: the rows live in the tables, which its Steppers update.
func (c *EmbeddingCollection) Parameters() []NamedParameter { return nil }

// Steppers returns the collection itself.
func (c *EmbeddingCollection) Steppers() []Stepper { return []Stepper{c} }

var (
	_ Module      = (*EmbeddingCollection)(nil)
	_ Collection  = (*EmbeddingCollection)(nil)
	_ TableModule = (*EmbeddingCollection)(nil)
	_ Stepper     = (*EmbeddingCollection)(nil)
)
