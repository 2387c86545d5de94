package nn_test

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// TestStepSameBitsOnTwoThreads: the synchronous step gives the same bits on 1 and 2 intra-op
// threads: the tables step side by side (each exactly as on one thread), and the dense ops of
// this size, with their backward nodes, run on one thread. A CTR-like model (4 tables of dim 16
// -> Linear(64, 64) -> ReLU -> Linear(64, 1)), batch 2,048: its activations (131,072 floats),
// bias gradient sums and Adam updates are of the sizes libtorch splits between threads. Before,
// the two runs' MLP weights differed after a few steps.
func TestStepSameBitsOnTwoThreads(t *testing.T) {
	prev := cgotorch.NumThreads()
	defer func() { _ = cgotorch.SetNumThreads(prev) }()
	one, two := trainThreads(t, 1), trainThreads(t, 2)
	for name, v := range one {
		if !slices.Equal(v, two[name]) {
			t.Errorf("%s differs between 1 and 2 threads", name)
		}
	}
}

// trainThreads trains the model 4 steps at threads intra-op threads from fixed seeds and returns
// its parameters and the tables' rows of the ids it saw, as bits.
func trainThreads(t *testing.T, threads int) map[string][]float32 {
	t.Helper()
	if err := cgotorch.SetNumThreads(threads); err != nil {
		t.Fatal(err)
	}
	const fields, dim, batch, ids = 4, 16, 2048, 5000
	cgotorch.ManualSeed(7)
	var tables []*embedding.Table
	for f := 0; f < fields; f++ {
		tbl, err := embedding.New(embedding.Config{Dim: dim, Seed: uint64(f + 1), Optimizer: embedding.SparseAdam{LR: 1e-2},
			Initializer: embedding.Normal{Std: 0.1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tbl.Close() })
		tables = append(tables, tbl)
	}
	m := newFieldsModel(tables, nn.NewSequential(nn.NewLinear(fields*dim, 64, true), &nn.ReLU{}, nn.NewLinear(64, 1, true)))
	opt, err := nn.NewAdam(m, nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	loss := nn.BCEWithLogits(nn.ReduceMean)
	bs, labels := clickBatches(fields, batch, ids)
	for k := 0; k < 4; k++ {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			opt.ZeroGrad()
			loss(m.forwardFields(bs[k]), labels[k]).Backward()
			if err := opt.Step(); err != nil {
				t.Fatal(err)
			}
		})
	}
	out := map[string][]float32{}
	for _, p := range m.Parameters() {
		out[p.Name] = floats(t, p.Tensor)
	}
	seen := make([]int64, ids)
	for i := range seen {
		seen[i] = int64(i)
	}
	rng := rand.New(rand.NewSource(1))
	rng.Shuffle(len(seen), func(i, j int) { seen[i], seen[j] = seen[j], seen[i] })
	for f, tbl := range tables {
		rows, err := tbl.LookupIDs(seen[:512])
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("table%d", f)] = floats(t, rows)
		rows.Close()
	}
	return out
}

func floats(t *testing.T, x *cgotorch.Tensor) []float32 {
	t.Helper()
	v, err := cgotorch.ToSlice[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
