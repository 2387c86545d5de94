package nn

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// Hogwild trains one model with several goroutines at once, each on its own mini-batches
// (asynchronous data parallelism on the cores of one machine, as DeepRec and XDL offer on
// CPUs): the Go way to use the cores, where libtorch's intra-op threads gain little on the
// small operations of a recommendation model (docs/design.md, "Concurrent training").
//
// Each worker trains a replica of the model: replica builds it over the same embedding tables
// as the model, with dense parameters of its own (the same names and shapes). A worker step
// zeroes the replica's dense gradients, runs step (forward and loss) on a batch and backward:
//   - the tables: every replica's Embedding, EmbeddingBag and collection is made
//     Fused, so each backward pass applies its own batch's table gradients (one optimizer step
//     per table and pass) at its end, each table's update whole under that table's lock. Workers' table gradients never mix (the pending
//     gradients that Step applies are kept per table, not per pass: the trainer does not use
//     them).
//   - the dense parameters: the worker then takes the trainer's lock, copies its replica's
//     buffers (BatchNorm1d's running statistics, which its forward pass updated) into the
//     model, steps the model's dense parameters with opt's rule and state from the replica's
//     gradients (computed in the replica's tensors: the model's values are copied in, stepped,
//     and copied back into the model, so that the replica holds them too), and releases the
//     lock (tens of microseconds for an MLP).
//
// Where the batches come from: TrainEach has each worker draw its own from its own sequence, in
// its own goroutine (the fast form: no batch passes between goroutines); Train hands the
// batches of one channel to whichever worker is free.
//
// Semantics. With one worker a Train or TrainEach call gives, bit for bit, what the synchronous
// loop (opt.ZeroGrad, step, Backward, opt.Step on model, in batch order) gives. With several workers,
// each batch is trained exactly once, by one worker, and every update is applied whole: a table
// update holds the table's write lock (row values and optimizer state of all its rows change
// together), a dense step holds the trainer's lock. What is not deterministic is the order:
// which worker takes which batch (with Train; TrainEach fixes it), the order of the table updates and of the dense steps, and
// which versions of rows and weights a worker's forward pass read (the rows a lookup returns
// are a consistent copy taken under the table's lock, possibly updated by other workers before
// this worker's own update lands; the weights a replica holds are the model's as of that
// worker's previous step, without the dense steps other workers made since), and the buffers:
// the model takes those of the last worker to step, so running statistics updated by
// overlapping forward passes are kept from one of them only. Two runs with several workers
// differ in their last bits and beyond; the synchronous loop stays the reproducible mode.
//
// opt must be made from model (nn.NewAdam(model, ...)); its Steppers are not called (the
// replicas' fused lookups step the tables), and its step counts count every worker's steps.
// Change opt's rates between calls, not during one. The model and its replicas must not
// be used elsewhere during a call. The library keeps one malloc arena, and its allocator caches
// tensor buffers per thread so that workers do not wait on that arena's lock for them
// (docs/design.md): MALLOC_ARENA_MAX needs no setting (8 arenas gave about the cache's CPU time
// per sample, with more resident memory: docs/performance.md, "Tensor-buffer cache").
type Hogwild[M Module, B any] struct {
	opt      *Optimizer
	step     func(m M, batch B) *Tensor
	replicas []*hogwildReplica[M]
	mu       sync.Mutex // the dense step
	running  sync.Mutex // one Train at a time
}

type hogwildReplica[M Module] struct {
	m       M
	params  []NamedParameter          // the replica's, in the model's order
	of      map[*Tensor]*Tensor       // model parameter -> the replica's
	pairs   [][2]*Tensor              // (model, replica) parameters
	buffers [][2]*Tensor              // (model, replica) buffers
	ps      []cgotorch.OptimizerParam // stepDense's, reused
	stepped []bool
}

