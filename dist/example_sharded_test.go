package dist_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// A sharded table trained through nn.Embedding and the model's optimizer. The group has one
// rank here; with more, every process runs the same code on its own slice of the batch, and
// each id's row lives on the rank dist.Owner gives.
func ExampleShardedTable() {
	dir, _ := os.MkdirTemp("", "dist-example")
	defer os.RemoveAll(dir)
	g, err := dist.New(dist.Options{WorldSize: 1, Store: dist.FileStore(filepath.Join(dir, "store"))})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	users, err := dist.NewShardedTable(g, "users", embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{LR: 0.1}})
	if err != nil {
		log.Fatal(err) // a rank with another Config fails here, as every rank does
	}
	defer users.Close()

	model := nn.NewEmbedding(users, nn.EmbeddingOptions{}) // model code, as over an *embedding.Table
	opt, err := nn.NewAdam(model, nn.AdamOptions{})
	if err != nil {
		log.Fatal(err)
	}
	err = cgotorch.TryWithScope(func() error {
		model.Forward(cgotorch.MustFromSlice([]int64{7, 42, 7})).Sum().Backward()
		return opt.Step() // the gradients go to the owners of 7 and 42, which step
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := users.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d ids, %d step; id 42 is on rank %d\n", st.Len, st.Step, dist.Owner(42, g.WorldSize()))
	// Output: 2 ids, 1 step; id 42 is on rank 0
}

// A sharded table saved into one directory and loaded back; a table saved by N ranks loads
// into any number of ranks, each keeping the ids it owns.
func ExampleShardedTable_Save() {
	dir, _ := os.MkdirTemp("", "dist-example")
	defer os.RemoveAll(dir)
	g, err := dist.New(dist.Options{WorldSize: 1, Store: dist.FileStore(filepath.Join(dir, "store"))})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	items, err := dist.NewShardedTable(g, "items", embedding.Config{Dim: 2, Optimizer: embedding.SparseAdam{}})
	if err != nil {
		log.Fatal(err)
	}
	ids := cgotorch.MustFromSlice([]int64{3, 5, 8})
	defer ids.Close()
	rows, _ := items.Lookup(ids) // inserts the ids on their owners
	rows.Close()
	if err := items.Save(context.Background(), filepath.Join(dir, "ckpt")); err != nil {
		log.Fatal(err) // every rank gets the error
	}
	items.Close()

	loaded, err := dist.LoadShardedTable(context.Background(), g, filepath.Join(dir, "ckpt"))
	if err != nil {
		log.Fatal(err)
	}
	defer loaded.Close()
	n, err := loaded.Len()
	fmt.Println(loaded.Name(), n, err)
	// Output: items 3 <nil>
}

// A model with both parts: a sharded table, and dense layers in a DataParallel that sums the
// gradients (SumGradients), as the tables' owners do. Each rank's loss is its slice's summed
// loss divided by the global batch size: both parts then train as one process would on the
// whole batch. The group has one rank here.
func ExampleDataParallelOptions_shardedTables() {
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

	cgotorch.ManualSeed(1)
	emb, head := nn.NewEmbedding(users, nn.EmbeddingOptions{}), nn.NewLinear(4, 1, true)
	var model nn.Container
	model.Add("users", emb)
	model.Add("head", head)
	ddp, err := dist.NewDataParallel(g, &model, dist.DataParallelOptions{SumGradients: true})
	if err != nil {
		log.Fatal(err)
	}
	opt, err := nn.NewAdam(ddp, nn.AdamOptions{LR: 0.05}) // Adam on head, Adagrad on users
	if err != nil {
		log.Fatal(err)
	}
	const globalBatch = 6 // the samples of all the ranks' slices

	// this rank's slice
	ids, y := cgotorch.MustFromSlice([]int64{1, 2, 3, 4, 5, 6}), cgotorch.Ones([]int64{6, 1})
	var first, last float64
	for step := range 30 {
		opt.ZeroGrad()
		loss := nn.MSE(nn.ReduceSum)(head.Forward(emb.Forward(ids)), y).DivScalar(globalBatch)
		loss.Backward()
		if err := opt.Step(); err != nil { // sums the dense gradients, sends the rows' to the owners
			log.Fatal(err)
		}
		v, _ := loss.Item()
		if step == 0 {
			first = v
		}
		last = v
	}
	fmt.Println("loss went down:", last < first)
	// Output: loss went down: true
}
