package dist

// The model and data the sharded tables' equivalence tests train: a bag of ids and one id per
// sample, looked up in one table (shared by an EmbeddingBag and an Embedding), a fixed
// projection, a squared error summed over the batch (so that the ranks' gradients add up to
// the whole batch's).

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

const (
	trainDim   = 4
	trainBatch = 12 // bags per global batch: divisible by 1, 2 and 3 ranks
	trainSteps = 20
)

// trainConfigs are the tables' configurations of the equivalence tests, by optimizer.
var trainConfigs = map[string]embedding.Config{
	"sgd":        {Dim: trainDim, Seed: 42, Initializer: embedding.Normal{Std: 0.1}, Optimizer: embedding.SGD{LR: 0.01, Momentum: 0.5}},
	"adagrad":    {Dim: trainDim, Seed: 42, Initializer: embedding.Normal{Std: 0.1}, Optimizer: embedding.Adagrad{LR: 0.05}},
	"sparseadam": {Dim: trainDim, Seed: 42, Initializer: embedding.Normal{Std: 0.1}, Optimizer: embedding.SparseAdam{LR: 0.01}},
}

type trainModel struct {
	nn.Container
	bag *nn.EmbeddingBag
	one *nn.Embedding
}

// newTrainModel is the model code: the same for a local and a sharded table.
func newTrainModel(t nn.EmbeddingTable) *trainModel {
	m := &trainModel{bag: nn.NewEmbeddingBag(t, embedding.Sum, nn.EmbeddingOptions{}), one: nn.NewEmbedding(t, nn.EmbeddingOptions{})}
	m.Add("bag", m.bag)
	m.Add("one", m.one)
	return m
}

// sample is one example: a bag of ids, one id, a target.
type sample struct {
	bag []int64
	one int64
	y   float32
}

// trainID is the k-th id of the tests' id space: strided (multiples of 6, so a raw id modulo
// 2 or 3 would put them all on one rank), and one negative.
func trainID(k int) int64 {
	if k == 0 {
		return -7
	}
	return 1000 + 6*int64(k)
}

// globalBatch is step's batch of trainBatch samples, the same on every rank.
func globalBatch(step int) []sample {
	rng := rand.New(rand.NewPCG(uint64(step), 7))
	b := make([]sample, trainBatch)
	for i := range b {
		for n := 1 + rng.IntN(4); n > 0; n-- {
			b[i].bag = append(b[i].bag, trainID(rng.IntN(30)))
		}
		b[i].one = trainID(rng.IntN(30))
		b[i].y = rng.Float32()*2 - 1
	}
	return b
}

// shardedTrainStep runs one step on samples: forward, the summed squared error, backward, the
// optimizer's step.
func shardedTrainStep(m *trainModel, opt *nn.Optimizer, samples []sample) error {
	if err := backward(m, opt, samples); err != nil {
		return err
	}
	return opt.Step()
}

// backward zeroes the gradients, and runs the forward and backward passes of samples.
func backward(m *trainModel, opt *nn.Optimizer, samples []sample) error {
	opt.ZeroGrad()
	return cgotorch.TryWithScope(func() error {
		proj := cgotorch.MustFromSlice([]float32{0.5, -1, 0.25, 2}, trainDim, 1)
		x, y := m.features(samples)
		x.MM(proj).Sub(y).Square().Sum().Backward()
		return nil
	})
}

// features is the model's output for samples, the bag's sum plus the single id's row
// ([n, trainDim]), and the samples' targets ([n, 1]).
func (m *trainModel) features(samples []sample) (x, y *cgotorch.Tensor) {
	ids, offs, one := sampleIDs(samples)
	ys := make([]float32, 0, len(samples))
	for _, s := range samples {
		ys = append(ys, s.y)
	}
	x = m.bag.Forward(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offs)).
		Add(m.one.Forward(cgotorch.MustFromSlice(one)))
	return x, cgotorch.MustFromSlice(ys, int64(len(samples)), 1)
}

// sampleIDs are the ids of samples' bags, concatenated, the bags' offsets, and their single
// ids.
func sampleIDs(samples []sample) (ids, offs, one []int64) {
	for _, s := range samples {
		offs = append(offs, int64(len(ids)))
		ids = append(ids, s.bag...)
		one = append(one, s.one)
	}
	return ids, offs, one
}

// train trains a model over t for trainSteps steps, on this rank's slice of each global batch.
func train(t nn.EmbeddingTable, rank, world int) error {
	return trainFrom(t, rank, world, 0, trainSteps)
}

// trainFrom trains a model over t on the global batches of steps from to to-1.
func trainFrom(t nn.EmbeddingTable, rank, world, from, to int) error {
	m := newTrainModel(t)
	opt, err := nn.NewAdam(m, nn.AdamOptions{LR: 1e-3})
	if err != nil {
		return err
	}
	per := trainBatch / world
	for step := from; step < to; step++ {
		if err := shardedTrainStep(m, opt, globalBatch(step)[rank*per:(rank+1)*per]); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	return nil
}

// Tolerance of the equivalence: the ranks sum an id's gradients in another order than one
// process does (float32 reassociation), and the optimizers carry the difference on.
const (
	equalAbs = 1e-5
	equalRel = 1e-4
)

// sameSnapshot compares a sharded table's gathered export with a local table's; worst is the
// largest difference seen, relative to equalAbs + equalRel*|want| (at most 1 when equal).
func sameSnapshot(got, want *embedding.Snapshot) (worst float64, err error) {
	gi, _ := cgotorch.ToSlice[int64](got.IDs)
	wi, _ := cgotorch.ToSlice[int64](want.IDs)
	if fmt.Sprint(gi) != fmt.Sprint(wi) {
		return 0, fmt.Errorf("ids %v, want %v", gi, wi)
	}
	if got.Step != want.Step {
		return 0, fmt.Errorf("step %d, want %d", got.Step, want.Step)
	}
	if len(got.States) != len(want.States) {
		return 0, fmt.Errorf("%d states, want %d", len(got.States), len(want.States))
	}
	pairs := [][2]*cgotorch.Tensor{{got.Rows, want.Rows}}
	names := []string{"rows"}
	for i := range got.States {
		pairs = append(pairs, [2]*cgotorch.Tensor{got.States[i].Values, want.States[i].Values})
		names = append(names, got.States[i].Name)
	}
	for i, p := range pairs {
		g, _ := cgotorch.ToSlice[float32](p[0])
		w, _ := cgotorch.ToSlice[float32](p[1])
		d, err := closeValues(names[i], g, w)
		if err != nil {
			return d, err
		}
		worst = max(worst, d)
	}
	return worst, nil
}

// closeValues compares got with want within the equivalence tolerance; worst is the largest
// difference, relative to equalAbs + equalRel*|want|.
func closeValues(what string, got, want []float32) (worst float64, err error) {
	if len(got) != len(want) {
		return 0, fmt.Errorf("%s: %d values, want %d", what, len(got), len(want))
	}
	for j := range got {
		d := math.Abs(float64(got[j]-want[j])) / (equalAbs + equalRel*math.Abs(float64(want[j])))
		if d > 1 {
			return d, fmt.Errorf("%s[%d] = %v, want %v", what, j, got[j], want[j])
		}
		worst = max(worst, d)
	}
	return worst, nil
}
