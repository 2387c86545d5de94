package dist

// The equivalence test of a whole model on several ranks: embedding tables sharded by id
// (ShardedTable) under nn.Embedding and nn.EmbeddingBag, dense layers replicated
// (DataParallel), one optimizer made from the DataParallel.

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() {
	scenarios["sharded-ddp-train"] = scenarioShardedDDPTrain
}

// Training the whole model on 1, 2 and 3 ranks (each rank its slice of every global batch,
// its loss summed over the slice and divided by the global batch size, the dense gradients
// summed: SumGradients) ends with the table rows, optimizer states and step of one process
// trained on the whole batches, within equalAbs + equalRel*|want|, and with the dense weights
// equal on every rank and within ddpTol of that process's, for SGD (with momentum), Adagrad
// and SparseAdam tables under Adam (with weight decay) on the dense layers. Measured: the
// tables at most 0.0023 of their tolerance, the dense weights at most 6e-8 off.
func TestShardedDataParallelEquivalence(t *testing.T) { runEquivalence(t, "sharded-ddp-train") }

// The whole model's equivalence check catches what a user would naturally get wrong: each
// rank's loss a mean over its slice, as with DataParallel alone ("mean": the tables'
// gradients are world-size times too large); the loss divided by the global batch size but
// the dense gradients averaged ("average": world-size times too small); the dense gradients
// not synchronized ("nosync": an optimizer made from the model); and a table's lost gradient.
func TestShardedDataParallelCatchesWrongScaling(t *testing.T) {
	for _, c := range []struct{ variant, opt, fault string }{
		{"mean", "sgd", ""}, {"mean", "adagrad", ""}, {"mean", "sparseadam", ""},
		{"average", "sgd", ""}, {"nosync", "adagrad", ""}, {"sum", "sgd", "lost-gradient"},
	} {
		t.Run(c.variant+"/"+c.opt+"/"+c.fault, func(t *testing.T) {
			res := runSharded(t, "sharded-ddp-train", 2, 30*time.Second, "GOREC_SHARD_OPT="+c.opt,
				"GOREC_HYBRID_VARIANT="+c.variant, "GOREC_SHARD_FAULT="+c.fault)
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

// shardedDDPModel is the sharded tables' test model with a dense head: its features through
// two Linear layers.
type shardedDDPModel struct {
	nn.Container
	sparse *trainModel
	head   *nn.Sequential
}

// newShardedDDPModel makes the model over t, its dense layers initialised from seed.
func newShardedDDPModel(t nn.EmbeddingTable, seed uint64) *shardedDDPModel {
	cgotorch.ManualSeed(seed)
	m := &shardedDDPModel{sparse: newTrainModel(t),
		head: nn.NewSequential(nn.NewLinear(trainDim, 8, true), &nn.ReLU{}, nn.NewLinear(8, 1, true))}
	m.Add("sparse", m.sparse)
	m.Add("head", m.head)
	return m
}

// shardedDDPStep is one training step on samples, the loss their squared errors summed and
// divided by div.
func shardedDDPStep(m *shardedDDPModel, opt *nn.Optimizer, samples []sample, div int) error {
	opt.ZeroGrad()
	return cgotorch.TryWithScope(func() error {
		x, y := m.sparse.features(samples)
		m.head.Forward(x).Sub(y).Square().Sum().DivScalar(float64(div)).Backward()
		return opt.Step()
	})
}

// scenarioShardedDDPTrain trains the model over a sharded table ($GOREC_SHARD_OPT's
// configuration) with its dense layers in a DataParallel, on this rank's slices of the global
// batches, and the same model over a local table on the whole batches (a mean loss), and
// compares the tables and the dense weights. $GOREC_HYBRID_VARIANT: "sum", the rule of the
// package doc; "mean", "average" and "nosync", the mistakes of
// TestShardedDataParallelCatchesWrongScaling. The scenario fails unless a mistake or a
// $GOREC_SHARD_FAULT defect fails the comparison.
func scenarioShardedDDPTrain(o Options) error {
	return withTrainTables(o, func(g *Group, st *ShardedTable, ref *embedding.Table) error {
		return shardedDDPTrain(g, st, ref, env("GOREC_HYBRID_VARIANT", "sum"))
	})
}

// shardedDDPTrain is scenarioShardedDDPTrain's training and check, over st and ref.
func shardedDDPTrain(g *Group, st *ShardedTable, ref *embedding.Table, variant string) error {
	var err error
	r, w := g.Rank(), g.WorldSize()
	model, single := newShardedDDPModel(st, ddpSeed+uint64(r)), newShardedDDPModel(ref, ddpSeed)
	var opt *nn.Optimizer
	if variant == "nosync" { // made before the DataParallel claims the parameters
		if opt, err = newOptim("adam", model); err != nil {
			return err
		}
	}
	ddp, err := NewDataParallel(g, model, DataParallelOptions{SumGradients: variant != "average" && variant != "mean"})
	if err != nil {
		return err
	}
	if opt == nil {
		if opt, err = newOptim("adam", ddp); err != nil {
			return err
		}
	}
	sopt, err := newOptim("adam", single)
	if err != nil {
		return err
	}
	per, div := trainBatch/w, trainBatch
	if variant == "mean" {
		div = per
	}
	for step := range trainSteps {
		b := globalBatch(step)
		if err := shardedDDPStep(model, opt, b[r*per:(r+1)*per], div); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if err := shardedDDPStep(single, sopt, b, trainBatch); err != nil {
			return fmt.Errorf("single process, step %d: %w", step, err)
		}
	}
	worst, tableErr := against(st, ref)
	fmt.Printf("rank %d: tables against one process: worst difference %.3g of the tolerance, %v\n", r, worst, tableErr)
	denseErr := checkTrained(g, model, single)
	if denseErr != nil && !errors.Is(denseErr, errNotEquivalent) {
		return denseErr
	}
	switch {
	case variant == "sum" && st.fault == noFault:
		return errors.Join(tableErr, denseErr)
	case variant == "mean" || st.fault != noFault:
		if tableErr == nil {
			return fmt.Errorf("variant %q, fault %q: the tables equal one process's", variant, os.Getenv("GOREC_SHARD_FAULT"))
		}
	case denseErr == nil:
		return fmt.Errorf("variant %q: the dense weights equal one process's", variant)
	}
	fmt.Printf("rank %d: variant %q fails the check as it must: %v\n", r, variant, errors.Join(tableErr, denseErr))
	return nil
}
