package dist

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// ForwardBags is embedding.ForwardBags on sharded tables (collective): the bags of several
// features, each from its table (sharded tables of s's group; a table may serve several), pooled
// on this rank from rows fetched in one exchange of ids and one of rows for all the tables,
// instead of two per feature. An nn.EmbeddingBagCollection over sharded tables calls it
// (nn.JointBagTable). Each feature's numbers and gradients are those of ForwardBag of its
// segment, and so are training and inference: see Forward. Fused and a MaxNorm in training are
// refused (ErrBadInput).
func (s *ShardedTable) ForwardBags(features []nn.JointBag, segments int, ids, bounds, weights *cgotorch.Tensor, kind embedding.BagBounds, o embedding.ForwardOptions) (*cgotorch.Tensor, error) {
	const op = "forward bags"
	tables, err := bagTables(op, s.g, features)
	if err != nil {
		return nil, err
	}
	pool := func(local func(*ShardedTable) *embedding.Table, o embedding.ForwardOptions) (*cgotorch.Tensor, error) {
		fs := make([]embedding.BagFeature, len(features))
		for i, f := range features {
			fs[i] = embedding.BagFeature{Table: local(f.Table.(*ShardedTable)), Mode: f.Mode, Options: o, Segment: f.Segment}
		}
		return embedding.ForwardBags(fs, segments, ids, bounds, weights, kind)
	}
	// the input is checked by the pooling of every table's empty view (checkForward's dry run)
	v, err := s.checkForward(op, ids, o, func(_ *embedding.Table, dry embedding.ForwardOptions) (*cgotorch.Tensor, error) {
		return pool(func(t *ShardedTable) *embedding.Table { return t.view }, dry)
	})
	var us [][]int64 // by table, its distinct ids
	if err == nil {
		if us, err = bagIDs(v, bounds, kind, segments, features, tables); err != nil {
			err = s.badInput(op, "%v", err)
		}
		for k := range us {
			us[k] = uniqueIDs(us[k], o.Padding, o.PaddingID)
		}
	}
	if tables[0].pipe != nil { // in a TrainPipeline's step: the rows are here already
		if err == nil {
			err = useFetched(op, tables, us, o.Train)
		}
		if err != nil {
			return nil, err
		}
		return pool(func(t *ShardedTable) *embedding.Table { return t.cache }, o)
	}
	if err := fetchInto(op, tables, us, err, o.Train); err != nil {
		return nil, err
	}
	if o.Train {
		return pool(func(t *ShardedTable) *embedding.Table { return t.cache }, o)
	}
	defer func() {
		for _, t := range tables {
			t.view.Clear()
		}
	}()
	return pool(func(t *ShardedTable) *embedding.Table { return t.view }, o)
}

