package nn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// KeyedJagged is the input of an EmbeddingBagCollection, TorchRec's KeyedJaggedTensor: for each
// key (a feature's name), B bags of ids. Values (int64 [N]) holds every key's ids, key after
// key; Lengths (int64 [len(Keys)*B], key-major) gives the bags' lengths, or Offsets (int64
// [len(Keys)*B+1], from 0 to N) their bounds; Weights (per-sample weights, float32 [N]) may be
// nil.
type KeyedJagged struct {
	Keys    []string
	Values  *Tensor
	Lengths *Tensor
	Offsets *Tensor
	Weights *Tensor
}

// Bounds returns the bags' bounds, Lengths or Offsets (with its last offset), and their form;
// an error when both or neither are given.
func (in KeyedJagged) Bounds() (*Tensor, embedding.BagBounds, error) {
	switch {
	case in.Lengths != nil && in.Offsets != nil, in.Lengths == nil && in.Offsets == nil:
		return nil, 0, errors.New("give either Lengths or Offsets")
	case in.Offsets != nil:
		return in.Offsets, embedding.OffsetsIncludeLast, nil
	}
	return in.Lengths, embedding.Lengths, nil
}

// EmbeddingBagFeature is one feature of an EmbeddingBagCollection: its name (its key in the
// input), the table its bags pool from (several features may share one) and the pooling (Sum or
// Mean). The tables of a collection are all *embedding.Table, or all JointBagTables of one
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
// Over sharded tables (JointBagTable), as TorchRec's sharded collection, Forward fetches the
// rows of every feature in one exchange of ids and one of rows (JointBagTable.ForwardBags), and
// Step sends every table's gradients in one exchange (JointTable.StepTables): the same model
// code trains on local or sharded tables.
type EmbeddingBagCollection struct {
	Base
	EmbeddingOptions
	features []EmbeddingBagFeature
	tables   []EmbeddingTable   // distinct, in the order of first use
	local    []*embedding.Table // the tables, when they are local
	joint    JointBagTable      // the first table, when they are JointBagTables
	dims     []int64
	guard    lookupGuard
}

// NewEmbeddingBagCollection returns a collection of features (names distinct and not empty,
// tables not nil and all local or all joint, modes Sum or Mean), in training mode.
func NewEmbeddingBagCollection(features []EmbeddingBagFeature, opts EmbeddingOptions) (*EmbeddingBagCollection, error) {
	if len(features) == 0 {
		return nil, fmt.Errorf("%w: an embedding bag collection needs a feature", cgotorch.ErrInvalidArgument)
	}
	c := &EmbeddingBagCollection{EmbeddingOptions: opts, features: slices.Clone(features)}
	c.joint, _ = features[0].Table.(JointBagTable)
	for i, f := range features {
		switch {
		case f.Name == "" || slices.ContainsFunc(features[:i], func(g EmbeddingBagFeature) bool { return g.Name == f.Name }):
			return nil, fmt.Errorf("%w: feature %d: name %q empty or taken", cgotorch.ErrInvalidArgument, i, f.Name)
		case f.Table == nil:
			return nil, fmt.Errorf("%w: feature %q has no table", cgotorch.ErrInvalidArgument, f.Name)
		case f.Mode != embedding.Sum && f.Mode != embedding.Mean:
			return nil, fmt.Errorf("%w: feature %q: mode %v (a collection pools by sum or mean)", cgotorch.ErrInvalidArgument, f.Name, f.Mode)
		}
		dim, err := c.add(f.Table)
		if err != nil {
			return nil, fmt.Errorf("%w: feature %q: %v", cgotorch.ErrInvalidArgument, f.Name, err)
		}
		c.dims = append(c.dims, int64(dim))
	}
	return c, nil
}