// NewHogwild returns a trainer of model with workers goroutines (workers >= 1), calling replica
// once per worker for its replica and step for each batch's loss (a scalar: its Backward is
// the worker's backward pass). It returns an error wrapping cgotorch.ErrInvalidArgument when
// workers < 1, when opt is not made from model or synchronizes gradients (dist.DataParallel),
// when a replica's parameters or buffers differ from the model's in names or shapes (or are the
// model's own), when a replica's tables are not the model's *embedding.Table tables (every
// table of a collection included), or when a replica has Steppers other than Embedding,
// EmbeddingBag, EmbeddingBagCollection and EmbeddingCollection. Sharded tables (package dist) are refused: their
// lookups and updates are collectives that every rank must call in the same order.
func NewHogwild[M Module, B any](model M, opt *Optimizer, workers int, replica func() (M, error), step func(m M, batch B) *Tensor) (*Hogwild[M, B], error) {
	if workers < 1 {
		return nil, invalid("hogwild: %d workers, want at least 1", workers)
	}
	if opt == nil || replica == nil || step == nil {
		return nil, invalid("hogwild: nil optimizer, replica or step")
	}
	if opt.syncer != nil {
		return nil, invalid("hogwild: the optimizer synchronizes gradients (%T): not supported", opt.syncer)
	}
	for _, p := range model.Parameters() {
		if opt.state[p.Tensor] == nil {
			return nil, invalid("hogwild: parameter %q is not in the optimizer: make it from the model", p.Name)
		}
	}
	tables := map[EmbeddingTable]bool{}
	for _, s := range opt.steppers {
		for _, t := range LookupTables(s) {
			tables[t] = true
		}
	}
	h := &Hogwild[M, B]{opt: opt, step: step}
	for w := 0; w < workers; w++ {
		m, err := replica()
		if err != nil {
			return nil, fmt.Errorf("nn: hogwild: replica %d: %w", w, err)
		}
		r, err := newHogwildReplica(model, m, tables)
		if err != nil {
			return nil, fmt.Errorf("nn: hogwild: replica %d: %w", w, err)
		}
		h.replicas = append(h.replicas, r)
	}
	return h, nil
}

func newHogwildReplica[M Module](model, m M, tables map[EmbeddingTable]bool) (*hogwildReplica[M], error) {
	r := &hogwildReplica[M]{m: m, params: m.Parameters(), of: map[*Tensor]*Tensor{}}
	var err error
	if r.pairs, err = pairUp("parameter", model.Parameters(), r.params); err != nil {
		return nil, err
	}
	if r.buffers, err = pairUp("buffer", Buffers(model), Buffers(m)); err != nil {
		return nil, err
	}
	for _, pq := range r.pairs {
		r.of[pq[0]] = pq[1]
	}
	for _, s := range Steppers(m) {
		var opts *EmbeddingOptions
		switch e := s.(type) {
		case *Embedding:
			opts = &e.EmbeddingOptions
		case *EmbeddingBag:
			opts = &e.EmbeddingOptions
		case *EmbeddingBagCollection:
			opts = &e.EmbeddingOptions
		case *EmbeddingCollection:
			opts = &e.EmbeddingOptions
		default:
			return nil, invalid("stepper %T is not supported (only Embedding, EmbeddingBag and the collections)", s)
		}
		for _, t := range LookupTables(s) {
			if err := fusedTable(t, tables); err != nil {
				return nil, err
			}
		}
		opts.Fused = true
	}
	return r, nil
}

// pairUp pairs the model's tensors mp with a replica's rp, which must have the same names and
// shapes, and be other tensors.
func pairUp(what string, mp, rp []NamedParameter) ([][2]*Tensor, error) {
	if len(mp) != len(rp) {
		return nil, invalid("%d %ss, the model has %d", len(rp), what, len(mp))
	}
	pairs := make([][2]*Tensor, len(mp))
	for i, p := range mp {
		q := rp[i]
		if q.Name != p.Name || !slices.Equal(q.Tensor.Shape(), p.Tensor.Shape()) || q.Tensor == p.Tensor {
			return nil, invalid("%s %d is %q %v, the model's %q %v (a replica has its own)",
				what, i, q.Name, q.Tensor.Shape(), p.Name, p.Tensor.Shape())
		}
		pairs[i] = [2]*Tensor{p.Tensor, q.Tensor}
	}
	return pairs, nil
}

