package nn_test

import (
	"math"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/kernelfloor"
	"github.com/gorec/gorec/nn"
)

// The MovieLens benchmarks: biased matrix factorisation (examples/movielens's model) against
// SVD++ on synthetic data shaped like the example's (671 users, 9,066 items, about 120 training
// ratings per user, popular items rated more, batch 512, dim 128, SparseAdam). SVD++ adds to
// the user's factor the implicit term |N(u)|^-1/2 * sum of y_j over the items j the user rated,
// an EmbeddingBag (sum, per-sample weights). A batch's ratings come from about 307 distinct
// users, and a user with many ratings both has a big bag and shows up often, so the bags of a
// batch hold about 106k ids (about 200 a rating) of about 7.5k distinct items.
//
// The term depends on the user only, so it can be computed in two ways that are the same
// function of the parameters (the same model, the same gradients up to float rounding):
//   - per rating (BenchmarkMovieLensSVDpp): one bag per rating, the rater's items (106k ids a
//     batch), as the model is usually written (and as scripts/bench_torch_svdpp.py does);
//   - per distinct user (BenchmarkMovieLensSVDppUsers): one bag per distinct user of the batch
//     (about 51k ids), gathered to the ratings with index_select. Forward, a rating's row equals
//     the per-rating form's bit for bit (the same bag pooled in the same order); backward, the
//     gradients of a user's ratings are first summed (index_select's backward), then pooled back.
//
// BenchmarkMovieLensSVDppFloor times the MF step plus only the work the implicit term cannot do
// without for the same batches: its bags' distinct ids, pooling forward, pooling backward (of a
// fixed output gradient), and the SparseAdam step of the distinct ids, on per-user bags built
// before the timer, with no model or loss around them. BenchmarkMovieLensSVDppHardwareFloor
// times the MF step plus the least that work can be on this machine: internal/kernelfloor's
// pooling forward, pooling backward and SparseAdam of the distinct rows, on contiguous rows and
// occurrence lists prepared before the timer (no table, hash, autograd or tensor). scripts/bench.sh
// prints the ratios of the four to MF (target: SVD++ within 3x of MF; the floors show how far
// down that can go with today's kernels and on this hardware).
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

// mlForm is how a benchmark computes the model.
type mlForm int

const (
	mlMF        mlForm = iota // biased matrix factorisation
	mlPerRating               // SVD++, one bag per rating
	mlPerUser                 // SVD++, one bag per distinct user of the batch
)

// mlBatchInput is one batch as the model takes it.
type mlBatchInput struct {
	users, items, ratings  *nn.Tensor
	bagIDs, offsets, scale *nn.Tensor // SVD++ only
	bagOf                  *nn.Tensor // per-user bags: each rating's bag (nil: a bag per rating)
}

// mlBuffers are a training loop's buffers, reused from batch to batch.
type mlBuffers struct {
	users, items, ids, offsets, bagOf, bagUsers []int64
	values, weights                             []float32
	slot                                        []int64 // per user: 1 + its bag in the batch, 0: none
}

// input builds a batch's tensors from its ratings (with the SVD++ bags: each rating's or each
// distinct user's rated items, the bags' offsets and the weights |N(u)|^-1/2).
func (bf *mlBuffers) input(batch []mlRating, rated [][]int64, form mlForm) mlBatchInput {
	bf.users, bf.items, bf.values = bf.users[:0], bf.items[:0], bf.values[:0]
	for _, r := range batch {
		bf.users, bf.items, bf.values = append(bf.users, r.user), append(bf.items, r.item), append(bf.values, r.value)
	}
	in := mlBatchInput{users: cgotorch.MustFromSlice(bf.users), items: cgotorch.MustFromSlice(bf.items),
		ratings: cgotorch.MustFromSlice(bf.values)}
	switch form {
	case mlPerRating:
		bf.bags(bf.users, rated)
	case mlPerUser:
		bf.userBags(rated)
		in.bagOf = cgotorch.MustFromSlice(bf.bagOf)
	default:
		return in
	}
	in.bagIDs, in.offsets, in.scale = cgotorch.MustFromSlice(bf.ids), cgotorch.MustFromSlice(bf.offsets), cgotorch.MustFromSlice(bf.weights)
	return in
}

// bags sets ids, offsets and weights to one bag per user of users, in order.
func (bf *mlBuffers) bags(users []int64, rated [][]int64) {
	bf.ids, bf.offsets, bf.weights = bf.ids[:0], bf.offsets[:0], bf.weights[:0]
	for _, u := range users {
		bf.offsets = append(bf.offsets, int64(len(bf.ids)))
		bf.ids = append(bf.ids, rated[u]...)
		s := float32(1 / math.Sqrt(float64(len(rated[u]))))
		for range rated[u] {
			bf.weights = append(bf.weights, s)
		}
	}
}

