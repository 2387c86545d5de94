package nn_test

import (
	"context"
	"errors"
	"math/rand"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// hwcModel is hwModel's click model with its two fields pooled by one EmbeddingBagCollection
// (a user bag of one id, an item bag of two, both mean).
type hwcModel struct {
	nn.Container
	bags *nn.EmbeddingBagCollection
	mlp  *nn.Sequential
}

func newHWCModel(t *testing.T, user, item *embedding.Table) *hwcModel {
	bags, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{
		{Name: "user", Table: user, Mode: embedding.Mean}, {Name: "item", Table: item, Mode: embedding.Mean}}, nn.EmbeddingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := &hwcModel{bags: bags,
		mlp: nn.NewSequential(nn.NewLinear(16, 8, true), nn.NewBatchNorm1d(8), &nn.ReLU{}, nn.NewLinear(8, 1, true))}
	m.Add("bags", m.bags)
	m.Add("mlp", m.mlp)
	return m
}

type hwcBatch struct {
	in nn.KeyedJagged
	y  *nn.Tensor
}

func (m *hwcModel) loss(b hwcBatch) *nn.Tensor {
	return nn.BCEWithLogits(nn.ReduceMean)(m.mlp.Forward(m.bags.Forward(b.in)), b.y)
}

// hwcBatches are hwBatches' batches as keyed bags: the label is the user id's parity.
func hwcBatches(n, size int, seed int64) []hwcBatch {
	rng := rand.New(rand.NewSource(seed))
	out := make([]hwcBatch, n)
	for k := range out {
		vals, lens, y := make([]int64, 3*size), make([]int64, 2*size), make([]float32, size)
		for i := 0; i < size; i++ {
			vals[i], vals[size+2*i], vals[size+2*i+1] = rng.Int63n(hwIDs), rng.Int63n(hwIDs), rng.Int63n(hwIDs)
			lens[i], lens[size+i] = 1, 2
			y[i] = float32(vals[i] % 2)
		}
		out[k] = hwcBatch{nn.KeyedJagged{Keys: []string{"user", "item"}, Values: cgotorch.MustFromSlice(vals),
			Lengths: cgotorch.MustFromSlice(lens)}, cgotorch.MustFromSlice(y, int64(size), 1)}
	}
	return out
}

// newHWC returns a collection model over fresh tables, its Adam and a Hogwild trainer of it.
func newHWC(t *testing.T, workers int) (*hwcModel, *nn.Optimizer, *nn.Hogwild[*hwcModel, hwcBatch]) {
	user, item := newHWTables(t)
	cgotorch.ManualSeed(0)
	m := newHWCModel(t, user, item)
	opt, err := nn.NewAdam(m, nn.AdamOptions{LR: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	h, err := nn.NewHogwild(m, opt, workers, func() (*hwcModel, error) { return newHWCModel(t, user, item), nil },
		(*hwcModel).loss)
	if err != nil {
		t.Fatal(err)
	}
	return m, opt, h
}

func (m *hwcModel) state(t *testing.T) [][]uint32 {
	var tables []*embedding.Table
	for _, f := range m.bags.Features() {
		tables = append(tables, f.Table.(*embedding.Table))
	}
	return modelState(t, m, tables)
}

func TestHogwildCollectionOneWorkerEqualsSynchronous(t *testing.T) {
	bs := hwcBatches(30, 32, 1)
	sync, opt, _ := newHWC(t, 1)
	trainSync(t, opt, bs, sync.loss)
	hw, _, h := newHWC(t, 1)
	if err := h.Train(context.Background(), feed(bs)); err != nil {
		t.Fatal(err)
	}
	sameBits(t, hw.state(t), sync.state(t))
	for _, f := range hw.bags.Features() {
		if st, _ := f.Table.Stats(); st.Step != 30 {
			t.Fatalf("hogwild table %q took %d steps, want 30", f.Name, st.Step)
		}
	}
}

func TestHogwildCollectionTwoWorkersTrain(t *testing.T) {
	m, _, h := newHWC(t, 2)
	test := hwcBatches(4, 64, 2)
	meanLoss := func() float64 {
		var sum float64
		cgotorch.NoGrad(func() {
			for _, b := range test {
				v, err := m.loss(b).Item()
				if err != nil {
					t.Fatal(err)
				}
				sum += v
			}
		})
		return sum / float64(len(test))
	}
	before := meanLoss()
	n := 200
	if raceEnabled {
		n = 40
	}
	if err := h.Train(context.Background(), feed(hwcBatches(n, 32, 3))); err != nil {
		t.Fatal(err)
	}
	if after := meanLoss(); !(after < before*0.9) {
		t.Fatalf("loss %.4f before, %.4f after %d batches on 2 workers: want a decrease of 10%%", before, after, n)
	}
	for _, f := range m.bags.Features() { // one fused step of each table per backward pass
		if st, _ := f.Table.Stats(); st.Step != int64(n) {
			t.Fatalf("table %q took %d steps, want %d", f.Name, st.Step, n)
		}
	}
}

func TestNewHogwildCollectionRejectsForeignTable(t *testing.T) {
	user, item := newHWTables(t)
	other, _ := newHWTables(t)
	m := newHWCModel(t, user, item)
	opt, err := nn.NewAdam(m, nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	_, err = nn.NewHogwild(m, opt, 1, func() (*hwcModel, error) { return newHWCModel(t, user, other), nil }, (*hwcModel).loss)
	if !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("a replica's collection over a foreign table: %v, want ErrInvalidArgument", err)
	}
}
