package dist

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// Prefetch names one training lookup that a TrainPipeline's step runs on a sharded table: the
// ids (int64, any shape, on the CPU) of one Forward or ForwardBag call, with the padding id of
// its options (nn.EmbeddingOptions.Padding, PaddingID), which is left out as Forward leaves it.
type Prefetch struct {
	Table     *ShardedTable
	IDs       *cgotorch.Tensor
	Padding   bool
	PaddingID int64
	refused   error // CollectionPrefetches: this rank's input refused (the fetch's verdict)
}

// TrainPipeline trains a model with sharded tables on a stream of batches, overlapping the
// next batch's exchange of ids and rows with the current batch's compute, as TorchRec's
// TrainPipelineSparseDist does. Each Progress(next):
//
//  1. fetches next's rows from their owners (one all-to-all of the ids and one of the rows of
//     every lookup that lookups(next) lists) on a goroutine of its own, while the caller's
//     goroutine runs the current batch's forward and backward passes (loss, then Backward),
//     whose lookups take the rows fetched by the previous call and issue no collective;
//  2. then, once both are done, runs the optimizer's Step on the current batch (the tables'
//     gradients to their owners, the DataParallel's all-reduce);
//  3. then patches next's rows: each owner sends again the rows of next's ids that this Step
//     updated, so that next trains on the rows a plain loop would have looked up after the
//     Step. The pipeline is exact: its training equals the plain loop's
//     (opt.ZeroGrad, forward, backward, opt.Step per batch) bit for bit.
//
// Under admission (ShardedTable.SetAdmission) too: a lookup's ids that its fetch kept out get
// zero rows and no gradient, as in the plain loop, also when the fetch of next admits them
// before the current batch's Step (pipeline_admission.go). The fetch counts the ids as the
// plain loop's lookups do, one batch early.
//
// The collectives run in one fixed order on every rank (fetch of next, Step of the current
// batch, patch of next), so every rank must call Progress and Flush in the same order, with
// lookups listing the same tables in the same order (the ids differ). With
// TrainPipelineOptions.FetchGroup the fetch runs on that group, during the Step too. The
// fetch costs two all-to-alls for all the lookups together (the ids', the rows'), off the
// critical path, and the patch one, of the changed rows only. TrainStep is the step without
// the overlap.
//
// The step's model code must look up the sharded tables exactly as lookups says, in training
// (nn.Embedding and nn.EmbeddingBag in training mode), in the same order, and run no other
// collective on the group: a lookup of other ids, an inference lookup of a sharded table, or a
// lookup lists that the step leaves out is an ErrInvalidArgument error on that rank (its
// peers then time out). An error breaks the pipeline (every later call returns it): close the
// group, as after any failed collective.
//
// Between calls the pipeline holds the rows fetched for the batch it trains on next: Write,
// Delete and Evict of their tables fail (ErrBadInput) until Flush or Close, since that batch
// would train on rows the plain loop would not see.
//
// Rows, optimizer states and steps are the plain loop's; a row's metadata may not be: the fetch
// inserts and looks up the next batch's ids before the current batch's Step, so their stamps
// (the step a row was created or last seen, which eviction by age reads) can be a step
// earlier.
//
// Progress and Flush may run inside a scope (cgotorch.WithScope, TryWithScope), each call in
// one or not: the rows the pipeline keeps from one call to the next are made on goroutines of
// its own, which no scope of the caller's holds. A batch given to Progress is trained on at the
// next call (loss runs on it then): tensors it holds must outlive that call, not a scope that
// ends before it.
//
// A TrainPipeline is used by one goroutine.
type TrainPipeline[B any] struct {
	opt     *nn.Optimizer
	lookups func(B) []Prefetch
	loss    func(B) (*cgotorch.Tensor, error)

	fetchGroup *Group     // TrainPipelineOptions.FetchGroup
	cur        []*fetched // the current batch's fetched lookups (nil: none)
	curB       B
	broken     error
	noPatch    bool // a deliberate defect, tests only: rows stay one step stale
}

