package outside

import (
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// A TrainPipeline's Progress called inside cgotorch.TryWithScope, the README's way to free a
// training step's temporaries, with every batch's ids made outside any scope, trains on. The
// rows the first Progress fetched on the caller's goroutine (and the patch's rows) once
// belonged to the caller's scope, which freed them, so the next Progress failed with "tensor
// was released".
func TestPipelineProgressInsideScope(t *testing.T) {
	g := oneRank(t)
	users, err := dist.NewShardedTable(g, "users", embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	defer users.Close()
	model := nn.NewEmbedding(users, nn.EmbeddingOptions{})
	opt, err := nn.NewAdam(model, nn.AdamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	batches := [][]int64{{1, 2}, {2, 3}, {3, 4, 5}}
	ids := make([]*cgotorch.Tensor, len(batches)) // outside any scope, kept for the run
	for i, b := range batches {
		ids[i] = cgotorch.MustFromSlice(b)
	}
	p, err := dist.NewTrainPipeline(opt, func(i int) []dist.Prefetch {
		return []dist.Prefetch{{Table: users, IDs: ids[i]}}
	}, func(i int) (*cgotorch.Tensor, error) {
		return model.Forward(ids[i]).Square().Sum(), nil
	}, dist.TrainPipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range batches {
		if err := cgotorch.TryWithScope(func() error { _, _, err := p.Progress(i); return err }); err != nil {
			t.Fatalf("Progress(%d) inside a scope: %v", i, err)
		}
	}
	if err := cgotorch.TryWithScope(func() error { _, _, err := p.Flush(); return err }); err != nil {
		t.Fatalf("Flush inside a scope: %v", err)
	}
}
