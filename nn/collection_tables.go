package nn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// KeyedJagged is the input of an EmbeddingBagCollection and an EmbeddingCollection, TorchRec's
// KeyedJaggedTensor: for each key (a feature's name), B bags (sequences) of ids. Values (int64
// [N]) holds every key's ids, key after key; Lengths (int64 [len(Keys)*B], key-major) gives the
// bags' lengths, or Offsets (int64 [len(Keys)*B+1], from 0 to N) their bounds; Weights
// (per-sample weights, float32 [N]) may be nil.
type KeyedJagged struct {
	Keys    []string
	Values  *Tensor
	Lengths *Tensor
	Offsets *Tensor
	Weights *Tensor
}

// Bounds returns the bags' bounds, Lengths or Offsets (with its last offset), and their form;
// ErrInvalidArgument when both or neither are given.
func (in KeyedJagged) Bounds() (*Tensor, embedding.BagBounds, error) {
	switch {
	case in.Lengths != nil && in.Offsets != nil, in.Lengths == nil && in.Offsets == nil:
		return nil, 0, fmt.Errorf("%w: give either Lengths or Offsets", cgotorch.ErrInvalidArgument)
	case in.Offsets != nil:
		return in.Offsets, embedding.OffsetsIncludeLast, nil
	}
	return in.Lengths, embedding.Lengths, nil
}

// Spans returns where each key's ids lie in Values ([start, end), in the order of Keys).
func (in KeyedJagged) Spans() ([][2]int64, error) {
	bounds, kind, err := in.Bounds()
	if err != nil {
		return nil, err
	}
	if in.Values.Closed() {
		return nil, fmt.Errorf("%w: no values (nil or closed)", cgotorch.ErrInvalidArgument)
	}
	b, err := cgotorch.ToSlice[int64](bounds)
	if err != nil {
		return nil, err
	}
	return embedding.SegmentSpans(in.Values.Numel(), b, kind, len(in.Keys))
}

// Collection is what an EmbeddingBagCollection and an EmbeddingCollection share for training
// across processes: the tables a batch looks up, and the ids it looks up in each.
type Collection interface {
	SparseModule
	// TableIDs returns the collection's distinct tables, in the order its Forward looks them
	// up, and for each the ids of in that its features look up there (with repeats; without
	// the padding id).
	TableIDs(in KeyedJagged) ([]EmbeddingTable, [][]int64, error)
}

// collectionTables are a collection's features and tables: all *embedding.Table, or all
// JointLookupTables of one StepGroup.
type collectionTables struct {
	names  []string           // the features' names: their keys in the input
	of     []EmbeddingTable   // the features' tables
	dims   []int64            // the features' dims
	tables []EmbeddingTable   // distinct, in the order of first use
	local  []*embedding.Table // the tables, when they are local
	joint  JointLookupTable   // the first table, when they are JointLookupTables
}

func (c *collectionTables) core() *collectionTables { return c }

// add adds a feature of table t.
func (c *collectionTables) add(name string, t EmbeddingTable) error {
	if name == "" || slices.Contains(c.names, name) {
		return fmt.Errorf("%w: feature %d: name %q empty or taken", cgotorch.ErrInvalidArgument, len(c.names), name)
	}
	if t == nil {
		return fmt.Errorf("%w: feature %q has no table", cgotorch.ErrInvalidArgument, name)
	}
	if len(c.names) == 0 {
		c.joint, _ = t.(JointLookupTable)
	}
	var cfg embedding.Config
	switch lt := t.(type) {
	case *embedding.Table:
		if c.joint != nil {
			return fmt.Errorf("%w: feature %q: table %q is local, and the first feature's is %T", cgotorch.ErrInvalidArgument, name, t.Name(), c.joint)
		}
		if !slices.Contains(c.local, lt) {
			c.local = append(c.local, lt)
		}
		cfg = lt.Config()
	case JointLookupTable:
		if c.joint == nil || lt.StepGroup() != c.joint.StepGroup() {
			return fmt.Errorf("%w: feature %q: table %q (%T) is not of the first feature's table's kind or group", cgotorch.ErrInvalidArgument, name, t.Name(), t)
		}
		cfg = lt.Config()
	default:
		return fmt.Errorf("%w: feature %q: table %q (%T) is neither an *embedding.Table nor a JointLookupTable", cgotorch.ErrInvalidArgument, name, t.Name(), t)
	}
	if !slices.Contains(c.tables, t) {
		c.tables = append(c.tables, t)
	}
	c.names, c.of, c.dims = append(c.names, name), append(c.of, t), append(c.dims, int64(cfg.Dim))
	return nil
}

