package nn_test

import (
	"fmt"

	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// A warm-up over three steps for the dense layers and an embedding table together.
func ExampleScheduler() {
	items, err := embedding.New(embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{LR: 0.01}})
	if err != nil {
		panic(err)
	}
	defer items.Close()
	model := nn.NewSequential(nn.NewEmbedding(items, nn.EmbeddingOptions{}), nn.NewLinear(4, 1, true))
	opt, err := nn.NewAdam(model, nn.DefaultAdamOptions()) // lr 1e-3; the table keeps its 0.01
	if err != nil {
		panic(err)
	}
	sched, err := nn.NewScheduler(opt, nn.LinearLR{StartFactor: 0.25, EndFactor: 1, TotalIters: 3})
	if err != nil {
		panic(err)
	}
	for step := 0; step < 4; step++ {
		fmt.Printf("step %d: dense %.6f, table %.4f\n", step, opt.LR(), items.LR())
		// ... a training step: forward, backward, opt.Step() ...
		if err := sched.Step(); err != nil {
			panic(err)
		}
	}
	// Output:
	// step 0: dense 0.000250, table 0.0025
	// step 1: dense 0.000500, table 0.0050
	// step 2: dense 0.000750, table 0.0075
	// step 3: dense 0.001000, table 0.0100
}
