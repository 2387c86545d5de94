package nn_test

import (
	"fmt"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// ranker is a DeepFM-like model: a Container whose children are an Embedding, an EmbeddingBag
// (a Module whose Forward takes ids and offsets) and a dense head.
type ranker struct {
	nn.Container
	users *nn.Embedding
	tags  *nn.EmbeddingBag
	head  *nn.Linear
}

func (r *ranker) Forward(users, tags, offsets *nn.Tensor) *nn.Tensor {
	x := cgotorch.Cat([]*nn.Tensor{r.users.Forward(users), r.tags.Forward(tags, offsets)}, 1)
	return r.head.Forward(x)
}

// One optimizer made from the whole model trains the head and both tables, and SetLR reaches
// the tables.
func ExampleEmbeddingBag() {
	users, _ := embedding.NewNamed("example-ranker-users", embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{}})
	defer users.Close()
	tags, _ := embedding.NewNamed("example-ranker-tags", embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{}})
	defer tags.Close()
	m := &ranker{users: nn.NewEmbedding(users, nn.EmbeddingOptions{}),
		tags: nn.NewEmbeddingBag(tags, embedding.Mean, nn.EmbeddingOptions{}), head: nn.NewLinear(8, 1, true)}
	m.Add("users", m.users)
	m.Add("tags", m.tags)
	m.Add("head", m.head)

	opt, err := nn.NewAdam(m, nn.AdamOptions{LR: 0.01}) // betas and eps: PyTorch's defaults
	if err != nil {
		panic(err)
	}
	clicks := cgotorch.MustFromSlice([]float32{1, 0}, 2, 1)
	for step := 0; step < 3; step++ {
		opt.ZeroGrad()
		logits := m.Forward(cgotorch.MustFromSlice([]int64{7, 42}),
			cgotorch.MustFromSlice([]int64{100, 101, 102}), cgotorch.MustFromSlice([]int64{0, 2}))
		nn.BCEWithLogits(nn.ReduceMean)(logits, clicks).Backward()
		if err := opt.Step(); err != nil {
			panic(err)
		}
	}
	if err := opt.SetLR(0.001); err != nil {
		panic(err)
	}
	for _, t := range nn.Tables(m) {
		st, _ := t.Stats()
		fmt.Printf("%s: %d ids, %d steps, lr %g\n", t.Name(), st.Len, st.Step, t.LR())
	}
	// Output:
	// example-ranker-users: 2 ids, 3 steps, lr 0.001
	// example-ranker-tags: 3 ids, 3 steps, lr 0.001
}
