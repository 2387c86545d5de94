package nn_test

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"runtime"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// hwModel is a two-field click model: a user row and a bag of item rows (EmbeddingBag, mean)
// -> Linear(16, 8) -> BatchNorm1d (whose running statistics are buffers) -> ReLU -> Linear(8, 1).
type hwModel struct {
	nn.Container
	user *nn.Embedding
	item *nn.EmbeddingBag
	mlp  *nn.Sequential
}

func newHWModel(user, item *embedding.Table) *hwModel {
	m := &hwModel{user: nn.NewEmbedding(user, nn.EmbeddingOptions{}), item: nn.NewEmbeddingBag(item, embedding.Mean, nn.EmbeddingOptions{}),
		mlp: nn.NewSequential(nn.NewLinear(16, 8, true), nn.NewBatchNorm1d(8), &nn.ReLU{}, nn.NewLinear(8, 1, true))}
	m.Add("user", m.user)
	m.Add("item", m.item)
	m.Add("mlp", m.mlp)
	return m
}

type hwBatch struct{ user, item, y *nn.Tensor } // item: [B, 2] bags

func (m *hwModel) loss(b hwBatch) *nn.Tensor {
	x := cgotorch.Cat([]*nn.Tensor{m.user.Forward(b.user), m.item.Forward(b.item, nil)}, 1)
	return nn.BCEWithLogits(nn.ReduceMean)(m.mlp.Forward(x), b.y)
}

const hwIDs = 64