// userBags sets the bags to one per distinct user of bf.users (in order of first rating), and
// bagOf to each rating's bag.
func (bf *mlBuffers) userBags(rated [][]int64) {
	if bf.slot == nil {
		bf.slot = make([]int64, len(rated))
	}
	bf.bagUsers, bf.bagOf = bf.bagUsers[:0], bf.bagOf[:0]
	for _, u := range bf.users {
		if bf.slot[u] == 0 {
			bf.bagUsers = append(bf.bagUsers, u)
			bf.slot[u] = int64(len(bf.bagUsers))
		}
		bf.bagOf = append(bf.bagOf, bf.slot[u]-1)
	}
	for _, u := range bf.bagUsers {
		bf.slot[u] = 0
	}
	bf.bags(bf.bagUsers, rated)
}

func (m *mlModel) loss(in mlBatchInput) *nn.Tensor {
	p := m.user.Forward(in.users)
	if in.bagIDs != nil {
		implicit := m.implicit.ForwardWeighted(in.bagIDs, in.offsets, in.scale)
		if in.bagOf != nil {
			implicit = implicit.IndexSelect(0, in.bagOf)
		}
		p = p.Add(implicit)
	}
	pred := m.userBias.Forward(in.users).Add(m.itemBias.Forward(in.items)).Reshape(-1).AddScalar(3.5)
	pred = pred.Add(p.Mul(m.item.Forward(in.items)).SumDim([]int64{1}, false))
	return cgotorch.MSELoss(pred, in.ratings, cgotorch.ReduceMean)
}

func (m *mlModel) Forward(*nn.Tensor) *nn.Tensor { panic("mlModel takes a batch") }

// mlBench is a benchmark's model, optimizer and data.
type mlBench struct {
	ratings []mlRating
	rated   [][]int64
	m       *mlModel
	opt     *nn.Optimizer
	nb      int
	bf      mlBuffers
	bagIDs  int64 // ids in the bags of the steps so far
}

func newMLBench(b *testing.B, svdpp bool) *mlBench {
	benchThreads(b)
	ml := &mlBench{}
	ml.ratings, ml.rated = mlData()
	ml.m = newMLModel(b, svdpp)
	opt, err := nn.NewAdam(ml.m, nn.DefaultAdamOptions())
	if err != nil {
		b.Fatal(err)
	}
	ml.opt, ml.nb = opt, len(ml.ratings)/mlBatch
	return ml
}

func (ml *mlBench) batch(k int) []mlRating {
	return ml.ratings[(k%ml.nb)*mlBatch : (k%ml.nb+1)*mlBatch]
}

// step runs training step k of the model computed in form (extra, if not nil, runs between
// the backward pass and the optimizer step).
func (ml *mlBench) step(b *testing.B, k int, form mlForm, extra func(k int)) {
	cgotorch.WithScope(func(*cgotorch.Scope) {
		in := ml.bf.input(ml.batch(k), ml.rated, form)
		ml.bagIDs += int64(len(ml.bf.ids))
		ml.opt.ZeroGrad()
		ml.m.loss(in).Backward()
		if extra != nil {
			extra(k)
		}
		if err := ml.opt.Step(); err != nil {
			b.Fatal(err)
		}
	})
}

// run times b.N steps after one epoch of warm-up (every row exists, as after the first epoch).
func (ml *mlBench) run(b *testing.B, form mlForm, extra func(k int)) {
	for k := 0; k < ml.nb; k++ {
		ml.step(b, k, form, extra)
	}
	cpu0 := cpuTime()
	ml.bagIDs = 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ml.step(b, i, form, extra)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*mlBatch/b.Elapsed().Seconds(), "ratings/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	if form != mlMF {
		b.ReportMetric(float64(ml.bagIDs)/float64(b.N), "bag-ids/op")
	}
}

func benchMovieLens(b *testing.B, form mlForm) {
	newMLBench(b, form != mlMF).run(b, form, nil)
}

// BenchmarkMovieLensMF times one training step of biased matrix factorisation (batch 512).
func BenchmarkMovieLensMF(b *testing.B) { benchMovieLens(b, mlMF) }

// BenchmarkMovieLensSVDpp times one training step of SVD++ (the same, plus the implicit bag),
// one bag per rating.
func BenchmarkMovieLensSVDpp(b *testing.B) { benchMovieLens(b, mlPerRating) }

// BenchmarkMovieLensSVDppUsers times the same SVD++ step computed with one bag per distinct
// user of the batch, gathered to the ratings.
func BenchmarkMovieLensSVDppUsers(b *testing.B) { benchMovieLens(b, mlPerUser) }

// mlFloorBatch is one batch's per-user bags and a fixed gradient of their pooled rows.
type mlFloorBatch struct {
	ids, offsets, scale, grad *nn.Tensor
	n                         int64
}

