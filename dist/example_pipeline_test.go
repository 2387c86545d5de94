package dist_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// A TrainPipeline fetches the next batch's rows while the current batch trains. Each batch
// here is a slice of ids; the pipeline is told which lookups the model runs on a batch.
func ExampleTrainPipeline() {
	dir, _ := os.MkdirTemp("", "dist-example")
	defer os.RemoveAll(dir)
	g, err := dist.New(dist.Options{WorldSize: 1, Store: dist.FileStore(filepath.Join(dir, "store"))})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	users, err := dist.NewShardedTable(g, "users", embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{LR: 0.1}})
	if err != nil {
		log.Fatal(err)
	}
	defer users.Close()
	model := nn.NewEmbedding(users, nn.EmbeddingOptions{})
	opt, err := nn.NewAdam(model, nn.AdamOptions{})
	if err != nil {
		log.Fatal(err)
	}
	p, err := dist.NewTrainPipeline(opt, func(b []int64) []dist.Prefetch {
		return []dist.Prefetch{{Table: users, IDs: cgotorch.MustFromSlice(b)}} // model's one lookup
	}, func(b []int64) (*cgotorch.Tensor, error) {
		return model.Forward(cgotorch.MustFromSlice(b)).Square().Sum(), nil
	}, dist.TrainPipelineOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	trained := 0
	for _, b := range [][]int64{{1, 2}, {2, 3}, {3, 4, 5}} {
		_, ok, err := p.Progress(b) // trains on the previous batch
		if err != nil {
			log.Fatal(err)
		}
		trained += map[bool]int{true: 1}[ok]
	}
	if _, ok, err := p.Flush(); err != nil || !ok { // the last batch
		log.Fatal(err)
	}
	st, err := users.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d batches trained by Progress, 1 by Flush: %d ids, %d steps\n", trained, st.Len, st.Step)
	// Output: 2 batches trained by Progress, 1 by Flush: 5 ids, 3 steps
}