// fetched is the rows one lookup fetched ahead of its step, and, on the owners, what they
// sent (to patch them later).
type fetched struct {
	p      Prefetch
	ids    []int64          // this rank's distinct ids, ascending
	rows   *cgotorch.Tensor // their rows, [len(ids), Dim]
	routed *routed          // the ids this rank received as an owner
	// with admission, the ids this rank received as an owner that the lookup kept out
	// (ascending; the patch leaves them out)
	unadmitted []int64
	// the patch: the rows of ids the Step before this lookup's updated
	patchIDs  []int64
	patchRows *cgotorch.Tensor
}

func (f *fetched) close() {
	f.rows.Close()
	f.patchRows.Close()
}

// tablePipe is a table's queue of fetched lookups during a step.
type tablePipe struct{ queue []*fetched }

// TrainPipelineOptions say how a TrainPipeline overlaps.
type TrainPipelineOptions struct {
	// FetchGroup, when set, carries the fetch's collectives: a fork of the tables' group
	// (Group.Fork). The fetch of the next batch then overlaps the current batch's Step too,
	// not only its forward and backward passes. Nil: the tables' group, after the backward
	// pass and before the Step.
	FetchGroup *Group
}

// NewTrainPipeline makes a pipeline training with opt (made from the model, or from its
// DataParallel). lookups lists the sharded tables' training lookups of a batch, in the order
// the model runs them; loss runs the model's forward pass on a batch (this rank's slice) and
// returns the loss, a scalar, on which the pipeline calls Backward.
func NewTrainPipeline[B any](opt *nn.Optimizer, lookups func(B) []Prefetch, loss func(B) (*cgotorch.Tensor, error), opts TrainPipelineOptions) (*TrainPipeline[B], error) {
	if opt == nil || lookups == nil || loss == nil {
		return nil, &Error{Op: "train pipeline", Kind: ErrInvalidArgument, Err: errors.New("nil optimizer, lookups or loss")}
	}
	return &TrainPipeline[B]{opt: opt, lookups: lookups, loss: loss, fetchGroup: opts.FetchGroup}, nil
}

// Progress fetches next's rows while it trains on the batch given at the previous call
// (collective). It returns that batch's loss, and whether there was one: the first call only
// fetches. Flush trains on the last batch.
func (p *TrainPipeline[B]) Progress(next B) (loss float64, trained bool, err error) {
	if p.broken != nil {
		return 0, false, p.broken
	}
	defer func() {
		if err != nil {
			p.fail(err)
		}
	}()
	reqs := p.lookups(next)
	tables, err := p.views(reqs)
	if err != nil {
		return 0, false, err
	}
	var ahead []*fetched // next's rows, made on goroutines of their own (unscoped)
	done := background(func() (err error) { ahead, err = p.fetch(reqs, tables); return err })
	if p.cur == nil {
		if err := <-done; err != nil {
			return 0, false, err
		}
		p.curB = next
		p.hold(ahead)
		return 0, false, nil
	}
	loss, err = p.compute()
	var hooks map[*ShardedTable]*stepHook
	if err == nil && p.fetchGroup != nil { // the fetch runs on, on its own group
		hooks, err = p.step(reqs)
	}
	if err = errors.Join(err, <-done); err == nil && p.fetchGroup == nil {
		hooks, err = p.step(reqs)
	}
	if err == nil {
		err = <-background(func() error { return p.patch(ahead, hooks) })
	}
	p.release(p.cur)
	p.curB = next
	p.hold(ahead)
	return loss, true, err
}

// background runs f on a goroutine of its own, and the channel it returns receives f's error
// (a tensor operation's panic in f too: cgotorch.Try). The tensors f makes belong to no scope:
// a scope adopts those its own goroutine makes only, and a goroutine in a scope keeps its OS
// thread to itself. So the rows a TrainPipeline keeps across calls, which the fetch and the
// patch make there, outlive a scope the caller opened around a call.
func background(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		var err error
		done <- errors.Join(cgotorch.Try(func() { err = f() }), err)
	}()
	return done
}

