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
	if err := items.Save(filepath.Join(dir, "ckpt")); err != nil {
		log.Fatal(err) // every rank gets the error
	}
	items.Close()

	loaded, err := dist.LoadShardedTable(g, filepath.Join(dir, "ckpt"))
	if err != nil {
		log.Fatal(err)
	}
	defer loaded.Close()
	n, err := loaded.Len()
	fmt.Println(loaded.Name(), n, err)
	// Output: items 3 <nil>
}
