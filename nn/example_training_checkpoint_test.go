package nn_test

import (
	"context"
	"fmt"
	"os"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// Stopping a training run and resuming it where it stopped: the checkpoint carries the model,
// the optimizer's moments and step counts and the random generator's state (dropout), so the
// resumed steps give the losses the run would have given without stopping.
func ExampleSaveTrainingCheckpoint() {
	dir, _ := os.MkdirTemp("", "train")
	defer os.RemoveAll(dir)
	items, err := embedding.NewNamed("example-train-items", embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{LR: 0.1}})
	if err != nil {
		panic(err)
	}
	defer items.Close()
	cgotorch.ManualSeed(1)
	model := nn.NewSequential(nn.NewEmbedding(items, nn.EmbeddingOptions{}), nn.NewDropout(0.3), nn.NewLinear(4, 1, true))
	opt, err := nn.NewAdam(model, nn.DefaultAdamOptions())
	if err != nil {
		panic(err)
	}
	ids := cgotorch.MustFromSlice([]int64{3, 1, 4, 1, 5})
	clicks := cgotorch.MustFromSlice([]float32{1, 0, 0, 0, 1}, 5, 1)
	step := func() float64 {
		opt.ZeroGrad()
		loss := nn.BCEWithLogits(nn.ReduceMean)(model.Forward(ids), clicks)
		loss.Backward()
		if err := opt.Step(); err != nil {
			panic(err)
		}
		v, _ := loss.Item()
		return v
	}

	step()
	if err := nn.SaveTrainingCheckpoint(context.Background(), dir, model, opt, embedding.SaveOptions{}); err != nil {
		panic(err)
	}
	before := []float64{step(), step()}
	if err := nn.LoadTrainingCheckpoint(context.Background(), dir, model, opt, nil); err != nil {
		panic(err)
	}
	after := []float64{step(), step()}
	fmt.Println(before[0] == after[0], before[1] == after[1])
	// Output:
	// true true
}
