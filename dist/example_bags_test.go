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

// An EmbeddingBagCollection over sharded tables, TorchRec's sharded collection: its Forward
// fetches the rows of all three features (two tables) in one exchange of ids and one of rows,
// and the optimizer's Step sends both tables' gradients in one more and settles them in
// another: 4 collectives a plain training step, whatever the number of tables and features.
func ExampleShardedTable_ForwardBags() {
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
	items, err := dist.NewShardedTable(g, "items", embedding.Config{Dim: 8, Optimizer: embedding.SparseAdam{}})
	if err != nil {
		log.Fatal(err)
	}
	defer items.Close()
	bags, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{
		{Name: "user", Table: users, Mode: embedding.Sum},
		{Name: "history", Table: items, Mode: embedding.Mean},
		{Name: "candidate", Table: items, Mode: embedding.Sum},
	}, nn.EmbeddingOptions{})
	if err != nil {
		log.Fatal(err)
	}
	model := &nn.Container{}
	model.Add("bags", bags)
	opt, err := nn.NewAdam(model, nn.AdamOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// two samples: user 1 saw items 10 and 11, candidate 12; user 2 saw item 11, candidate 13
	in := nn.KeyedJagged{Keys: []string{"user", "history", "candidate"},
		Values:  cgotorch.MustFromSlice([]int64{1, 2, 10, 11, 11, 12, 13}),
		Lengths: cgotorch.MustFromSlice([]int64{1, 1, 2, 1, 1, 1})}
	before := g.Collectives()
	opt.ZeroGrad()
	out := bags.Forward(in) // [2, 4+8+8]
	out.Square().Sum().Backward()
	if err := opt.Step(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("output:", out.Shape(), "collectives:", g.Collectives()-before)
	st, err := items.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("items: %d ids, %d steps\n", st.Len, st.Step)
	// Output:
	// output: [2 20] collectives: 4
	// items: 4 ids, 1 steps
}