func newHWTables(t *testing.T) (user, item *embedding.Table) {
	mk := func(seed uint64) *embedding.Table {
		tbl, err := embedding.New(embedding.Config{Dim: 8, Seed: seed, Optimizer: embedding.SparseAdam{LR: 1e-2},
			Initializer: embedding.Normal{Std: 0.1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tbl.Close() })
		return tbl
	}
	return mk(1), mk(2)
}

// hwBatches: the label is the user id's parity, which the user rows can learn.
func hwBatches(n, size int, seed int64) []hwBatch {
	rng := rand.New(rand.NewSource(seed))
	out := make([]hwBatch, n)
	for k := range out {
		u, it, y := make([]int64, size), make([]int64, 2*size), make([]float32, size)
		for i := range u {
			u[i], it[2*i], it[2*i+1] = rng.Int63n(hwIDs), rng.Int63n(hwIDs), rng.Int63n(hwIDs)
			y[i] = float32(u[i] % 2)
		}
		out[k] = hwBatch{cgotorch.MustFromSlice(u), cgotorch.MustFromSlice(it, int64(size), 2), cgotorch.MustFromSlice(y, int64(size), 1)}
	}
	return out
}

func feed[B any](bs []B) <-chan B {
	ch := make(chan B, len(bs))
	for _, b := range bs {
		ch <- b
	}
	close(ch)
	return ch
}

// newHW returns a model over fresh tables, its Adam and a Hogwild trainer of it with workers.
func newHW(t *testing.T, workers int) (*hwModel, *nn.Optimizer, *nn.Hogwild[*hwModel, hwBatch]) {
	user, item := newHWTables(t)
	cgotorch.ManualSeed(0)
	m := newHWModel(user, item)
	opt, err := nn.NewAdam(m, nn.AdamOptions{LR: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	h, err := nn.NewHogwild(m, opt, workers, func() (*hwModel, error) { return newHWModel(user, item), nil },
		(*hwModel).loss)
	if err != nil {
		t.Fatal(err)
	}
	return m, opt, h
}

func bits(t *testing.T, x *nn.Tensor) []uint32 {
	if x.DType() == cgotorch.Int64 { // a counter (BatchNorm1d's num_batches_tracked)
		v, err := cgotorch.ToSlice[int64](x)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint32
		for _, n := range v {
			out = append(out, uint32(n), uint32(n>>32))
		}
		return out
	}
	v, err := cgotorch.ToSlice[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}

func allIDs() []int64 {
	ids := make([]int64, hwIDs)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
}

// state is the bits of every dense parameter, buffer and table row.
func (m *hwModel) state(t *testing.T) [][]uint32 {
	return modelState(t, m, []*embedding.Table{m.user.Table.(*embedding.Table), m.item.Table.(*embedding.Table)})
}

// modelState is the bits of m's dense parameters and buffers and of the rows of tables.
func modelState(t *testing.T, m nn.Module, tables []*embedding.Table) [][]uint32 {
	var out [][]uint32
	for _, p := range nn.StateDict(m) {
		out = append(out, bits(t, p.Tensor))
	}
	for _, tbl := range tables {
		rows, _, err := tbl.ReadIDs(allIDs())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bits(t, rows))
	}
	return out
}

// trainSync is the synchronous loop over bs: ZeroGrad, loss, Backward, Step.
func trainSync[B any](t *testing.T, opt *nn.Optimizer, bs []B, loss func(B) *nn.Tensor) {
	for _, b := range bs {
		if err := cgotorch.TryWithScope(func() error {
			opt.ZeroGrad()
			loss(b).Backward()
			return opt.Step()
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// sameBits fails unless got and want (modelState) are equal bit for bit.
func sameBits(t *testing.T, got, want [][]uint32) {
	t.Helper()
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("state %d element %d: hogwild %v, synchronous %v", i, j,
					math.Float32frombits(got[i][j]), math.Float32frombits(want[i][j]))
			}
		}
	}
}

func TestHogwildOneWorkerEqualsSynchronous(t *testing.T) {
	bs := hwBatches(30, 32, 1)
	sync, opt, _ := newHW(t, 1)
	trainSync(t, opt, bs, sync.loss)
	hw, _, h := newHW(t, 1)
	if err := h.Train(context.Background(), feed(bs[:10])); err != nil {
		t.Fatal(err)
	}
	if err := h.Train(context.Background(), feed(bs[10:])); err != nil { // a second call resumes
		t.Fatal(err)
	}
	sameBits(t, hw.state(t), sync.state(t))
	if st, _ := sync.user.Table.Stats(); st.Step != 30 {
		t.Fatalf("synchronous user table took %d steps, want 30", st.Step)
	}
	if st, _ := hw.user.Table.Stats(); st.Step != 30 {
		t.Fatalf("hogwild user table took %d steps, want 30", st.Step)
	}
}

func meanLoss(t *testing.T, m *hwModel, bs []hwBatch) float64 {
	var sum float64
	cgotorch.NoGrad(func() {
		for _, b := range bs {
			v, err := m.loss(b).Item()
			if err != nil {
				t.Fatal(err)
			}
			sum += v
		}
	})
	return sum / float64(len(bs))
}

func TestHogwildTwoWorkersTrain(t *testing.T) {
	m, _, h := newHW(t, 2)
	test := hwBatches(4, 64, 2)
	before := meanLoss(t, m, test)
	n := 200
	if raceEnabled {
		n = 40
	}
	if err := h.Train(context.Background(), feed(hwBatches(n, 32, 3))); err != nil {
		t.Fatal(err)
	}
	after := meanLoss(t, m, test)
	if !(after < before*0.9) {
		t.Fatalf("loss %.4f before, %.4f after %d batches on 2 workers: want a decrease of 10%%", before, after, n)
	}
	// Every batch took one step of each table (one fused step per backward pass).
	if st, _ := m.user.Table.Stats(); st.Step != int64(n) {
		t.Fatalf("user table took %d steps, want %d", st.Step, n)
	}
}

// waitGoroutines waits for the goroutine count to fall to n (the runtime's own may linger).
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want at most %d", runtime.NumGoroutine(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHogwildTrainStopsItsGoroutines(t *testing.T) {
	_, _, h := newHW(t, 3)
	base := runtime.NumGoroutine()
	// Cancelled with the channel still open: Train returns the context's error, every worker gone.
	ch := make(chan hwBatch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.Train(ctx, ch) }()
	ch <- hwBatches(1, 8, 4)[0]
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Train after cancel: %v, want context.Canceled", err)
	}
	waitGoroutines(t, base)
	// A failing step stops every worker and comes back as an error.
	bad := hwBatches(6, 8, 5)
	bad[2].user = cgotorch.MustFromSlice([]float32{1, 2}) // float ids: the lookup panics
	err := h.Train(context.Background(), feed(bad))
	if !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("Train with a bad batch: %v, want ErrInvalidArgument", err)
	}
	waitGoroutines(t, base)
}

func TestNewHogwildRejects(t *testing.T) {
	user, item := newHWTables(t)
	other, _ := newHWTables(t)
	m := newHWModel(user, item)
	opt, err := nn.NewAdam(m, nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		workers int
		replica func() (*hwModel, error)
	}{
		"no workers":      {0, func() (*hwModel, error) { return newHWModel(user, item), nil }},
		"shared params":   {1, func() (*hwModel, error) { return m, nil }},
		"foreign table":   {1, func() (*hwModel, error) { return newHWModel(other, item), nil }},
		"replica failure": {1, func() (*hwModel, error) { return nil, cgotorch.ErrInvalidArgument }},
	}
	for name, c := range cases {
		if _, err := nn.NewHogwild(m, opt, c.workers, c.replica, (*hwModel).loss); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}
