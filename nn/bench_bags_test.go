package nn_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// The multi-table bag benchmarks: a CTR model of 8 multi-hot features (a bag of 0 to 8 ids per
// sample, 4 on average, from 100,000 ids each), each pooled by sum from its own table of dim 16
// (SparseAdam), the pooled rows -> Linear(128, 1) (Adam) -> BCE with logits, batch 1,024: one
// nn.EmbeddingBag per table (8 C calls and 8 autograd nodes forward, 8 steps) against one
// nn.EmbeddingBagCollection (one call each). scripts/bench.sh prints the ratio.
const (
	bagsFields = 8
	bagsDim    = 16
	bagsBatch  = 1024
	bagsIDs    = 100_000
)

type bagsModel struct {
	nn.Container
	separate   []*nn.EmbeddingBag
	collection *nn.EmbeddingBagCollection
	head       *nn.Linear
}

func newBagsModel(b *testing.B, fused bool) *bagsModel {
	m := &bagsModel{}
	var features []nn.EmbeddingBagFeature
	for f := 0; f < bagsFields; f++ {
		tbl := presizedTable(b, bagsDim, bagsIDs)
		name := fmt.Sprintf("field%d", f)
		features = append(features, nn.EmbeddingBagFeature{Name: name, Table: tbl, Mode: embedding.Sum})
		if !fused {
			e := nn.NewEmbeddingBag(tbl, embedding.Sum, nn.EmbeddingOptions{})
			m.separate = append(m.separate, e)
			m.Add(name, e)
		}
	}
	if fused {
		c, err := nn.NewEmbeddingBagCollection(features, nn.EmbeddingOptions{})
		if err != nil {
			b.Fatal(err)
		}
		m.collection = c
		m.Add("bags", c)
	}
	m.head = nn.NewLinear(bagsFields*bagsDim, 1, true)
	m.Add("head", m.head)
	return m
}

func (m *bagsModel) Forward(*nn.Tensor) *nn.Tensor { panic("bagsModel takes a batch of bags") }

// bagsInput is one batch: every feature's ids and lengths (key-major, as a KeyedJagged holds
// them), and the same split per feature with torch-style offsets.
type bagsInput struct {
	kjt     nn.KeyedJagged
	ids     []*nn.Tensor
	offsets []*nn.Tensor
	labels  *nn.Tensor
}

func newBagsInput(rng *rand.Rand) bagsInput {
	var in bagsInput
	var all, lengths []int64
	for f := 0; f < bagsFields; f++ {
		in.kjt.Keys = append(in.kjt.Keys, fmt.Sprintf("field%d", f))
		var ids, offs []int64
		for s := 0; s < bagsBatch; s++ {
			l := rng.Intn(9)
			offs = append(offs, int64(len(ids)))
			lengths = append(lengths, int64(l))
			for ; l > 0; l-- {
				ids = append(ids, rng.Int63n(bagsIDs))
			}
		}
		all = append(all, ids...)
		in.ids = append(in.ids, cgotorch.MustFromSlice(ids))
		in.offsets = append(in.offsets, cgotorch.MustFromSlice(offs))
	}
	in.kjt.Values, in.kjt.Lengths = cgotorch.MustFromSlice(all), cgotorch.MustFromSlice(lengths)
	l := make([]float32, bagsBatch)
	for i := range l {
		l[i] = float32(rng.Intn(2))
	}
	in.labels = cgotorch.MustFromSlice(l, bagsBatch, 1)
	return in
}

func (m *bagsModel) logits(in bagsInput) *nn.Tensor {
	if m.collection != nil {
		return m.head.Forward(m.collection.Forward(in.kjt))
	}
	pooled := make([]*nn.Tensor, len(m.separate))
	for f, e := range m.separate {
		pooled[f] = e.Forward(in.ids[f], in.offsets[f])
	}
	return m.head.Forward(cgotorch.Cat(pooled, 1))
}

func benchBags(b *testing.B, fused bool) {
	benchThreads(b)
	cgotorch.ManualSeed(0)
	m := newBagsModel(b, fused)
	opt, err := nn.NewAdam(m, nn.DefaultAdamOptions())
	if err != nil {
		b.Fatal(err)
	}
	loss := nn.BCEWithLogits(nn.ReduceMean)
	rng := rand.New(rand.NewSource(1))
	const nBatches = 16
	batches := make([]bagsInput, nBatches)
	for k := range batches {
		batches[k] = newBagsInput(rng)
	}
	step := func(k int) {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			opt.ZeroGrad()
			loss(m.logits(batches[k]), batches[k].labels).Backward()
			if err := opt.Step(); err != nil {
				b.Fatal(err)
			}
		})
	}
	step(0) // allocates the optimizers' state
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step(i % nBatches)
	}
	b.ReportMetric(float64(b.N)*bagsBatch/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkBagsSeparate times a training step of the 8-feature bag model with one EmbeddingBag
// per table.
func BenchmarkBagsSeparate(b *testing.B) { benchBags(b, false) }

// BenchmarkBagsCollection times the same step with one EmbeddingBagCollection.
func BenchmarkBagsCollection(b *testing.B) { benchBags(b, true) }
