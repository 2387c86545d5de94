package dist

// A whole model's checkpoint: sharded tables, replicated dense layers and the optimizer's
// state, saved by one world size and resumed by another.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() {
	scenarios["model-ckpt-save"] = scenarioModelCheckpointSave
	scenarios["model-ckpt-resume"] = scenarioModelCheckpointResume
}

// resumeAt is the step after which the model checkpoint tests save.
const resumeAt = 12

// A model (a sharded table under an EmbeddingBag and an Embedding, dense layers in a
// DataParallel, Adam on the dense part) checkpointed after 12 of 20 steps by 2 ranks, then
// loaded into a model built afresh on 3, 2 or 1 ranks (other initial dense weights) and trained
// the 8 remaining steps, ends with the tables and dense weights of one process trained 20
// steps without interruption (the equivalence's tolerances).
func TestModelCheckpointResumes(t *testing.T) {
	for _, opt := range []string{"sgd", "sparseadam"} {
		for _, c := range []struct{ save, load int }{{2, 3}, {2, 1}, {3, 2}} {
			t.Run(fmt.Sprintf("%s/%dto%d", opt, c.save, c.load), func(t *testing.T) {
				env := []string{"GOREC_SHARD_OPT=" + opt, "GOREC_SHARD_DIR=" + t.TempDir()}
				requirePassed(t, runSharded(t, "model-ckpt-save", c.save, time.Minute, env...))
				res := runSharded(t, "model-ckpt-resume", c.load, time.Minute, env...)
				requirePassed(t, res)
				t.Log(res[0].output)
			})
		}
	}
}

// Rank 0 killed after every rank's part of a second checkpoint is written, before its commit:
// the other ranks' SaveCheckpoint fails, and the first checkpoint resumes as it must.
func TestModelCheckpointCrash(t *testing.T) {
	dir := t.TempDir()
	env := []string{"GOREC_SHARD_OPT=adagrad", "GOREC_SHARD_DIR=" + dir, "GOREC_CKPT_CRASH=1"}
	res := runSharded(t, "model-ckpt-save", 2, 30*time.Second, env...)
	if !killedBySignal(res[0].err, syscall.SIGKILL) {
		t.Fatalf("rank 0 was not killed: %v\n%s", res[0].err, res[0].output)
	}
	requirePassed(t, res[1:])
	if gens, _ := filepath.Glob(filepath.Join(dir, "gen-*")); len(gens) != 2 {
		t.Errorf("generations after the crash: %v, want the committed one and the torn one", gens)
	}
	res = runSharded(t, "model-ckpt-resume", 2, time.Minute, env...)
	requirePassed(t, res)
	t.Log(res[0].output)
}

// newCheckpointedModel is the model of the checkpoint tests over st, its dense layers seeded
// with seed and wrapped in a DataParallel summing the gradients, and Adam made from it.
func newCheckpointedModel(g *Group, st *ShardedTable, seed uint64) (*shardedDDPModel, *DataParallel, *nn.Optimizer, error) {
	model := newShardedDDPModel(st, seed)
	ddp, err := NewDataParallel(g, model, DataParallelOptions{SumGradients: true})
	if err != nil {
		return nil, nil, nil, err
	}
	opt, err := newOptim("adam", ddp)
	return model, ddp, opt, err
}