// Flush trains on the batch given at the last Progress, if any (collective), and returns its
// loss and whether there was one.
func (p *TrainPipeline[B]) Flush() (loss float64, trained bool, err error) {
	if p.broken != nil || p.cur == nil {
		return 0, false, p.broken
	}
	loss, err = p.compute()
	if err == nil {
		_, err = p.step(nil)
	}
	p.release(p.cur)
	p.cur = nil
	if err != nil {
		p.fail(err)
	}
	return loss, err == nil, err
}

// Close frees the rows fetched for a batch not trained on (not collective).
func (p *TrainPipeline[B]) Close() {
	p.release(p.cur)
	p.cur = nil
}

func (p *TrainPipeline[B]) fail(err error) {
	p.broken = fmt.Errorf("train pipeline broken by an earlier error: %w", err)
}

// hold makes fs (fetched for p.curB) the current batch's rows, and tells their tables
// (ShardedTable.heldRows) until release.
func (p *TrainPipeline[B]) hold(fs []*fetched) {
	p.cur = fs
	for _, t := range distinctTablesOf(fs) {
		t.held++
	}
}

// release frees fs (the current batch's rows) and tells their tables.
func (p *TrainPipeline[B]) release(fs []*fetched) {
	for _, t := range distinctTablesOf(fs) {
		t.held--
	}
	for _, f := range fs {
		f.close()
	}
}

// distinctTablesOf are the tables of fs, each once.
func distinctTablesOf(fs []*fetched) []*ShardedTable {
	var out []*ShardedTable
	for _, f := range fs {
		if !slices.Contains(out, f.p.Table) {
			out = append(out, f.p.Table)
		}
	}
	return out
}

// compute runs the current batch's forward and backward passes, its lookups taking the rows
// fetched for them.
func (p *TrainPipeline[B]) compute() (loss float64, err error) {
	tables := map[*ShardedTable]*tablePipe{}
	for _, f := range p.cur {
		t := f.p.Table
		if tables[t] == nil {
			tables[t] = &tablePipe{}
		}
		tables[t].queue = append(tables[t].queue, f)
	}
	for t, q := range tables {
		t.pipe = q
	}
	defer func() {
		for t := range tables {
			t.pipe = nil
		}
	}()
	p.opt.ZeroGrad()
	err = cgotorch.TryWithScope(func() error {
		l, err := p.loss(p.curB)
		if err != nil {
			return err
		}
		l.Backward()
		loss, err = l.Item()
		return err
	})
	if err != nil {
		return math.NaN(), err
	}
	for t, q := range tables {
		if len(q.queue) > 0 {
			return loss, &Error{Op: "train pipeline", Kind: ErrInvalidArgument,
				Err: fmt.Errorf("table %q: the step ran %d lookup(s) fewer than listed", t.name, len(q.queue))}
		}
	}
	return loss, nil
}

// step runs the optimizer's Step on the current batch, its owners recording the ids they
// update in the tables of next's lookups (the hooks, by table).
func (p *TrainPipeline[B]) step(next []Prefetch) (map[*ShardedTable]*stepHook, error) {
	hooks := map[*ShardedTable]*stepHook{}
	for _, q := range next {
		if q.Table != nil && hooks[q.Table] == nil {
			hooks[q.Table] = &stepHook{}
			q.Table.stepping = hooks[q.Table]
		}
	}
	err := p.opt.Step()
	for t := range hooks {
		t.stepping = nil
	}
	return hooks, err
}

// patch patches next's fetched rows with those the Step changed (hooks: by table), but for the
// ids each lookup kept out (they stay out of the cache: zero rows, as the plain loop's).
func (p *TrainPipeline[B]) patch(next []*fetched, hooks map[*ShardedTable]*stepHook) error {
	if p.noPatch {
		return nil
	}
	return patch(next, func(f *fetched) []int64 {
		changed := hooks[f.p.Table].updated
		if movesAll(f.p.Table.cfg.Optimizer) {
			changed = f.routed.ids
		}
		return without(uniqueIDs(changed, false, 0), f.unadmitted)
	})
}