// add adds t to the collection's tables, unless there already, and returns its Dim.
func (c *EmbeddingBagCollection) add(t EmbeddingTable) (int, error) {
	var dim int
	switch lt := t.(type) {
	case *embedding.Table:
		if c.joint != nil {
			return 0, fmt.Errorf("table %q is local, and the first feature's is %T", t.Name(), c.joint)
		}
		if !slices.Contains(c.local, lt) {
			c.local = append(c.local, lt)
		}
		dim = lt.Config().Dim
	case JointBagTable:
		if c.joint == nil || lt.StepGroup() != c.joint.StepGroup() {
			return 0, fmt.Errorf("table %q (%T) is not of the first feature's table's kind or group", t.Name(), t)
		}
		dim = lt.Config().Dim
	default:
		return 0, fmt.Errorf("table %q (%T) is neither an *embedding.Table nor a JointBagTable", t.Name(), t)
	}
	if !slices.Contains(c.tables, t) {
		c.tables = append(c.tables, t)
	}
	return dim, nil
}

// Features returns the collection's features, in the order of its output's columns.
func (c *EmbeddingBagCollection) Features() []EmbeddingBagFeature { return slices.Clone(c.features) }

// Forward pools every feature's bags into float32 [B, sum of the features' dims], feature i's
// columns after feature i-1's (Split cuts them apart). in must hold a key for every feature (in
// any order; keys of no feature are ignored).
func (c *EmbeddingBagCollection) Forward(in KeyedJagged) *Tensor {
	const op = "embedding bag collection forward"
	bounds, kind, err := in.Bounds()
	if err != nil {
		panic(&cgotorch.Error{Op: op, Kind: cgotorch.ErrInvalidArgument, Msg: err.Error()})
	}
	fo := c.forward(c.Training())
	segs := make([]int, len(c.features))
	for i, f := range c.features {
		if segs[i] = slices.Index(in.Keys, f.Name); segs[i] < 0 {
			panic(&cgotorch.Error{Op: op, Kind: cgotorch.ErrInvalidArgument, Msg: fmt.Sprintf("the input has no key %q", f.Name)})
		}
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

// Split cuts Forward's output into one [B, dim] view per feature (Tensor.Split: the backward
// pass joins their gradients in one concatenation).
func (c *EmbeddingBagCollection) Split(out *Tensor) []*Tensor { return out.Split(c.dims, 1) }

// Parameters returns nil: the rows live in the tables, which its Steppers update.
func (c *EmbeddingBagCollection) Parameters() []NamedParameter { return nil }

// ZeroGrad drops the tables' pending gradients, in one call (idempotent).
func (c *EmbeddingBagCollection) ZeroGrad() {
	if c.joint != nil {
		for _, t := range c.tables {
			zeroTable("embedding bag collection zero grad", t)
		}
		return
	}
	if err := embedding.ZeroGradAll(c.local); err != nil && !errors.Is(err, embedding.ErrClosed) {
		panic(tensorError("embedding bag collection zero grad", err))
	}
}

// Step applies one step of each table's optimizer from its pending gradients, in one call
// (nothing for a table without any); every table steps, and the first failure is returned.
func (c *EmbeddingBagCollection) Step() error {
	if c.joint != nil {
		return c.joint.StepTables(c.tables)
	}
	return embedding.StepAll(c.local)
}

// LR is the learning rate of the first feature's table.
func (c *EmbeddingBagCollection) LR() float64 { return c.tables[0].LR() }

// SetLR sets the learning rate of every table (embedding.Table.SetLR); on an error the tables
// before the failing one have the new rate.
func (c *EmbeddingBagCollection) SetLR(lr float64) error {
	for _, t := range c.tables {
		if err := t.SetLR(lr); err != nil {
			return err
		}
	}
	return nil
}

// Steppers returns the collection itself.
func (c *EmbeddingBagCollection) Steppers() []Stepper { return []Stepper{c} }

var (
	_ Module       = (*EmbeddingBagCollection)(nil)
	_ SparseModule = (*EmbeddingBagCollection)(nil)
	_ Stepper      = (*EmbeddingBagCollection)(nil)
)
