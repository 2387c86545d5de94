package dist

// The pipelined training's equivalence: TrainPipeline against the plain loop on the same
// model, batches and ranks, bit for bit.

import (
	"errors"
	"fmt"
	"math"
	"os"
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

// pipeRun is what a training run ends with: the table's export and the dense weights.
type pipeRun struct {
	table *embedding.Snapshot
	dense []float64
}

// scenarioPipelineTrain trains the model with the plain loop, then afresh (the table closed
// and made again) through a TrainPipeline (fetching on a fork of the group with
// $GOREC_PIPE_FORK), and compares the two runs exactly; with $GOREC_PIPE_FAULT=stale the
// pipeline does not patch, and the runs must differ.
func scenarioPipelineTrain(o Options) error {
	cfg, ok := trainConfigs[os.Getenv("GOREC_SHARD_OPT")]
	if !ok {
		return fmt.Errorf("bad $GOREC_SHARD_OPT")
	}
	stale := os.Getenv("GOREC_PIPE_FAULT") == "stale"
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	var fetch *Group
	if os.Getenv("GOREC_PIPE_FORK") != "" {
		if fetch, err = g.Fork("pipeline"); err != nil {
			return err
		}
		defer fetch.Close()
	}
	plain, err := pipeTrain(g, nil, cfg, false, false)
	if err != nil {
		return fmt.Errorf("plain loop: %w", err)
	}
	defer plain.table.Close()
	piped, err := pipeTrain(g, fetch, cfg, true, stale)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	defer piped.table.Close()
	diff := errors.Join(identicalSnapshots(piped.table, plain.table), identicalFloats("dense weights", piped.dense, plain.dense))
	fmt.Printf("rank %d: pipelined against plain (stale %v): %v\n", g.Rank(), stale, diff)
	if stale {
		if diff == nil {
			return errors.New("the pipeline without its patch trains as the plain loop: the test cannot see stale rows")
		}
		return nil
	}
	return diff
}

// pipeTrain trains the sharded model for trainSteps steps on this rank's slices of the global
// batches, through a TrainPipeline (piped; without its patch: stale; fetching on fetch, if not
// nil) or the plain loop.
func pipeTrain(g, fetch *Group, cfg embedding.Config, piped, stale bool) (*pipeRun, error) {
	st, err := NewShardedTable(g, "users", cfg)
	if err != nil {
		return nil, err
	}
	defer st.Close()
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
	if piped {
		err = pipeLoop(model, st, opt, slice, stale, fetch)
	} else {
		for step := 0; step < trainSteps && err == nil; step++ {
			err = shardedDDPStep(model, opt, slice(step), trainBatch)
		}
	}
	if err != nil {
		return nil, err
	}
	snap, err := st.Export()
	if err != nil {
		return nil, err
	}
	return &pipeRun{table: snap, dense: flat(model.Parameters())}, nil
}

// pipeLoop is the pipelined training loop over trainSteps batches.
func pipeLoop(model *shardedDDPModel, st *ShardedTable, opt *nn.Optimizer, slice func(int) []sample, stale bool, fetch *Group) error {
	p, err := NewTrainPipeline(opt, func(b []sample) []Prefetch {
		ids, _, one := sampleIDs(b)
		return []Prefetch{{Table: st, IDs: cgotorch.MustFromSlice(ids)}, {Table: st, IDs: cgotorch.MustFromSlice(one)}}
	}, func(b []sample) (*cgotorch.Tensor, error) {
		x, y := model.sparse.features(b)
		return model.head.Forward(x).Sub(y).Square().Sum().DivScalar(trainBatch), nil
	}, TrainPipelineOptions{FetchGroup: fetch})
	if err != nil {
		return err
	}
	defer p.Close()
	p.noPatch = stale
	trained := 0
	for step := 0; step < trainSteps; step++ {
		_, ok, err := p.Progress(slice(step))
		if err != nil {
			return fmt.Errorf("progress %d: %w", step, err)
		}
		trained += boolIntInt(ok)
	}
	_, ok, err := p.Flush()
	if err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if trained += boolIntInt(ok); trained != trainSteps {
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
