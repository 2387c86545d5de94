package dist

// The pipelined training's equivalence: TrainPipeline against the plain loop on the same
// model, batches and ranks, bit for bit.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() { scenarios["pipeline-train"] = scenarioPipelineTrain }

// Training the sharded tables' test model (one table under an EmbeddingBag and an Embedding, a
// DataParallel head under Adam) on 2 ranks for 20 steps through a TrainPipeline ends with the
// same table rows, optimizer states and dense weights as the plain loop, bit for bit, for SGD
// (with momentum), Adagrad and SparseAdam tables, fetching on the tables' group or on a fork
// of it (then concurrently with the Step). Without the patch of the rows that a step
// updates after the next batch's fetch ("stale"), the pipeline trains on rows one step stale
// and the comparison must fail (the batches share ids: 30 ids, 12 samples of several ids).
func TestTrainPipelineEqualsPlainLoop(t *testing.T) {
	for _, c := range []struct{ opt, fault, fork string }{
		{"sgd", "", ""}, {"adagrad", "", ""}, {"sparseadam", "", ""}, {"adagrad", "stale", ""},
		{"sgd", "", "fork"}, {"adagrad", "", "fork"}, {"sparseadam", "", "fork"}, {"sgd", "stale", "fork"},
	} {
		t.Run(c.opt+"/"+c.fault+"/"+c.fork, func(t *testing.T) {
			res := runSharded(t, "pipeline-train", 2, time.Minute, "GOREC_SHARD_OPT="+c.opt, "GOREC_PIPE_FAULT="+c.fault,
				"GOREC_PIPE_FORK="+c.fork)
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

// Under admission (SetAdmission(3): an id gets a row at its third training lookup, and the
// batches hold each of their 30 ids about 1.4 times), the pipeline and TrainStep train as the
// plain loop, bit for bit, and count as it does: the owners' admission counts and the rows'
// access frequencies are the plain loop's. The table reads absent ids as their initial rows
// (ReadInitial), so that a patch sending an id admission kept out (whose lookup gives a zero
// row) would show. This failed before a batch's Step left out the gradients of the ids its
// fetch kept out (now they never reach the cache: sharded_kept_out.go): the next batch's fetch
// admitted some of them before the Step, which then applied gradients taken against zero rows,
// that a plain loop's owner drops (Adagrad: rows[0] = 0.052, want 0.069).
func TestTrainPipelineEqualsPlainLoopUnderAdmission(t *testing.T) {
	for _, c := range []struct{ opt, fork string }{{"sgd", ""}, {"adagrad", ""}, {"sparseadam", ""}, {"sgd", "fork"}, {"adagrad", "fork"}} {
		t.Run(c.opt+"/"+c.fork, func(t *testing.T) {
			res := runSharded(t, "pipeline-train", 2, time.Minute, "GOREC_SHARD_OPT="+c.opt, "GOREC_PIPE_FORK="+c.fork, "GOREC_PIPE_ADMIT=3")
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

// Progress and Flush, each called inside cgotorch.TryWithScope (as the README runs training
// steps), and TrainStep alike, train as the plain loop, bit for bit. Before the pipeline made
// the rows it keeps across calls on goroutines of its own, the second Progress failed: the
// rows the first one fetched, and every patch, belonged to the caller's scope, which had freed
// them ("tensor was released").
func TestTrainPipelineInsideScopes(t *testing.T) {
	for _, c := range []struct{ opt, fork, admit string }{{"adagrad", "", ""}, {"sgd", "fork", ""}, {"sparseadam", "", "3"}} {
		t.Run(c.opt+"/"+c.fork+"/"+c.admit, func(t *testing.T) {
			res := runSharded(t, "pipeline-train", 2, time.Minute, "GOREC_SHARD_OPT="+c.opt, "GOREC_PIPE_FORK="+c.fork,
				"GOREC_PIPE_ADMIT="+c.admit, "GOREC_PIPE_SCOPE=1")
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

// pipeRun is what a training run ends with: the table's export, the dense weights and this
// rank's shard's counts (pipeCounts).
type pipeRun struct {
	table  *embedding.Snapshot
	dense  []float64
	counts []int64
}

// pipeSetup is how pipeTrain trains: through the plain loop, a TrainPipeline (without its patch:
// stale; fetching on fetch, if not nil) or TrainStep; with SetAdmission(admit) when admit > 1;
// with each Progress, Flush and TrainStep inside cgotorch.TryWithScope when scoped.
type pipeSetup struct {
	mode   string // "plain", "pipeline", "step"
	fetch  *Group
	stale  bool
	admit  int
	scoped bool
}

// scenarioPipelineTrain trains the model with the plain loop, then afresh (the table closed
// and made again) through a TrainPipeline (fetching on a fork of the group with
// $GOREC_PIPE_FORK), and compares the two runs exactly; with $GOREC_PIPE_FAULT=stale the
// pipeline does not patch, and the runs must differ. With $GOREC_PIPE_ADMIT=k the table admits
// ids at their k-th lookup, tracks access and reads absent ids as their initial rows, and the
// runs' admission counts and frequencies must be equal too; with $GOREC_PIPE_SCOPE every call
// runs inside a scope. With either, a third run through TrainStep must equal the plain loop.
func scenarioPipelineTrain(o Options) error {
	cfg, ok := trainConfigs[os.Getenv("GOREC_SHARD_OPT")]
	if !ok {
		return fmt.Errorf("bad $GOREC_SHARD_OPT")
	}
	admit, _ := strconv.Atoi(os.Getenv("GOREC_PIPE_ADMIT"))
	if admit > 1 {
		cfg.TrackAccess, cfg.ReadDefault = true, embedding.ReadInitial
	}
	set := pipeSetup{stale: os.Getenv("GOREC_PIPE_FAULT") == "stale", admit: admit, scoped: os.Getenv("GOREC_PIPE_SCOPE") != ""}
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	if os.Getenv("GOREC_PIPE_FORK") != "" {
		if set.fetch, err = g.Fork("pipeline"); err != nil {
			return err
		}
		defer set.fetch.Close()
	}
	plain, err := pipeTrain(g, cfg, pipeSetup{mode: "plain", admit: admit})
	if err != nil {
		return fmt.Errorf("plain loop: %w", err)
	}
	defer plain.table.Close()
	modes := []string{"pipeline"}
	if admit > 1 || set.scoped {
		modes = append(modes, "step")
	}
	for _, set.mode = range modes {
		run, err := pipeTrain(g, cfg, set)
		if err != nil {
			return fmt.Errorf("%s: %w", set.mode, err)
		}
		defer run.table.Close()
		diff := errors.Join(identicalSnapshots(run.table, plain.table), identicalFloats("dense weights", run.dense, plain.dense),
			identicalFloats("admission counts and frequencies", int64Floats(run.counts), int64Floats(plain.counts)))
		fmt.Printf("rank %d: %s against plain (stale %v, admission %d, scoped %v): %v\n", g.Rank(), set.mode, set.stale, admit, set.scoped, diff)
		switch {
		case set.stale && diff == nil:
			return errors.New("the pipeline without its patch trains as the plain loop: the test cannot see stale rows")
		case !set.stale && diff != nil:
			return fmt.Errorf("%s: %w", set.mode, diff)
		}
	}
	return nil
}

// pipeTrain trains the sharded model for trainSteps steps on this rank's slices of the global
// batches, as set says.
func pipeTrain(g *Group, cfg embedding.Config, set pipeSetup) (*pipeRun, error) {
	st, err := NewShardedTable(g, "users", cfg)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if set.admit > 1 {
		if err := st.SetAdmission(set.admit); err != nil {
			return nil, err
		}
	}
	r, w := g.Rank(), g.WorldSize()
	model := newShardedDDPModel(st, ddpSeed+uint64(r))
	ddp, err := NewDataParallel(g, model, DataParallelOptions{SumGradients: true})
	if err != nil {
		return nil, err
	}
	opt, err := newOptim("adam", ddp)
	if err != nil {
		return nil, err
	}
	per := trainBatch / w
	slice := func(step int) []sample { return globalBatch(step)[r*per : (r+1)*per] }
	switch set.mode {
	case "pipeline":
		err = pipeLoop(model, st, opt, slice, set)
	case "step":
		lookups, loss := pipeFuncs(model, st)
		for step := 0; step < trainSteps && err == nil; step++ {
			err = scoped(set.scoped, func() error { _, err := TrainStep(opt, lookups, loss, slice(step)); return err })
		}
	default:
		for step := 0; step < trainSteps && err == nil; step++ {
			err = shardedDDPStep(model, opt, slice(step), trainBatch)
		}
	}
	if err != nil {
		return nil, err
	}
	run := &pipeRun{dense: flat(model.Parameters())}
	if run.counts, err = pipeCounts(st.Shard()); err != nil {
		return nil, err
	}
	run.table, err = st.Export()
	return run, err
}

// pipeCounts is what a shard counts: its admission counts (the ids not admitted yet, then
// their counts) and, when it tracks access, its rows' frequencies (the ids, then their
// frequencies).
func pipeCounts(shard *embedding.Table) ([]int64, error) {
	d, err := shard.Delta(false) // no mark was set: every count
	if err != nil || !shard.Config().TrackAccess {
		return slices.Concat(d.CountIDs, d.Counts), err
	}
	ids, _, freq, err := shard.Metadata()
	return slices.Concat(d.CountIDs, d.Counts, ids, freq), err
}

// int64Floats converts v to float64s (exact for counts).
func int64Floats(v []int64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// scoped runs f, inside cgotorch.TryWithScope when in is set.
func scoped(in bool, f func() error) error {
	if in {
		return cgotorch.TryWithScope(f)
	}
	return f()
}

// pipeFuncs are the pipeline's lookups and loss for the model over st.
func pipeFuncs(model *shardedDDPModel, st *ShardedTable) (func([]sample) []Prefetch, func([]sample) (*cgotorch.Tensor, error)) {
	return func(b []sample) []Prefetch {
			ids, _, one := sampleIDs(b)
			return []Prefetch{{Table: st, IDs: cgotorch.MustFromSlice(ids)}, {Table: st, IDs: cgotorch.MustFromSlice(one)}}
		}, func(b []sample) (*cgotorch.Tensor, error) {
			x, y := model.sparse.features(b)
			return model.head.Forward(x).Sub(y).Square().Sum().DivScalar(trainBatch), nil
		}
}

// pipeLoop is the pipelined training loop over trainSteps batches.
func pipeLoop(model *shardedDDPModel, st *ShardedTable, opt *nn.Optimizer, slice func(int) []sample, set pipeSetup) error {
	lookups, loss := pipeFuncs(model, st)
	p, err := NewTrainPipeline(opt, lookups, loss, TrainPipelineOptions{FetchGroup: set.fetch})
	if err != nil {
		return err
	}
	defer p.Close()
	p.noPatch = set.stale
	trained := 0
	call := func(f func() (float64, bool, error)) error {
		return scoped(set.scoped, func() error {
			_, ok, err := f()
			trained += boolIntInt(ok)
			return err
		})
	}
	for step := 0; step < trainSteps; step++ {
		if err := call(func() (float64, bool, error) { return p.Progress(slice(step)) }); err != nil {
			return fmt.Errorf("progress %d: %w", step, err)
		}
	}
	if err := call(p.Flush); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if trained != trainSteps {
		return fmt.Errorf("the pipeline trained %d batches, want %d", trained, trainSteps)
	}
	return nil
}

func boolIntInt(b bool) int { return int(boolInt(b)) }

// identicalSnapshots fails unless a and b hold the same ids, step, rows and states, bit for
// bit.
func identicalSnapshots(a, b *embedding.Snapshot) error {
	ai, _ := cgotorch.ToSlice[int64](a.IDs)
	bi, _ := cgotorch.ToSlice[int64](b.IDs)
	if fmt.Sprint(ai) != fmt.Sprint(bi) || a.Step != b.Step || len(a.States) != len(b.States) {
		return fmt.Errorf("ids, step or states differ: %d ids step %d, want %d ids step %d", len(ai), a.Step, len(bi), b.Step)
	}
	errs := []error{identicalTensors("rows", a.Rows, b.Rows)}
	for i := range a.States {
		errs = append(errs, identicalTensors(a.States[i].Name, a.States[i].Values, b.States[i].Values))
	}
	return errors.Join(errs...)
}

func identicalTensors(what string, a, b *cgotorch.Tensor) error {
	return identicalFloats(what, float64s(a), float64s(b))
}

// identicalFloats fails unless a and b are equal, bit for bit.
func identicalFloats(what string, a, b []float64) error {
	if len(a) != len(b) {
		return fmt.Errorf("%s: %d values, want %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return fmt.Errorf("%s[%d] = %v, want %v (max difference %g)", what, i, a[i], b[i], maxDiff(a, b))
		}
	}
	return nil
}

// A step whose lookups differ from those the pipeline fetched (other ids, one lookup more or
// fewer) fails with ErrInvalidArgument and breaks the pipeline; TrainStep refuses them alike,
// and trains on at its next call.
func TestTrainPipelineRefusesOtherLookups(t *testing.T) {
	g, err := New(Options{WorldSize: 1, Store: FileStore(t.TempDir() + "/store")})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for name, listed := range map[string]func(b []sample) []Prefetch{
		"fewer": func(b []sample) []Prefetch {
			ids, _, _ := sampleIDs(b)
			return []Prefetch{{IDs: cgotorch.MustFromSlice(ids)}}
		},
		"more":      func(b []sample) []Prefetch { ids, _, one := sampleIDs(b); return prefetches(ids, one, one) },
		"other ids": func(b []sample) []Prefetch { ids, _, one := sampleIDs(b); return prefetches(ids, append(one, 99)) },
	} {
		t.Run(name, func(t *testing.T) {
			st, err := NewShardedTable(g, "users", trainConfigs["adagrad"])
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			m := newTrainModel(st)
			opt, err := nn.NewAdam(m, nn.AdamOptions{})
			if err != nil {
				t.Fatal(err)
			}
			on := func(listed func(b []sample) []Prefetch) func(b []sample) []Prefetch {
				return func(b []sample) []Prefetch {
					l := listed(b)
					for i := range l {
						l[i].Table = st
					}
					return l
				}
			}
			loss := func(b []sample) (*cgotorch.Tensor, error) {
				x, _ := m.features(b)
				return x.Sum(), nil
			}
			p, err := NewTrainPipeline(opt, on(listed), loss, TrainPipelineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if _, _, err := p.Progress(globalBatch(0)); err != nil {
				t.Fatal(err)
			}
			_, _, err = p.Progress(globalBatch(1))
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("got %v, want ErrInvalidArgument", err)
			}
			if _, _, again := p.Flush(); again == nil {
				t.Fatal("the pipeline trains on after an error")
			}
			// TrainStep refuses the same lookups, and leaves nothing behind: a step with the
			// model's own lookups trains afterwards.
			if _, err := TrainStep(opt, on(listed), loss, globalBatch(2)); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("TrainStep: got %v, want ErrInvalidArgument", err)
			}
			own := func(b []sample) []Prefetch { ids, _, one := sampleIDs(b); return prefetches(ids, one) }
			before, err := st.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := TrainStep(opt, on(own), loss, globalBatch(3)); err != nil {
				t.Fatalf("TrainStep after a refused one: %v", err)
			}
			if after, err := st.Stats(); err != nil || after.Step != before.Step+1 {
				t.Fatalf("TrainStep took %d steps (%v), want 1", after.Step-before.Step, err)
			}
		})
	}
}

// prefetches lists lookups of each of ids (their Table set by the caller).
func prefetches(ids ...[]int64) []Prefetch {
	var out []Prefetch
	for _, v := range ids {
		out = append(out, Prefetch{IDs: cgotorch.MustFromSlice(v)})
	}
	return out
}
