package dist

// A step that looks an id up twice in a sharded table under admission, the first lookup keeping
// it out and the second admitting it: the first lookup's gradient of it is dropped, as one
// table drops it.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() { scenarios["admission-twice"] = scenarioAdmissionTwice }

// A model that looks one sharded table up twice per step (two nn.Embedding modules, or an
// nn.EmbeddingBagCollection or an nn.EmbeddingCollection of two features of it and then an
// nn.Embedding), under admission at the 2nd
// and at the 3rd lookup, trained on 2 ranks by the plain loop, TrainStep and a TrainPipeline,
// ends with the rows and optimizer states of one table trained on the whole batches (within the
// equivalence tolerance), for SGD (with momentum), Adagrad and SparseAdam. Every batch holds
// new ids, and two arranged ones that its first lookup keeps out and its second admits: one in
// a sample of rank 0 (both lookups on one rank), one in rank 0's first lookup and rank 1's
// second. This failed before the owners told the ranks which ids a lookup kept out: a rank
// sent the gradient of the first lookup too (its cache summed both lookups' gradients of an
// id, or held the kept-out zero row), which its owner applied, the id having a row by the Step.
func TestShardedAdmissionLookupTwice(t *testing.T) {
	for _, k := range []string{"2", "3"} {
		t.Run(k, func(t *testing.T) {
			res := runSharded(t, "admission-twice", 2, 2*time.Minute, "GOREC_TWICE_ADMIT="+k)
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

func scenarioAdmissionTwice(o Options) error {
	admit, err := strconv.Atoi(os.Getenv("GOREC_TWICE_ADMIT"))
	if err != nil || admit < 2 {
		return fmt.Errorf("bad $GOREC_TWICE_ADMIT")
	}
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	var errs []error // every run's (a comparison fails on every rank alike: the ranks go on)
	for _, opt := range []string{"sgd", "adagrad", "sparseadam"} {
		for _, first := range []string{"embedding", "bags", "seq"} {
			for _, mode := range []bagsTrainMode{bagsPlain, bagsTrainStep, bagsPipeline} {
				run := fmt.Sprintf("%s/%s/mode=%d", opt, first, mode)
				worst, err := twiceRun(g, trainConfigs[opt], admit, first, mode)
				fmt.Printf("rank %d: %s: against one table: worst difference %.3g of the tolerance, %v\n", g.Rank(), run, worst, err)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", run, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// twiceSample is one example: the ids of the first lookup (at least 2: for the collection, a
// history of all but the last, and that last as the candidate), the id of the second, a target.
type twiceSample struct {
	first  []int64
	second int64
	y      float32
}

// twiceBatch is step's global batch of trainBatch samples (the same on every rank), for
// admission at the admit-th lookup: ids drawn among 15 new at this step and the previous
// step's 15 (the first lookup's last ids among 5 of them, its others among the 10 others: the
// collection's features share no id, as one table's collection of features looks them up one
// by one, the sharded table's in one lookup), and two arranged ids of no other sample, which
// the first lookup holds admit-1 times and the second once: x in sample 0 (both lookups), y in
// sample 1's first lookup and the last sample's second (on 2 ranks: rank 0's and rank 1's).
func twiceBatch(step, admit int) []twiceSample {
	rng := rand.New(rand.NewPCG(uint64(step), 11))
	drawn := func(from, n int) int64 { return trainID(100 + 15*(step+1-rng.IntN(2)) + from + rng.IntN(n)) }
	b := make([]twiceSample, trainBatch)
	for i := range b {
		for n := 1 + rng.IntN(3); n > 0; n-- {
			b[i].first = append(b[i].first, drawn(0, 10))
		}
		b[i].first = append(b[i].first, drawn(10, 5))
		b[i].second = drawn(0, 15)
		b[i].y = rng.Float32()*2 - 1
	}
	x, y := trainID(5000+2*step), trainID(5001+2*step)
	b[0].first = append(slices.Repeat([]int64{x}, admit-1), b[0].first...)
	b[0].second = x
	b[1].first = append(slices.Repeat([]int64{y}, admit-1), b[1].first...)
	b[trainBatch-1].second = y
	return b
}

// twiceModel looks its table up twice: its first lookup (first: "embedding", an Embedding of
// every first id; "bags", a bag collection of a history, mean, and a candidate; "seq", a
// collection of their rows), then second (an Embedding of the second ids).
type twiceModel struct {
	nn.Container
	first  *nn.Embedding
	bags   *nn.EmbeddingBagCollection
	seq    *nn.EmbeddingCollection
	second *nn.Embedding
	table  nn.EmbeddingTable
}

func newTwiceModel(t nn.EmbeddingTable, first string) (*twiceModel, error) {
	m := &twiceModel{table: t, second: nn.NewEmbedding(t, nn.EmbeddingOptions{})}
	var err error
	switch first {
	case "bags":
		m.bags, err = nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{
			{Name: "history", Table: t, Mode: embedding.Mean}, {Name: "candidate", Table: t, Mode: embedding.Sum}}, nn.EmbeddingOptions{})
		m.Add("bags", m.bags)
	case "seq":
		m.seq, err = nn.NewEmbeddingCollection([]nn.EmbeddingFeature{{Name: "history", Table: t}, {Name: "candidate", Table: t}}, nn.EmbeddingOptions{})
		m.Add("seq", m.seq)
	default:
		m.first = nn.NewEmbedding(t, nn.EmbeddingOptions{})
		m.Add("first", m.first)
	}
	m.Add("second", m.second)
	return m, err
}

// input is the first lookup's ids: every first id (Embedding), or the collection's input.
func (m *twiceModel) input(samples []twiceSample) (ids []int64, in nn.KeyedJagged) {
	var hist, cand, lengths []int64
	for _, s := range samples {
		ids = append(ids, s.first...)
		n := len(s.first) - 1
		hist, cand, lengths = append(hist, s.first[:n]...), append(cand, s.first[n]), append(lengths, int64(n))
	}
	for range samples {
		lengths = append(lengths, 1)
	}
	in = nn.KeyedJagged{Keys: []string{"history", "candidate"},
		Values: cgotorch.MustFromSlice(append(hist, cand...)), Lengths: cgotorch.MustFromSlice(lengths)}
	return ids, in
}

// loss is the squared error of the projected rows, summed: each first row's against 0.5 (an
// Embedding's or the collection's) and each second row's against its target, or (bags) the
// pooled features' and the second row's projection against the target.
func (m *twiceModel) loss(samples []twiceSample) (*cgotorch.Tensor, error) {
	proj := []float32{0.5, -1, 0.25, 2, 1, -0.5, 0.75, -0.25}
	p4 := cgotorch.MustFromSlice(proj[:trainDim], trainDim, 1)
	ys, seconds := make([]float32, len(samples)), make([]int64, len(samples))
	for i, s := range samples {
		ys[i], seconds[i] = s.y, s.second
	}
	ids, in := m.input(samples)
	var first, x *cgotorch.Tensor
	switch {
	case m.bags != nil:
		x = m.bags.Forward(in).MM(cgotorch.MustFromSlice(proj, 2*trainDim, 1))
	case m.seq != nil:
		outs := m.seq.Forward(in)
		first = outs[0].MM(p4).SubScalar(0.5).Square().Sum().Add(outs[1].MM(p4).SubScalar(0.5).Square().Sum())
	default:
		first = m.first.Forward(cgotorch.MustFromSlice(ids)).MM(p4).SubScalar(0.5).Square().Sum()
	}
	second := m.second.Forward(cgotorch.MustFromSlice(seconds)).MM(p4)
	if x != nil {
		second = second.Add(x)
	}
	l := second.Sub(cgotorch.MustFromSlice(ys, int64(len(ys)), 1)).Square().Sum()
	if first != nil {
		l = l.Add(first)
	}
	return l, nil
}

// lookups lists the model's lookups of its table, in order, for TrainStep and TrainPipeline.
func (m *twiceModel) lookups(samples []twiceSample) []Prefetch {
	ids, in := m.input(samples)
	var out []Prefetch
	if c := m.collection(); c != nil {
		var err error
		if out, err = CollectionPrefetches(c, in); err != nil {
			panic(err)
		}
	} else {
		out = []Prefetch{{Table: m.table.(*ShardedTable), IDs: cgotorch.MustFromSlice(ids)}}
	}
	seconds := make([]int64, len(samples))
	for i, s := range samples {
		seconds[i] = s.second
	}
	return append(out, Prefetch{Table: m.table.(*ShardedTable), IDs: cgotorch.MustFromSlice(seconds)})
}

// collection is the model's collection, or nil.
func (m *twiceModel) collection() nn.Collection {
	switch {
	case m.bags != nil:
		return m.bags
	case m.seq != nil:
		return m.seq
	}
	return nil
}

// twiceTrain trains a twiceModel over t for trainSteps steps, on this rank's slices of the
// global batches, as mode says (a local table: the plain loop).
func twiceTrain(t nn.EmbeddingTable, admit, rank, world int, first string, mode bagsTrainMode) error {
	m, err := newTwiceModel(t, first)
	if err != nil {
		return err
	}
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		return err
	}
	per := trainBatch / world
	slice := func(step int) []twiceSample { return twiceBatch(step, admit)[rank*per : (rank+1)*per] }
	switch mode {
	case bagsPipeline:
		p, err := NewTrainPipeline(opt, m.lookups, m.loss, TrainPipelineOptions{})
		if err != nil {
			return err
		}
		defer p.Close()
		for step := 0; step < trainSteps; step++ {
			if _, _, err := p.Progress(slice(step)); err != nil {
				return fmt.Errorf("progress %d: %w", step, err)
			}
		}
		_, _, err = p.Flush()
		return err
	case bagsTrainStep:
		for step := 0; step < trainSteps; step++ {
			if _, err := TrainStep(opt, m.lookups, m.loss, slice(step)); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		}
		return nil
	}
	for step := 0; step < trainSteps; step++ {
		opt.ZeroGrad()
		err := cgotorch.TryWithScope(func() error { l, err := m.loss(slice(step)); l.Backward(); return err })
		if err == nil {
			err = opt.Step()
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	return nil
}

// twiceRun trains a sharded table of cfg (admission at the admit-th lookup) on this rank's
// slices as mode says, and a local one on the whole batches, and compares them (collective).
func twiceRun(g *Group, cfg embedding.Config, admit int, first string, mode bagsTrainMode) (float64, error) {
	st, err := NewShardedTable(g, "twice", cfg)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	ref, err := embedding.NewNamed("twice-reference", cfg)
	if err != nil {
		return 0, err
	}
	defer ref.Close()
	for _, t := range []interface{ SetAdmission(int) error }{st, ref} {
		if err := t.SetAdmission(admit); err != nil {
			return 0, err
		}
	}
	if err := twiceTrain(st, admit, g.Rank(), g.WorldSize(), first, mode); err != nil {
		return 0, err
	}
	if err := twiceTrain(ref, admit, 0, 1, first, bagsPlain); err != nil {
		return 0, err
	}
	return against(st, ref)
}