// views returns the tables of reqs as the fetch uses them: with a fetch group, copies whose
// collectives run on it (made on the caller's goroutine, before the fetch's runs).
func (p *TrainPipeline[B]) views(reqs []Prefetch) ([]*ShardedTable, error) {
	out := make([]*ShardedTable, len(reqs))
	for i, q := range reqs {
		t := q.Table
		if t == nil || t.g != reqs[0].Table.g {
			return nil, &Error{Op: "train pipeline", Kind: ErrInvalidArgument, Err: errors.New("a lookup without a table, or tables of several groups")}
		}
		if fg := p.fetchGroup; fg != nil {
			if fg == t.g || fg.Rank() != t.g.Rank() || fg.WorldSize() != t.g.WorldSize() {
				return nil, &Error{Op: "train pipeline", Kind: ErrInvalidArgument, Err: errors.New("the fetch group is not a fork of the tables' group")}
			}
			c := *t
			c.g, c.pipe, c.stepping, t = fg, nil, nil, &c
		}
		out[i] = t
	}
	return out, nil
}

// fetch fetches the rows of reqs from their owners through tables (views), in one exchange of
// ids and one of rows for all of them (fetchParts; each lookup inserts its absent ids, counts
// its ids and, under admission, tells which it kept out, as a training Forward does).
func (p *TrainPipeline[B]) fetch(reqs []Prefetch, tables []*ShardedTable) ([]*fetched, error) {
	const op = "prefetch"
	if len(reqs) == 0 {
		return nil, nil
	}
	out, parts := make([]*fetched, len(reqs)), make([]part, len(reqs))
	for i, q := range reqs {
		v, err := q.ids(op, tables[i])
		parts[i] = tables[i].lookupPart(true)
		parts[i].local = err
		parts[i].ids, parts[i].counts = uniqueCounted(v, q.Padding, q.PaddingID, parts[i].counted)
		out[i] = &fetched{p: q, ids: parts[i].ids}
	}
	rs, rows, present, err := fetchParts(op, parts, true, make([][]int64, len(reqs)))
	if err != nil {
		return nil, err
	}
	for i, f := range out {
		f.routed, f.rows, f.unadmitted = rs[i], rows[i], keptOut(rs[i].ids, present[i])
	}
	return out, nil
}

// use puts the rows fetched for a lookup of ids (unique, ascending) into the table's cache
// (but those of the ids it kept out), where the lookup then runs: the next fetched lookup must
// be of the same ids, in training.
func (q *tablePipe) use(s *ShardedTable, op string, ids []int64, train bool) error {
	bad := func(format string, args ...any) error {
		return &Error{Op: "train pipeline", Kind: ErrInvalidArgument, Err: fmt.Errorf("table %q: %s: %s", s.name, op, fmt.Sprintf(format, args...))}
	}
	switch {
	case !train:
		return bad("an inference lookup inside a pipelined step")
	case len(q.queue) == 0:
		return bad("more lookups than the pipeline's lookups listed")
	case !slices.Equal(q.queue[0].ids, ids):
		return bad("the ids differ from those the pipeline's lookups listed")
	}
	f := q.queue[0]
	q.queue = q.queue[1:]
	if err := s.cacheRows(s.cache, f.ids, f.rows, f.routed.has); err != nil {
		return err
	}
	if len(f.patchIDs) == 0 {
		return nil
	}
	return s.onShard(f.patchIDs, f.patchRows, s.cache.Write)
}

// heldRows refuses an operation that changes rows (Write, Delete, Evict) while a TrainPipeline
// holds rows of the table fetched for a batch it has not trained yet: that batch would train
// on rows the plain loop would not see (ErrBadInput; Flush the pipeline first).
func (s *ShardedTable) heldRows(op string) error {
	if s.held > 0 {
		return s.badInput(op, "a TrainPipeline holds rows fetched for a batch it has not trained yet: Flush it first")
	}
	return nil
}