// bagTables returns the distinct tables of features, in the order of first use: sharded tables
// of g.
func bagTables(op string, g *Group, features []nn.JointBag) ([]*ShardedTable, error) {
	var out []*ShardedTable
	for _, f := range features {
		t, ok := f.Table.(*ShardedTable)
		if !ok || t.g != g {
			return nil, &Error{Op: op, Kind: ErrInvalidArgument, Err: fmt.Errorf("table %T is not a sharded table of this group", f.Table)}
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, &Error{Op: op, Kind: ErrInvalidArgument, Err: errors.New("no feature")}
	}
	return out, nil
}

// BagPrefetches lists the lookups that c.Forward(in) runs on its sharded tables, in its order,
// for TrainStep and TrainPipeline: one per table, of the ids of every feature that pools from it
// (c's padding id left out). The IDs tensors are the caller's.
func BagPrefetches(c *nn.EmbeddingBagCollection, in nn.KeyedJagged) ([]Prefetch, error) {
	const op = "bag prefetches"
	bad := func(format string, args ...any) error {
		return &Error{Op: op, Kind: ErrInvalidArgument, Err: fmt.Errorf(format, args...)}
	}
	if c == nil {
		return nil, bad("nil collection")
	}
	bounds, kind, err := in.Bounds()
	if err != nil {
		return nil, bad("%v", err)
	}
	fs := c.Features()
	features := make([]nn.JointBag, len(fs))
	for i, f := range fs {
		features[i] = nn.JointBag{Table: f.Table, Mode: f.Mode, Segment: slices.Index(in.Keys, f.Name)}
		if features[i].Segment < 0 {
			return nil, bad("the input has no key %q", f.Name)
		}
	}
	first, _ := fs[0].Table.(*ShardedTable)
	if first == nil {
		return nil, bad("table %q (%T) is not a sharded table", fs[0].Table.Name(), fs[0].Table)
	}
	tables, err := bagTables(op, first.g, features)
	if err != nil {
		return nil, err
	}
	v, err := first.idsOf(op, in.Values)
	if err != nil {
		return nil, err
	}
	ids, err := bagIDs(v, bounds, kind, len(in.Keys), features, tables)
	if err != nil {
		return nil, bad("%v", err)
	}
	out := make([]Prefetch, len(tables))
	for k, t := range tables {
		it, err := cgotorch.FromSlice(ids[k])
		if err != nil {
			for _, p := range out[:k] {
				p.IDs.Close()
			}
			return nil, err
		}
		out[k] = Prefetch{Table: t, IDs: it, Padding: c.Padding, PaddingID: c.PaddingID}
	}
	return out, nil
}

// fetchInto fetches the rows of ids[k] (distinct) of each of tables from their owners, in one
// exchange of ids and one of rows, into the table's cache (train: the owners insert absent
// ids) or its view (inference: they read them). local is this rank's verdict on its input.
func fetchInto(op string, tables []*ShardedTable, ids [][]int64, local error, train bool) error {
	parts := make([]part, len(tables))
	for k, t := range tables {
		parts[k] = part{t: t}
		if ids != nil {
			parts[k].ids = ids[k]
		}
	}
	parts[0].local = local
	_, rows, _, err := fetchParts(op, parts, train, make([][]int64, len(parts)))
	if err != nil {
		return err
	}
	defer closeAll(rows)
	for k, t := range tables {
		into := t.cache
		if !train {
			into = t.view
		}
		if err := t.onShard(ids[k], rows[k], into.Write); err != nil {
			return err
		}
	}
	return nil
}

// useFetched puts the rows a TrainPipeline fetched for tables (ids[k]: the distinct ids of
// table k's lookup) into their caches; every table must be in the pipeline's lookups.
func useFetched(op string, tables []*ShardedTable, ids [][]int64, train bool) error {
	for k, t := range tables {
		if t.pipe == nil {
			return &Error{Op: "train pipeline", Kind: ErrInvalidArgument, Err: fmt.Errorf("table %q: %s: not in the pipeline's lookups", t.name, op)}
		}
		if err := t.pipe.use(t, op, ids[k], train); err != nil {
			return err
		}
	}
	return nil
}

// bagIDs returns, for each of tables, the ids of its features' segments (ids cut by bounds of
// kind into segments of B bags each), with repeats.
func bagIDs(ids []int64, bounds *cgotorch.Tensor, kind embedding.BagBounds, segments int, features []nn.JointBag, tables []*ShardedTable) ([][]int64, error) {
	b, err := cgotorch.ToSlice[int64](bounds)
	if err != nil {
		return nil, err
	}
	spans, err := embedding.SegmentSpans(int64(len(ids)), b, kind, segments)
	if err != nil {
		return nil, err
	}
	out := make([][]int64, len(tables))
	for _, f := range features {
		if f.Segment < 0 || f.Segment >= segments {
			return nil, fmt.Errorf("segment %d of %d", f.Segment, segments)
		}
		k := slices.Index(tables, f.Table.(*ShardedTable))
		out[k] = append(out[k], ids[spans[f.Segment][0]:spans[f.Segment][1]]...)
	}
	return out, nil
}