// trainSlices trains model on this rank's slices of the global batches from, ..., to-1.
func trainSlices(g *Group, model *shardedDDPModel, opt *nn.Optimizer, from, to int) error {
	per := trainBatch / g.WorldSize()
	for step := from; step < to; step++ {
		b := globalBatch(step)
		if err := shardedDDPStep(model, opt, b[g.Rank()*per:(g.Rank()+1)*per], trainBatch); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	return nil
}

// scenarioModelCheckpointSave trains the model resumeAt steps and checkpoints it into
// $GOREC_SHARD_DIR (a model with a local table is refused first). With $GOREC_CKPT_CRASH set,
// it trains 2 more steps and checkpoints again, rank 0 killed just before the commit: the
// other ranks' save must fail.
func scenarioModelCheckpointSave(o Options) error {
	return withTrainTables(o, func(g *Group, st *ShardedTable, ref *embedding.Table) error {
		model, ddp, opt, err := newCheckpointedModel(g, st, ddpSeed+uint64(g.Rank()))
		if err != nil {
			return err
		}
		if err := trainSlices(g, model, opt, 0, resumeAt); err != nil {
			return err
		}
		dir := os.Getenv("GOREC_SHARD_DIR")
		if err := SaveCheckpoint(context.Background(), g, dir, newShardedDDPModel(ref, ddpSeed), nil); !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("a checkpoint of a model with a local table: %v, want ErrInvalidArgument", err)
		}
		if err := SaveCheckpoint(context.Background(), g, dir, ddp, opt); err != nil {
			return err
		}
		if os.Getenv("GOREC_CKPT_CRASH") == "" {
			return nil
		}
		if err := trainSlices(g, model, opt, resumeAt, resumeAt+2); err != nil {
			return err
		}
		if g.Rank() == 0 {
			checkpointBeforeCommit = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
		}
		err = SaveCheckpoint(context.Background(), g, dir, ddp, opt)
		fmt.Printf("rank %d: the checkpoint whose commit crashed: %v\n", g.Rank(), err)
		if err == nil {
			return fmt.Errorf("a checkpoint whose commit crashed succeeded")
		}
		return nil
	})
}

// scenarioModelCheckpointResume builds the model afresh (other initial dense weights), loads
// the checkpoint in $GOREC_SHARD_DIR, trains the remaining steps, and compares the tables and
// dense weights with one process trained trainSteps steps without interruption.
func scenarioModelCheckpointResume(o Options) error {
	return withTrainTables(o, func(g *Group, st *ShardedTable, ref *embedding.Table) error {
		model, ddp, opt, err := newCheckpointedModel(g, st, ddpSeed+100)
		if err != nil {
			return err
		}
		single := newShardedDDPModel(ref, ddpSeed)
		sopt, err := newOptim("adam", single)
		if err != nil {
			return err
		}
		for step := range trainSteps {
			if err := shardedDDPStep(single, sopt, globalBatch(step), trainBatch); err != nil {
				return err
			}
		}
		if err := loadRefused(g, st, model); err != nil {
			return err
		}
		if err := LoadCheckpoint(context.Background(), g, os.Getenv("GOREC_SHARD_DIR"), ddp, opt); err != nil {
			return err
		}
		if err := ownsItsIDs(st); err != nil {
			return err
		}
		if err := trainSlices(g, model, opt, resumeAt, trainSteps); err != nil {
			return err
		}
		worst, tableErr := against(st, ref)
		fmt.Printf("rank %d of %d: resumed tables against one process: worst difference %.3g of the tolerance, %v\n",
			g.Rank(), g.WorldSize(), worst, tableErr)
		if err := errors.Join(tableErr, checkTrained(g, model, single)); err != nil {
			return err
		}
		// tables trained past the checkpoint are refused before anything changes
		if err := LoadCheckpoint(context.Background(), g, os.Getenv("GOREC_SHARD_DIR"), ddp, opt); !errors.Is(err, embedding.ErrBadInput) {
			return fmt.Errorf("a load into tables trained past the checkpoint: %v, want ErrBadInput", err)
		}
		_, err = against(st, ref)
		return errors.Join(err, checkTrained(g, model, single))
	})
}

// loadRefused loads the checkpoint into a model that has a table more than the saved one: it
// must fail with ErrIncompatible on every rank, and leave st empty and the dense weights of
// model as they were.
func loadRefused(g *Group, st *ShardedTable, model *shardedDDPModel) error {
	extra, err := NewShardedTable(g, "extra", trainConfigs["sgd"])
	if err != nil {
		return err
	}
	defer extra.Close()
	bigger := &nn.Container{}
	bigger.Add("model", model)
	bigger.Add("extra", newTrainModel(extra))
	before := flat(model.Parameters())
	err = LoadCheckpoint(context.Background(), g, os.Getenv("GOREC_SHARD_DIR"), bigger, nil)
	if !errors.Is(err, embedding.ErrIncompatible) {
		return fmt.Errorf("a load into a model with a table the checkpoint lacks: %v, want ErrIncompatible", err)
	}
	n, lerr := st.Len()
	if lerr != nil || n != 0 || maxDiff(flat(model.Parameters()), before) != 0 {
		return fmt.Errorf("a refused load changed the model: %d ids (%v)", n, lerr)
	}
	return nil
}
