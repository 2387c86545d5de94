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
// (nn.JointLookupTable). Each feature's numbers and gradients are those of ForwardBag of its
// segment, and so are training and inference: see Forward. Fused and a MaxNorm in training are
// refused (ErrBadInput).
func (s *ShardedTable) ForwardBags(features []nn.JointBag, segments int, ids, bounds, weights *cgotorch.Tensor, kind embedding.BagBounds, o embedding.ForwardOptions) (*cgotorch.Tensor, error) {
	const op = "forward bags"
	of := make([]nn.EmbeddingTable, len(features))
	for i, f := range features {
		of[i] = f.Table
	}
	tables, err := distinctTables(op, s.g, of)
	if err != nil {
		return nil, err
	}
	pool := bagPool(features, segments, ids, bounds, weights, kind)
	v, err := s.checkBags(op, pool, ids, o)
	var byTable [][]int64 // by table, the ids of its features
	if err == nil {
		if byTable, err = bagIDs(v, bounds, kind, segments, features, tables); err != nil {
			err = s.badInput(op, "%v", err)
		}
	}
	return lookUpFetched(op, tables, byTable, err, o, func(local func(*ShardedTable) *embedding.Table) (*cgotorch.Tensor, error) {
		return pool(local, o)
	})
}

// bagPool returns the pooling of features' bags (embedding.ForwardBags of ids cut by bounds
// into segments) on the tables that local picks (their caches or views), with o.
func bagPool(features []nn.JointBag, segments int, ids, bounds, weights *cgotorch.Tensor, kind embedding.BagBounds) func(local func(*ShardedTable) *embedding.Table, o embedding.ForwardOptions) (*cgotorch.Tensor, error) {
	return func(local func(*ShardedTable) *embedding.Table, o embedding.ForwardOptions) (*cgotorch.Tensor, error) {
		fs := make([]embedding.BagFeature, len(features))
		for i, f := range features {
			fs[i] = embedding.BagFeature{Table: local(f.Table.(*ShardedTable)), Mode: f.Mode, Options: o, Segment: f.Segment}
		}
		return embedding.ForwardBags(fs, segments, ids, bounds, weights, kind)
	}
}

// checkBags checks the input of pool (bagPool's, of ids) by pooling every table's empty view
// (checkForward's dry run), and returns the ids.
func (s *ShardedTable) checkBags(op string, pool func(func(*ShardedTable) *embedding.Table, embedding.ForwardOptions) (*cgotorch.Tensor, error), ids *cgotorch.Tensor, o embedding.ForwardOptions) ([]int64, error) {
	return s.checkForward(op, ids, o, func(_ *embedding.Table, dry embedding.ForwardOptions) (*cgotorch.Tensor, error) {
		return pool(func(t *ShardedTable) *embedding.Table { return t.view }, dry)
	})
}

// ForwardEach is Forward of ids[i] on tables[i] for every i (sharded tables of s's group; a
// table may serve several), with the rows of all of them fetched in one exchange of ids and one
// of rows (collective), instead of two per lookup. An nn.EmbeddingCollection over sharded
// tables calls it (nn.JointLookupTable). Each result is Forward's, and so are its gradients.
func (s *ShardedTable) ForwardEach(tables []nn.EmbeddingTable, ids []*cgotorch.Tensor, o embedding.ForwardOptions) ([]*cgotorch.Tensor, error) {
	const op = "forward each"
	distinct, err := distinctTables(op, s.g, tables)
	if err != nil {
		return nil, err
	}
	byTable := make([][]int64, len(distinct)) // by table, the ids of its lookups
	var local error
	if len(ids) != len(tables) {
		local = &Error{Op: op, Kind: ErrInvalidArgument, Err: fmt.Errorf("%d ids for %d tables", len(ids), len(tables))}
	}
	for i := 0; local == nil && i < len(tables); i++ { // a refusal is this rank's verdict
		st := tables[i].(*ShardedTable)
		v, err := st.checkForward(op, ids[i], o, func(view *embedding.Table, dry embedding.ForwardOptions) (*cgotorch.Tensor, error) {
			return view.Forward(ids[i], dry)
		})
		k := slices.Index(distinct, st)
		byTable[k], local = append(byTable[k], v...), err
	}
	return lookUpFetched(op, distinct, byTable, local, o, func(local func(*ShardedTable) *embedding.Table) ([]*cgotorch.Tensor, error) {
		outs := make([]*cgotorch.Tensor, len(tables))
		for i, t := range tables {
			var err error
			if outs[i], err = local(t.(*ShardedTable)).Forward(ids[i], o); err != nil {
				closeAll(outs)
				return nil, err
			}
		}
		return outs, nil
	})
}