// mlFloorBatches are every batch's per-user bags, built once per process (the benchmark runs
// several times: each run building its own would hold a copy more in memory until collected).
var mlFloorBatches = sync.OnceValue(func() []mlFloorBatch {
	ratings, rated := mlData()
	floor := make([]mlFloorBatch, len(ratings)/mlBatch)
	var bf mlBuffers
	for k := range floor {
		bf.input(ratings[k*mlBatch:(k+1)*mlBatch], rated, mlPerUser)
		floor[k] = mlFloorBatch{ids: cgotorch.MustFromSlice(bf.ids), offsets: cgotorch.MustFromSlice(bf.offsets),
			scale: cgotorch.MustFromSlice(bf.weights), n: int64(len(bf.ids)),
			grad: cgotorch.Full([]int64{int64(len(bf.offsets)), mlDim}, 1e-3)}
	}
	return floor
})

// BenchmarkMovieLensSVDppFloor times the MF step plus the implicit term's own work (its bags'
// distinct ids and rows, pooling forward and backward on the C side, and the SparseAdam step
// of its distinct ids in the optimizer's step) for the same batches' per-user bags, built
// before the timer: what an SVD++ step cannot do without.
func BenchmarkMovieLensSVDppFloor(b *testing.B) {
	ml := newMLBench(b, true)
	floor := mlFloorBatches()
	ml.run(b, mlMF, func(k int) {
		f := floor[k%ml.nb]
		ml.m.implicit.ForwardWeighted(f.ids, f.offsets, f.scale).BackwardWith(f.grad, false)
		ml.bagIDs += f.n
	})
	b.ReportMetric(float64(ml.bagIDs)/float64(b.N), "bag-ids/op")
}

// mlHardwareBatches are every batch's per-user bags prepared for internal/kernelfloor: rows
// remapped to 0..U-1 and each row's occurrences listed (built once per process).
var mlHardwareBatches = sync.OnceValue(func() []*kernelfloor.Batch {
	ratings, rated := mlData()
	batches := make([]*kernelfloor.Batch, len(ratings)/mlBatch)
	var bf mlBuffers
	for k := range batches {
		bf.input(ratings[k*mlBatch:(k+1)*mlBatch], rated, mlPerUser)
		fb, err := kernelfloor.NewBatch(bf.ids, bf.offsets, bf.weights, mlDim)
		if err != nil {
			panic(err)
		}
		batches[k] = fb
	}
	return batches
})

// BenchmarkMovieLensSVDppHardwareFloor times the MF step plus the implicit term's unavoidable
// kernels at this machine's speed (internal/kernelfloor, its widest instruction set) for the same
// batches' per-user bags: pooling forward of the bags' rows, pooling backward of a fixed output
// gradient into a [U, dim] gradient, and the SparseAdam step of the U rows (rows, moments and
// gradient contiguous). GOREC_BENCH_THREADS=2 splits each kernel over two goroutines.
func BenchmarkMovieLensSVDppHardwareFloor(b *testing.B) {
	ml := newMLBench(b, false)
	batches := mlHardwareBatches()
	threads := cgotorch.NumThreads()
	isa := kernelfloor.Best()
	rows, bags := 0, 0
	for _, fb := range batches {
		rows, bags = max(rows, fb.Rows), max(bags, fb.Bags)
	}
	rng := rand.New(rand.NewSource(5))
	p, m, v, g := make([]float32, rows*mlDim), make([]float32, rows*mlDim), make([]float32, rows*mlDim), make([]float32, rows*mlDim)
	for i := range p {
		p[i] = float32(rng.NormFloat64() * 0.01)
	}
	out, bagGrad := make([]float32, bags*mlDim), make([]float32, bags*mlDim)
	for i := range bagGrad {
		bagGrad[i] = 1e-3
	}
	opt := kernelfloor.AdamOptions{LR: 0.003, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	step := 0
	var fwd, bwd, adam time.Duration // each kernel's wall time over the timed steps
	ml.run(b, mlMF, func(k int) {
		if step == ml.nb { // (run's warm-up is ml.nb steps)
			fwd, bwd, adam = 0, 0, 0
		}
		fb := batches[k%ml.nb]
		n := fb.Rows * mlDim
		t0 := time.Now()
		fb.Forward(isa, out[:fb.Bags*mlDim], p[:n], threads)
		t1 := time.Now()
		fb.Backward(isa, g[:n], bagGrad[:fb.Bags*mlDim], threads)
		t2 := time.Now()
		step++
		kernelfloor.SparseAdam(isa, p[:n], m[:n], v[:n], g[:n], opt, step, threads)
		t3 := time.Now()
		fwd, bwd, adam = fwd+t1.Sub(t0), bwd+t2.Sub(t1), adam+t3.Sub(t2)
		ml.bagIDs += int64(fb.IDs())
	})
	b.ReportMetric(float64(ml.bagIDs)/float64(b.N), "bag-ids/op")
	for _, k := range []struct {
		unit string
		d    time.Duration
	}{{"fwd-ns/op", fwd}, {"bwd-ns/op", bwd}, {"adam-ns/op", adam}} {
		b.ReportMetric(float64(k.d.Nanoseconds())/float64(b.N), k.unit)
	}
	b.Logf("kernels: %v, %d threads", isa, threads)
}
