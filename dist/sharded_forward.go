package dist

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// lookup is a Forward or ForwardBag of the caller's arguments on a local table.
type lookup func(t *embedding.Table, o embedding.ForwardOptions) (*cgotorch.Tensor, error)

// Forward is embedding.Table.Forward on the sharded table (collective): the rows of ids (int64,
// any shape, on the CPU) as float32 ids.shape + [Dim]. The distinct ids (but the padding id)
// go to their owners, which insert absent ones (training) or read them (inference), and their
// rows come back into this rank's cache, where the lookup runs: a backward pass through the
// result leaves the gradients pending here, until Step sends them to the owners. Under
// admission, an id the owners keep out gets a zero row, and this lookup's gradient of it is
// dropped, as one table drops it (SetAdmission). Fused and a MaxNorm in training are refused
// (ErrBadInput).
func (s *ShardedTable) Forward(ids *cgotorch.Tensor, opts embedding.ForwardOptions) (*cgotorch.Tensor, error) {
	return s.forward("forward", ids, opts, func(t *embedding.Table, o embedding.ForwardOptions) (*cgotorch.Tensor, error) {
		return t.Forward(ids, o)
	})
}

// ForwardBag is embedding.Table.ForwardBag on the sharded table (collective), as Forward is:
// the bags are pooled on this rank from the rows its ids fetched.
func (s *ShardedTable) ForwardBag(ids, offsets, weights *cgotorch.Tensor, mode embedding.BagMode, opts embedding.ForwardOptions) (*cgotorch.Tensor, error) {
	return s.forward("forward bag", ids, opts, func(t *embedding.Table, o embedding.ForwardOptions) (*cgotorch.Tensor, error) {
		return t.ForwardBag(ids, offsets, weights, mode, o)
	})
}

func (s *ShardedTable) forward(op string, ids *cgotorch.Tensor, o embedding.ForwardOptions, look lookup) (*cgotorch.Tensor, error) {
	v, err := s.checkForward(op, ids, o, look)
	if s.pipe != nil { // in a TrainPipeline's step: its rows are here already
		u := uniqueIDs(v, o.Padding, o.PaddingID)
		if err == nil {
			err = s.pipe.use(s, op, u, o.Train)
		}
		if err != nil {
			return nil, err
		}
		return look(s.cache, o)
	}
	p := s.lookupPart(o.Train)
	p.local = err
	p.ids, p.counts = uniqueCounted(v, o.Padding, o.PaddingID, p.counted)
	rows, has, err := s.fetch(op, p, o.Train, false, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	local := s.cache
	if !o.Train {
		local = s.view
		defer local.Clear()
	}
	if err := s.cacheRows(local, p.ids, rows, has); err != nil {
		return nil, err
	}
	return look(local, o)
}

// checkForward validates a lookup on this rank before anything moves: the ids, and the rest
// (offsets, weights, mode, options) by the same lookup in inference on the empty view table,
// which reads default rows and changes nothing.
func (s *ShardedTable) checkForward(op string, ids *cgotorch.Tensor, o embedding.ForwardOptions, look lookup) ([]int64, error) {
	if o.Fused {
		return nil, s.badInput(op, "fused optimizers are not supported: the optimizer's Step sends the gradients")
	}
	if o.Train && o.MaxNorm > 0 {
		return nil, s.badInput(op, "MaxNorm in training is not supported")
	}
	v, err := s.idsOf(op, ids)
	if err != nil {
		return nil, err
	}
	dry := o
	dry.Train = false
	var out *cgotorch.Tensor
	cgotorch.NoGrad(func() { out, err = look(s.view, dry) })
	if out != nil {
		out.Close()
	}
	return v, err
}

// Step sends this rank's pending gradients (those backward passes left since the last Step or
// ZeroGrad) to the owners of their ids, which sum them per id and apply one step of the
// table's optimizer (collective). As embedding.Table.Step, it does nothing when no rank has
// pending gradients, and gradients holding NaN or Inf on any rank are refused as a whole on
// every rank (ErrBadInput there, ErrMismatch elsewhere) and stay pending: no shard changes.
func (s *ShardedTable) Step() error { return StepAll([]*ShardedTable{s}) }

// StepAll is Step of every table of tables (sharded tables of one group; one listed twice steps
// once), in one exchange of the gradients of all of them and one of the owners' verdicts,
// instead of two per table (collective: every rank passes the same tables in the same order).
// Each table steps, or refuses, as its own Step would; their errors are joined.
// nn.Optimizer.Step steps the sharded tables of a model this way (StepTables).
func StepAll(tables []*ShardedTable) error {
	const op = "step"
	var ts []*ShardedTable
	for _, t := range tables {
		if t == nil || t.g != tables[0].g {
			return &Error{Op: op, Kind: ErrInvalidArgument, Err: errors.New("a nil table, or tables of several groups")}
		}
		if !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return nil
	}
	parts := make([]part, len(ts))
	for k, t := range ts {
		ids, grads, err := t.pending(op)
		defer grads.Close()
		parts[k] = part{t: t, ids: ids, rows: grads, local: err}
	}
	stepped, errs := applyGrads(op, parts, false)
	for k, t := range ts {
		if errs[k] == nil && stepped[k] {
			errs[k] = t.ZeroGrad()
		}
	}
	return errors.Join(errs...)
}

// StepGroup is the table's group: nn.Optimizer.Step steps the sharded tables of one group
// together (nn.JointTable).
func (s *ShardedTable) StepGroup() any { return s.g }

// StepTables is StepAll of tables (sharded tables of s's group), for nn.Optimizer.Step.
func (s *ShardedTable) StepTables(tables []nn.EmbeddingTable) error {
	ts := make([]*ShardedTable, len(tables))
	for k, t := range tables {
		st, ok := t.(*ShardedTable)
		if !ok {
			return &Error{Op: "step", Kind: ErrInvalidArgument, Err: fmt.Errorf("table %q is not a sharded table", t.Name())}
		}
		ts[k] = st
	}
	return StepAll(ts)
}

// pending returns this rank's pending gradients, coalesced (ids ascending), checked finite.
func (s *ShardedTable) pending(op string) ([]int64, *cgotorch.Tensor, error) {
	it, gt, err := s.cache.PendingGrad()
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	ids, err := cgotorch.ToSlice[int64](it)
	if err == nil {
		err = s.finite(op, "pending gradients", gt)
	}
	if err != nil {
		gt.Close()
		return nil, nil, err
	}
	return ids, gt, nil
}

// ZeroGrad drops this rank's pending gradients and the rows it cached for them (not
// collective).
func (s *ShardedTable) ZeroGrad() error { return errors.Join(s.cache.ZeroGrad(), s.cache.Clear()) }
