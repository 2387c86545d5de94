package nn_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// A model of two tables and dense layers saved in one call and restored exactly.
func TestModelCheckpoint(t *testing.T) {
	dir := t.TempDir()
	users, err := embedding.NewNamed("ckpt-users", embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{}})
	if err != nil {
		t.Fatal(err)
	}
	defer users.Close()
	items, err := embedding.NewNamed("ckpt-items", embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{}})
	if err != nil {
		t.Fatal(err)
	}
	defer items.Close()
	cgotorch.ManualSeed(3)
	model := nn.NewSequential(nn.NewEmbedding(users, nn.EmbeddingOptions{}), nn.NewLinear(4, 3, true), nn.NewBatchNorm1d(3))
	c := nn.NewSequential(model, nn.NewEmbedding(items, nn.EmbeddingOptions{}))
	if got := nn.Tables(c); len(got) != 2 || got[0] != users || got[1] != items {
		t.Fatalf("Tables: %v", got)
	}
	opt, err := nn.NewAdam(c, nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	step := func() {
		opt.ZeroGrad()
		ids := cgotorch.MustFromSlice([]int64{1, 2, 3, 4, 5, 6})
		out := model.Forward(ids)
		e := c.At(1).Forward(cgotorch.MustFromSlice([]int64{7, 8, 9}))
		out.Sum().Add(e.Sum()).Backward()
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
	}
	step()
	step()
	state := func() (map[string][]float32, [2]*embedding.Snapshot) {
		m := map[string][]float32{}
		for _, p := range nn.StateDict(c) {
			v, _ := cgotorch.ToSlice[float32](p.Tensor)
			m[p.Name] = v
		}
		a, _ := users.Export()
		b, _ := items.Export()
		return m, [2]*embedding.Snapshot{a, b}
	}
	if err := nn.SaveCheckpoint(context.Background(), dir, c); err != nil {
		t.Fatal(err)
	}
	wantDense, wantTables := state()
	step()
	if err := nn.LoadCheckpoint(context.Background(), dir, c); err != nil {
		t.Fatal(err)
	}
	gotDense, gotTables := state()
	if !reflect.DeepEqual(gotDense, wantDense) {
		t.Errorf("dense state differs after LoadCheckpoint")
	}
	for i := range gotTables {
		g, _ := cgotorch.ToSlice[float32](gotTables[i].Rows)
		w, _ := cgotorch.ToSlice[float32](wantTables[i].Rows)
		if !reflect.DeepEqual(g, w) || gotTables[i].Step != wantTables[i].Step {
			t.Errorf("table %d differs after LoadCheckpoint", i)
		}
	}
	// A model without the dense layers does not fit: nothing changes.
	other := nn.NewSequential(nn.NewEmbedding(users, nn.EmbeddingOptions{}), nn.NewLinear(4, 5, true))
	before, _ := users.Export()
	if err := nn.LoadCheckpoint(context.Background(), dir, other); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("LoadCheckpoint into another model: %v", err)
	}
	after, _ := users.Export()
	if a, b := after.Step, before.Step; a != b {
		t.Errorf("a failed load changed the table")
	}
	if _, err := os.Stat(dir + "/manifest.json"); err != nil {
		t.Error(err)
	}
}
