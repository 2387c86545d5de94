package nn_test

import (
	"fmt"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// An EmbeddingBagCollection pools several features' bags, each from its table, in one call: the
// input holds every feature's ids and the bags' lengths, feature after feature, as TorchRec's
// KeyedJaggedTensor does.
func ExampleEmbeddingBagCollection() {
	genres, _ := embedding.New(embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1},
		Optimizer: embedding.Adagrad{LR: 0.1}})
	defer genres.Close()
	tags, _ := embedding.New(embedding.Config{Dim: 3, Initializer: embedding.Constant{Value: 0.5},
		Optimizer: embedding.Adagrad{LR: 0.1}})
	defer tags.Close()
	bags, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{
		{Name: "genres", Table: genres, Mode: embedding.Sum},
		{Name: "tags", Table: tags, Mode: embedding.Mean},
	}, nn.EmbeddingOptions{})
	if err != nil {
		panic(err)
	}
	cgotorch.WithScope(func(*cgotorch.Scope) {
		// Two samples: genres {10, 11} and {}, tags {7} and {7, 8, 9}.
		in := nn.KeyedJagged{
			Keys:    []string{"genres", "tags"},
			Values:  cgotorch.MustFromSlice([]int64{10, 11, 7, 7, 8, 9}),
			Lengths: cgotorch.MustFromSlice([]int64{2, 0, 1, 3}),
		}
		out := bags.Forward(in) // [2, 2+3]
		fmt.Println(out.Shape())
		v, _ := cgotorch.ToSlice[float32](out)
		fmt.Println(v)
		out.Sum().Backward()
		if err := bags.Step(); err != nil { // both tables, one call
			panic(err)
		}
	})
	// Output:
	// [2 5]
	// [2 2 0.5 0.5 0.5 0 0 0.5 0.5 0.5]
}

// An EmbeddingCollection looks up several features' ids without pooling: one [N, Dim] tensor
// per feature, its rows in the order of the feature's ids (the lengths say where each sample's
// sequence ends, as in TorchRec's JaggedTensor).
func ExampleEmbeddingCollection() {
	items, _ := embedding.New(embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1},
		Optimizer: embedding.SGD{LR: 0.5}})
	defer items.Close()
	seqs, err := nn.NewEmbeddingCollection([]nn.EmbeddingFeature{
		{Name: "clicked", Table: items}, {Name: "bought", Table: items}, // one table, two features
	}, nn.EmbeddingOptions{})
	if err != nil {
		panic(err)
	}
	cgotorch.WithScope(func(*cgotorch.Scope) {
		// Two samples: clicked {3, 4} and {4}, bought {} and {3}.
		in := nn.KeyedJagged{
			Keys:    []string{"clicked", "bought"},
			Values:  cgotorch.MustFromSlice([]int64{3, 4, 4, 3}),
			Lengths: cgotorch.MustFromSlice([]int64{2, 1, 0, 1}),
		}
		out := seqs.Forward(in)
		fmt.Println(out[0].Shape(), out[1].Shape())
		out[0].Sum().Add(out[1].Sum()).Backward()
		if err := seqs.Step(); err != nil {
			panic(err)
		}
	})
	rows, _, _ := items.ReadIDs([]int64{3, 4})
	v, _ := cgotorch.ToSlice[float32](rows)
	fmt.Println(v) // id 3 seen twice, id 4 twice: 1 - 0.5*2
	// Output:
	// [3 2] [1 2]
	// [0 0 0 0]
}