// segments returns the segment of in (its index in in.Keys) of each feature.
func (c *collectionTables) segments(in KeyedJagged) ([]int, error) {
	segs := make([]int, len(c.names))
	for i, name := range c.names {
		if segs[i] = slices.Index(in.Keys, name); segs[i] < 0 {
			return nil, fmt.Errorf("%w: the input has no key %q", cgotorch.ErrInvalidArgument, name)
		}
	}
	return segs, nil
}

// refuse is the error of a Forward that refuses its input (err) before any lookup: err itself
// over local tables; over joint ones, after taking this rank's part, refusing, in the exchange
// the other ranks' Forward runs (JointLookupTable.RefuseLookup), so that every rank fails.
func (c *collectionTables) refuse(o embedding.ForwardOptions, err error) error {
	if c.joint == nil {
		return err
	}
	return c.joint.RefuseLookup(c.of, o, err)
}

// tableIDs is Collection.TableIDs, padding's id left out.
func (c *collectionTables) tableIDs(in KeyedJagged, padding EmbeddingOptions) ([]EmbeddingTable, [][]int64, error) {
	segs, err := c.segments(in)
	if err != nil {
		return nil, nil, err
	}
	spans, err := in.Spans()
	if err != nil {
		return nil, nil, err
	}
	v, err := cgotorch.ToSlice[int64](in.Values)
	if err != nil {
		return nil, nil, err
	}
	ids := make([][]int64, len(c.tables))
	for i, t := range c.of {
		k := slices.Index(c.tables, t)
		for _, id := range v[spans[segs[i]][0]:spans[segs[i]][1]] {
			if !padding.Padding || id != padding.PaddingID {
				ids[k] = append(ids[k], id)
			}
		}
	}
	return slices.Clone(c.tables), ids, nil
}

// ZeroGrad drops the tables' pending gradients, in one call for local tables (idempotent).
func (c *collectionTables) ZeroGrad() {
	const op = "collection zero grad"
	if c.joint != nil {
		for _, t := range c.tables {
			zeroTable(op, t)
		}
		return
	}
	if err := embedding.ZeroGradAll(c.local); err != nil && !errors.Is(err, embedding.ErrClosed) {
		panic(tensorError(op, err))
	}
}

// Step applies one step of each table's optimizer from its pending gradients, in one call
// (nothing for a table without any); every table steps, and the first failure is returned.
func (c *collectionTables) Step() error {
	if c.joint != nil {
		return c.joint.StepTables(c.tables)
	}
	return embedding.StepAll(c.local)
}

// LR is the learning rate of the first feature's table.
func (c *collectionTables) LR() float64 { return c.tables[0].LR() }

// SetLR sets the learning rate of every table (embedding.Table.SetLR); on an error the tables
// before the failing one have the new rate.
func (c *collectionTables) SetLR(lr float64) error {
	for _, t := range c.tables {
		if err := t.SetLR(lr); err != nil {
			return err
		}
	}
	return nil
}

// Tables returns the collection's tables when they are *embedding.Table (each once, in the
// order of first use): a model checkpoint holds them (TableModule).
func (c *collectionTables) Tables() []*embedding.Table { return slices.Clone(c.local) }