func fusedTable(t EmbeddingTable, tables map[EmbeddingTable]bool) error {
	if _, ok := t.(*embedding.Table); !ok {
		return invalid("table %q is a %T, not an *embedding.Table", t.Name(), t)
	}
	if !tables[t] {
		return invalid("table %q is not one of the model's", t.Name())
	}
	return nil
}

// Workers returns the number of workers.
func (h *Hogwild[M, B]) Workers() int { return len(h.replicas) }

// Train copies the model's dense parameters and buffers into the replicas, then trains on the batches
// received from batches, with every worker, until batches is closed (and drained), ctx is done
// or a step fails. It returns once every worker goroutine has ended: no goroutine outlives the
// call. Its error is the first failure (a panicking tensor operation in step or backward comes
// back as an error, as cgotorch.Try gives it; a failed dense step, wrapped) or ctx's error; the
// batches already trained stay trained, the batch that failed may have updated the tables, and
// the batches left in the channel are not taken. Train and TrainEach calls run one at a time.
// Whichever worker is free takes the next batch; TrainEach, where each worker reads its own
// batches, saves the handoff (on 2 cores, the channel's receives wake an idle thread for the
// sender about once a batch: docs/performance.md, "Workers that read their own batches").
//
// While it runs, Train raises GOMAXPROCS to Workers()+1 if it is lower, and restores it when
// the last running Train returns: with no P to spare, Go's scheduler takes a worker's P away
// during each long cgo call, which cost 20-30% of the CPU time per sample on 2 cores.
func (h *Hogwild[M, B]) Train(ctx context.Context, batches <-chan B) error {
	return h.run(ctx, func(ctx context.Context, _ int) iter.Seq[B] { return receive(ctx, batches) })
}

// TrainEach trains as Train does, but each worker draws its batches from its own sequence,
// inside its own goroutine: worker w (which trains the w-th replica that NewHogwild made) calls
// source(w) once, then trains on the batches the sequence yields, in order, until it ends
// (a nil sequence yields none); TrainEach returns when every worker's sequence has ended, ctx is
// done or a step fails. This is Hogwild's classic form (each thread reads its own partition of
// the data): no batch passes between goroutines, so no thread is woken to hand one over.
//
// Everything else is Train's: one Train or TrainEach call at a time, GOMAXPROCS raised to
// Workers()+1 while it runs, the replicas synchronized with the model first, no goroutine
// outliving the call, and the first error returned (a tensor operation panicking in step,
// backward or the sequence itself comes back as an error) or ctx's. A worker checks ctx
// before training each batch it draws and stops its sequence (yield returns false) when ctx is
// done or another worker failed; a sequence that may block a long time (reading a file or a
// socket) should watch ctx itself, since TrainEach returns only once every sequence has
// stopped.
//
// Semantics. With one worker, TrainEach gives bit for bit what the synchronous loop over
// source(0)'s batches gives. With several, which batches each worker trains, and in which
// order, is now fixed by the caller (Train leaves it to the scheduler); what stays
// nondeterministic is the interleaving across workers: the order of the table updates and of
// the dense steps, the versions of rows and weights each forward pass reads, and which
// worker's buffers the model keeps (see Hogwild). A worker whose sequence ends early leaves
// the others training.
func (h *Hogwild[M, B]) TrainEach(ctx context.Context, source func(worker int) iter.Seq[B]) error {
	if source == nil {
		return invalid("hogwild: nil source")
	}
	return h.run(ctx, func(_ context.Context, w int) iter.Seq[B] { return source(w) })
}

