package nn_test

import (
	"math"
	"math/rand"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// The MovieLens benchmarks: biased matrix factorisation (examples/movielens's model) against
// SVD++ on synthetic data shaped like the example's (671 users, 9,066 items, about 120 training
// ratings per user, popular items rated more, batch 512, dim 128, SparseAdam). SVD++ adds to
// the user's factor the implicit term |N(u)|^-1/2 * sum of y_j over the items j the user rated,
// an EmbeddingBag (sum, per-sample weights) over about 61k ids per batch. scripts/bench.sh
// prints the ratio of the two step times (target: SVD++ within 3x of MF).
const (
	mlUsers = 671
	mlItems = 9066
	mlDim   = 128
	mlBatch = 512
)

type mlRating struct {
	user, item int64
	value      float32
}

// mlData draws the ratings and each user's rated items (N(u)).
func mlData() (ratings []mlRating, rated [][]int64) {
	rng := rand.New(rand.NewSource(3))
	zipf := rand.NewZipf(rng, 1.05, 8, mlItems-1)
	rated = make([][]int64, mlUsers)
	for u := range rated {
		n := 20 + int(rng.ExpFloat64()*100)
		seen := map[int64]bool{}
		for len(rated[u]) < min(n, mlItems/2) {
			it := int64(zipf.Uint64())
			if !seen[it] {
				seen[it] = true
				rated[u] = append(rated[u], it)
				ratings = append(ratings, mlRating{int64(u), it, float32(1+rng.Intn(9)) / 2})
			}
		}
	}
	rng.Shuffle(len(ratings), func(i, j int) { ratings[i], ratings[j] = ratings[j], ratings[i] })
	return ratings, rated
}

type mlModel struct {
	nn.Container
	userBias, itemBias, user, item *nn.Embedding
	implicit                       *nn.EmbeddingBag // nil: plain MF
}

func newMLModel(b *testing.B, svdpp bool) *mlModel {
	m := &mlModel{}
	emb := func(dim int, init embedding.Initializer) embedding.Config {
		return embedding.Config{Dim: dim, Initializer: init, Optimizer: embedding.SparseAdam{LR: 0.003}, Seed: 1}
	}
	open := func(name string, c embedding.Config) *embedding.Table {
		t, err := embedding.New(c)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		return t
	}
	add := func(name string, dim int, init embedding.Initializer) *nn.Embedding {
		e := nn.NewEmbedding(open(name, emb(dim, init)), nn.EmbeddingOptions{})
		m.Add(name, e)
		return e
	}
	m.userBias = add("user_bias", 1, embedding.Zeros{})
	m.itemBias = add("item_bias", 1, embedding.Zeros{})
	m.user = add("user", mlDim, embedding.Normal{Std: 0.1})
	m.item = add("item", mlDim, embedding.Normal{Std: 0.1})
	if svdpp {
		m.implicit = nn.NewEmbeddingBag(open("implicit", emb(mlDim, embedding.Normal{Std: 0.01})), embedding.Sum, nn.EmbeddingOptions{})
		m.Add("implicit", m.implicit)
	}
	return m
}

// mlBatchInput is one batch as the model takes it.
type mlBatchInput struct {
	users, items, ratings  *nn.Tensor
	bagIDs, offsets, scale *nn.Tensor // SVD++ only
}

// mlBuffers are a training loop's buffers, reused from batch to batch.
type mlBuffers struct {
	users, items, ids, offsets []int64
	values, weights            []float32
}

// input builds a batch's tensors from its ratings (with the SVD++ bags: each user's rated
// items, the bags' offsets and the weights |N(u)|^-1/2).
func (bf *mlBuffers) input(batch []mlRating, rated [][]int64, svdpp bool) mlBatchInput {
	bf.users, bf.items, bf.values = bf.users[:0], bf.items[:0], bf.values[:0]
	for _, r := range batch {
		bf.users, bf.items, bf.values = append(bf.users, r.user), append(bf.items, r.item), append(bf.values, r.value)
	}
	in := mlBatchInput{users: cgotorch.MustFromSlice(bf.users), items: cgotorch.MustFromSlice(bf.items),
		ratings: cgotorch.MustFromSlice(bf.values)}
	if !svdpp {
		return in
	}
	bf.ids, bf.offsets, bf.weights = bf.ids[:0], bf.offsets[:0], bf.weights[:0]
	for _, r := range batch {
		bf.offsets = append(bf.offsets, int64(len(bf.ids)))
		bf.ids = append(bf.ids, rated[r.user]...)
		s := float32(1 / math.Sqrt(float64(len(rated[r.user]))))
		for range rated[r.user] {
			bf.weights = append(bf.weights, s)
		}
	}
	in.bagIDs, in.offsets, in.scale = cgotorch.MustFromSlice(bf.ids), cgotorch.MustFromSlice(bf.offsets), cgotorch.MustFromSlice(bf.weights)
	return in
}

func (m *mlModel) loss(in mlBatchInput) *nn.Tensor {
	p := m.user.Forward(in.users)
	if m.implicit != nil {
		p = p.Add(m.implicit.ForwardWeighted(in.bagIDs, in.offsets, in.scale))
	}
	pred := m.userBias.Forward(in.users).Add(m.itemBias.Forward(in.items)).Reshape(-1).AddScalar(3.5)
	pred = pred.Add(p.Mul(m.item.Forward(in.items)).SumDim([]int64{1}, false))
	return cgotorch.MSELoss(pred, in.ratings, cgotorch.ReduceMean)
}

func (m *mlModel) Forward(*nn.Tensor) *nn.Tensor { panic("mlModel takes a batch") }

func benchMovieLens(b *testing.B, svdpp bool) {
	benchThreads(b)
	ratings, rated := mlData()
	m := newMLModel(b, svdpp)
	opt, err := nn.NewAdam(m, nn.DefaultAdamOptions())
	if err != nil {
		b.Fatal(err)
	}
	nb := len(ratings) / mlBatch
	var bf mlBuffers
	step := func(k int) {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			in := bf.input(ratings[(k%nb)*mlBatch:(k%nb+1)*mlBatch], rated, svdpp)
			opt.ZeroGrad()
			m.loss(in).Backward()
			if err := opt.Step(); err != nil {
				b.Fatal(err)
			}
		})
	}
	for k := 0; k < nb; k++ { // one epoch first: every row exists, as after the first epoch
		step(k)
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step(i)
	}
	b.ReportMetric(float64(b.N)*mlBatch/b.Elapsed().Seconds(), "ratings/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkMovieLensMF times one training step of biased matrix factorisation (batch 512).
func BenchmarkMovieLensMF(b *testing.B) { benchMovieLens(b, false) }

// BenchmarkMovieLensSVDpp times one training step of SVD++ (the same, plus the implicit bag).
func BenchmarkMovieLensSVDpp(b *testing.B) { benchMovieLens(b, true) }