// RefuseLookup is this rank's part, refusing its input with refused, in the lookup that
// ForwardBags or ForwardEach over tables (sharded tables of s's group, in the order of the
// features) with o runs on the other ranks (collective: nn.JointLookupTable): an
// nn.EmbeddingBagCollection or nn.EmbeddingCollection calls it for an input it cannot cut
// into features (a missing key, both Lengths and Offsets). The ranks exchange as for that
// lookup, this one with its refusal as its verdict and no ids, so every rank's call fails
// (the others' with ErrMismatch), no table changes, and the ranks stay in step. It returns
// refused (joined with the exchange's error, if any).
func (s *ShardedTable) RefuseLookup(tables []nn.EmbeddingTable, o embedding.ForwardOptions, refused error) error {
	const op = "collection lookup"
	if refused == nil {
		refused = &Error{Op: op, Kind: ErrInvalidArgument, Err: errors.New("refused without a reason")}
	}
	distinct, err := distinctTables(op, s.g, tables)
	if err != nil {
		return errors.Join(refused, err)
	}
	_, err = lookUpFetched[struct{}](op, distinct, nil, refused, o, nil) // a refusal looks nothing up
	return err
}

// lookUpFetched fetches the rows of the ids of tables (byTable[k]: table k's, with repeats;
// failed: this rank's verdict on its input) from their owners, in one exchange of ids and one of
// rows, or takes those a TrainPipeline fetched for its step; then it runs look on the tables'
// caches (training: the owners insert absent ids) or on their views (inference: the owners read
// them; the views are cleared after).
func lookUpFetched[T any](op string, tables []*ShardedTable, byTable [][]int64, failed error, o embedding.ForwardOptions, look func(func(*ShardedTable) *embedding.Table) (T, error)) (T, error) {
	var zero T
	cache := func(t *ShardedTable) *embedding.Table { return t.cache }
	if tables[0].pipe != nil { // in a TrainPipeline's step: the rows are here already
		if failed == nil {
			us := make([][]int64, len(tables)) // by table, its distinct ids
			for k := range us {
				us[k] = uniqueIDs(byTable[k], o.Padding, o.PaddingID)
			}
			failed = useFetched(op, tables, us, o.Train)
		}
		if failed != nil {
			return zero, failed
		}
		return look(cache)
	}
	parts := make([]part, len(tables)) // by table, its distinct ids (and, counted, their counts)
	for k, t := range tables {
		parts[k] = t.lookupPart(o.Train)
		if byTable != nil && failed == nil {
			parts[k].ids, parts[k].counts = uniqueCounted(byTable[k], o.Padding, o.PaddingID, parts[k].counted)
		}
	}
	parts[0].local = failed
	if err := fetchInto(op, parts, o.Train); err != nil {
		return zero, err
	}
	if o.Train {
		return look(cache)
	}
	defer func() {
		for _, t := range tables {
			t.view.Clear()
		}
	}()
	return look(func(t *ShardedTable) *embedding.Table { return t.view })
}