// run is Train and TrainEach: worker w trains replica w on seq(ctx, w), where ctx is cancelled
// when any worker fails.
func (h *Hogwild[M, B]) run(ctx context.Context, seq func(ctx context.Context, worker int) iter.Seq[B]) error {
	h.running.Lock()
	defer h.running.Unlock()
	defer reserveProcs(len(h.replicas))()
	if err := h.syncReplicas(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for w, r := range h.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.work(ctx, r, w, seq); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return context.Cause(ctx)
}

// receive yields the batches received from batches until it is closed or ctx is done.
func receive[B any](ctx context.Context, batches <-chan B) iter.Seq[B] {
	return func(yield func(B) bool) {
		for {
			select {
			case <-ctx.Done():
				return
			case b, ok := <-batches:
				if !ok || !yield(b) {
					return
				}
			}
		}
	}
}

// work trains r on the batches of open's sequence, opened and drawn in the worker's goroutine,
// until it ends, ctx is done or a step fails.
func (h *Hogwild[M, B]) work(ctx context.Context, r *hogwildReplica[M], w int, open func(context.Context, int) iter.Seq[B]) (err error) {
	perr := cgotorch.Try(func() { // a tensor operation panicking in the sequence or in open
		seq := open(ctx, w)
		if seq == nil {
			return
		}
		for b := range seq {
			if ctx.Err() != nil {
				return
			}
			if err = h.trainOne(r, b); err != nil {
				return
			}
		}
	})
	if err == nil {
		err = perr
	}
	return err
}

// trainOne is one worker step: forward, backward (stepping the tables), then the dense step
// under the lock.
func (h *Hogwild[M, B]) trainOne(r *hogwildReplica[M], b B) error {
	return cgotorch.TryWithScope(func() error {
		ZeroGradParams(r.params)
		h.step(r.m, b).Backward()
		h.mu.Lock()
		defer h.mu.Unlock()
		if err := copyPairs(r.buffers, 1, 0); err != nil { // the running statistics this forward updated
			return err
		}
		return h.stepDense(r)
	})
}

// stepDense steps the model's dense parameters from r's gradients, under h.mu: it copies them
// into r's parameters, steps those with opt's rule and the model's optimizer state (each from
// its own gradient, the replica's, read on the C side: one optimizer call per parameter group,
// as Optimizer.Step makes), and copies the results back into the model. The arithmetic is
// Step's on the same values, so one worker stays bit for bit the synchronous loop. Before: a
// gradient handle, a step and a Close per parameter (three cgo calls each, and a cleanup
// registered and stopped per handle: docs/performance.md, "Two Hogwild workers: where the
// extra CPU goes").
func (h *Hogwild[M, B]) stepDense(r *hogwildReplica[M]) error {
	o := h.opt
	err := cgotorch.Try(func() {
		cgotorch.NoGrad(func() {
			for _, pq := range r.pairs {
				pq[1].CopyFrom(pq[0])
			}
			for _, g := range o.groups {
				r.ps = r.ps[:0]
				for _, p := range g.Params {
					s := o.state[p.Tensor]
					r.ps = append(r.ps, cgotorch.OptimizerParam{Param: r.of[p.Tensor], States: [3]*Tensor{s.a, s.b, s.c}, Step: s.step + 1})
				}
				if cap(r.stepped) < len(r.ps) {
					r.stepped = make([]bool, len(r.ps))
				}
				r.stepped = r.stepped[:len(r.ps)]
				cgotorch.OptimizerStepParams(o.rule.options(g.LR, g.WeightDecay), r.ps, r.stepped)
				for i, p := range g.Params {
					if r.stepped[i] {
						o.state[p.Tensor].step++
					}
				}
			}
			for _, pq := range r.pairs {
				pq[0].CopyFrom(pq[1])
			}
		})
	})
	if err != nil {
		return fmt.Errorf("nn: %s step: %w", o.name, err)
	}
	return nil
}

// syncReplicas copies the model's dense parameters and buffers into every replica.
func (h *Hogwild[M, B]) syncReplicas() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, r := range h.replicas {
		errs = append(errs, copyPairs(r.pairs, 0, 1), copyPairs(r.buffers, 0, 1))
	}
	return errors.Join(errs...)
}

// copyPairs copies each pair's tensor from into its tensor to (0: the model's, 1: the
// replica's), under h.mu.
func copyPairs(pairs [][2]*Tensor, from, to int) error {
	return cgotorch.Try(func() {
		cgotorch.NoGrad(func() {
			for _, pq := range pairs {
				pq[to].CopyFrom(pq[from])
			}
		})
	})
}
