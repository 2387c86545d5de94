// Command quickstart is the program of the README: a hash embedding table keyed by raw ids,
// a linear head, and training steps that update both.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	// A table of 8-wide rows for any int64 id (no vocabulary size), updated by SparseAdam.
	items, err := embedding.NewNamed("quickstart-items", embedding.Config{Dim: 8, Optimizer: embedding.SparseAdam{LR: 0.05}})
	if err != nil {
		return err
	}
	defer items.Close()
	model := nn.NewSequential(nn.NewEmbedding(items, nn.EmbeddingOptions{}), nn.NewLinear(8, 1, true))
	opt, err := nn.NewAdam(model, nn.DefaultAdamOptions()) // one Step updates the head and the table
	if err != nil {
		return err
	}

	ids := cgotorch.MustFromSlice([]int64{1180210, 42, 7, 42}) // raw ids; 42 twice
	clicks := cgotorch.MustFromSlice([]float32{1, 0, 1, 0}, 4, 1)
	loss := nn.BCEWithLogits(nn.ReduceMean)
	for step := 0; step < 20; step++ {
		opt.ZeroGrad()
		logits := model.Forward(ids) // ids [4] -> rows [4 8] (new ids are inserted) -> [4 1]
		l := loss(logits, clicks)
		l.Backward()
		if err := opt.Step(); err != nil {
			return err
		}
		if v, _ := l.Item(); step%10 == 0 {
			fmt.Fprintf(out, "step %d: logits %v, %d ids in the table, loss %.4f\n", step, logits.Shape(), items.Len(), v)
		}
	}
	return nil
}