// distinctTables returns the distinct tables of of, in the order of first use: sharded tables
// of g.
func distinctTables(op string, g *Group, of []nn.EmbeddingTable) ([]*ShardedTable, error) {
	var out []*ShardedTable
	for _, t := range of {
		st, ok := t.(*ShardedTable)
		if !ok || st.g != g {
			return nil, &Error{Op: op, Kind: ErrInvalidArgument, Err: fmt.Errorf("table %T is not a sharded table of this group", t)}
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	if len(out) == 0 {
		return nil, &Error{Op: op, Kind: ErrInvalidArgument, Err: errors.New("no feature")}
	}
	return out, nil
}

// CollectionPrefetches lists the lookups that c.Forward(in) runs on its sharded tables (an
// nn.EmbeddingBagCollection's or an nn.EmbeddingCollection's), in its order, for TrainStep and
// TrainPipeline: one per table, of the ids of every feature that looks it up (c's padding id
// left out). The IDs tensors are the caller's.
//
// Every rank calls it and passes its lookups on to TrainStep (or the pipeline), so its
// refusal must not make one rank skip the step that the others enter: an input it refuses (a
// missing key, bad bounds, values that are not int64 ids, a pooled collection's bad weights:
// what c.Forward would refuse) is no error here but travels in the lookups it returns (one per table, without ids) to the fetch, where it is this rank's
// verdict: every rank's TrainStep then fails (this rank's with the refusal, the others' with
// ErrMismatch) before anything changes, and the next step runs in step (a TrainPipeline's
// Progress fails on every rank, which breaks the pipeline). The errors it returns are those
// of c alone (nil, or a table that is not sharded; c is the same on every rank), and, for an
// nn.Collection of another package whose tables nn.LookupTables does not know, that of its
// TableIDs.
func CollectionPrefetches(c nn.Collection, in nn.KeyedJagged) ([]Prefetch, error) {
	const op = "collection prefetches"
	if c == nil {
		return nil, &Error{Op: op, Kind: ErrInvalidArgument, Err: errors.New("nil collection")}
	}
	known := nn.LookupTables(c)
	for _, t := range known {
		if _, ok := t.(*ShardedTable); !ok {
			return nil, &Error{Op: op, Kind: ErrInvalidArgument, Err: fmt.Errorf("table %q (%T) is not a sharded table", t.Name(), t)}
		}
	}
	tables, ids, err := c.TableIDs(in)
	if bags, ok := c.(*nn.EmbeddingBagCollection); ok && err == nil && in.Weights != nil {
		err = checkBagWeights(op, bags, in)
	}
	if err != nil && known == nil {
		return nil, &Error{Op: op, Kind: ErrInvalidArgument, Err: err}
	}
	if err != nil {
		return refusedPrefetches(known, &Error{Op: op, Kind: ErrInvalidArgument, Err: err}), nil
	}
	out := make([]Prefetch, len(tables))
	for k, t := range tables {
		st, ok := t.(*ShardedTable)
		var it *cgotorch.Tensor
		if ok {
			it, err = cgotorch.FromSlice(ids[k])
		} else {
			err = &Error{Op: op, Kind: ErrInvalidArgument, Err: fmt.Errorf("table %q (%T) is not a sharded table", t.Name(), t)}
		}
		if err != nil {
			for _, p := range out[:k] {
				p.IDs.Close()
			}
			return nil, err
		}
		out[k] = Prefetch{Table: st, IDs: it}
	}
	return out, nil
}

// checkBagWeights checks a pooled collection's input with weights, which TableIDs does not
// read, as its Forward over sharded tables does (ForwardBags' dry run: it pools, so it runs
// only for weights, the rest being TableIDs').
func checkBagWeights(op string, bags *nn.EmbeddingBagCollection, in nn.KeyedJagged) error {
	bounds, kind, err := in.Bounds()
	if err != nil {
		return err
	}
	fs := bags.Features()
	features := make([]nn.JointBag, len(fs))
	for i, f := range fs {
		features[i] = nn.JointBag{Table: f.Table, Mode: f.Mode, Segment: slices.Index(in.Keys, f.Name)}
	}
	pool := bagPool(features, len(in.Keys), in.Values, bounds, in.Weights, kind)
	_, err = features[0].Table.(*ShardedTable).checkBags(op, pool, in.Values, embedding.ForwardOptions{Padding: bags.Padding, PaddingID: bags.PaddingID})
	return err
}

// refusedPrefetches is a lookup of each of tables (sharded tables) that carries refused, this
// rank's refusal of its input, to the fetch (Prefetch.ids).
func refusedPrefetches(tables []nn.EmbeddingTable, refused error) []Prefetch {
	out := make([]Prefetch, len(tables))
	for k, t := range tables {
		out[k] = Prefetch{Table: t.(*ShardedTable), refused: refused}
	}
	return out
}

// ids returns the ids of q's lookup (t: its table as the fetch uses it), checked, or the
// refusal CollectionPrefetches put in q: this rank's verdict.
func (q Prefetch) ids(op string, t *ShardedTable) ([]int64, error) {
	if q.refused != nil {
		return nil, q.refused
	}
	return t.idsOf(op, q.IDs)
}

// fetchInto fetches the rows of each part's ids (distinct) of its table from their owners, in
// one exchange of ids and one of rows, into the table's cache (train: the owners insert absent
// ids) or its view (inference: they read them).
func fetchInto(op string, parts []part, train bool) error {
	rs, rows, _, err := fetchParts(op, parts, train, make([][]int64, len(parts)))
	if err != nil {
		return err
	}
	defer closeAll(rows)
	for k, p := range parts {
		t := p.t
		into := t.cache
		if !train {
			into = t.view
		}
		if err := t.cacheRows(into, p.ids, rows[k], rs[k].has); err != nil {
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
