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

// TrainStep trains on one batch as the plain loop would, with the rows of both tables'
// lookups fetched in one exchange before the forward pass, and both tables stepped in one
// exchange: 4 collectives a step whatever the number of tables.
func ExampleTrainStep() {
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
	items, err := dist.NewShardedTable(g, "items", embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{}})
	if err != nil {
		log.Fatal(err)
	}
	defer items.Close()
	u, i := nn.NewEmbedding(users, nn.EmbeddingOptions{}), nn.NewEmbedding(items, nn.EmbeddingOptions{})
	model := &nn.Container{}
	model.Add("users", u)
	model.Add("items", i)
	opt, err := nn.NewAdam(model, nn.AdamOptions{})
	if err != nil {
		log.Fatal(err)
	}
	type batch struct{ users, items []int64 }
	lookups := func(b batch) []dist.Prefetch { // the model's lookups, in its order
		return []dist.Prefetch{{Table: users, IDs: cgotorch.MustFromSlice(b.users)}, {Table: items, IDs: cgotorch.MustFromSlice(b.items)}}
	}
	loss := func(b batch) (*cgotorch.Tensor, error) {
		return u.Forward(cgotorch.MustFromSlice(b.users)).Mul(i.Forward(cgotorch.MustFromSlice(b.items))).Sum(), nil
	}
	for _, b := range []batch{{[]int64{1, 2}, []int64{10, 11}}, {[]int64{2, 3}, []int64{11, 12}}} {
		before := g.Collectives()
		if _, err := dist.TrainStep(opt, lookups, loss, b); err != nil {
			log.Fatal(err)
		}
		fmt.Println("collectives:", g.Collectives()-before)
	}
	st, err := items.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("items: %d ids, %d steps\n", st.Len, st.Step)
	// Output:
	// collectives: 4
	// collectives: 4
	// items: 3 ids, 2 steps
}
