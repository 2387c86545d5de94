package nn_test

import (
	"context"
	"fmt"
	"iter"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// clickModel: user rows -> Linear(4, 1).
type clickModel struct {
	nn.Container
	users *nn.Embedding
	head  *nn.Linear
}

func newClickModel(users *embedding.Table) *clickModel {
	m := &clickModel{users: nn.NewEmbedding(users, nn.EmbeddingOptions{}), head: nn.NewLinear(4, 1, true)}
	m.Add("users", m.users)
	m.Add("head", m.head)
	return m
}

type clicks struct{ users, labels *nn.Tensor }

// clickBatch is batch i of the examples' data: two users, one click each way.
func clickBatch(i int64) clicks {
	return clicks{cgotorch.MustFromSlice([]int64{i % 10, i%10 + 10}), cgotorch.MustFromSlice([]float32{1, 0}, 2, 1)}
}

// newClickHogwild makes two workers that train a clickModel on users: each worker its own
// replica of the dense head, all of them the same table.
func newClickHogwild(users *embedding.Table) (*nn.Hogwild[*clickModel, clicks], error) {
	model := newClickModel(users)
	opt, err := nn.NewAdam(model, nn.AdamOptions{LR: 0.01})
	if err != nil {
		return nil, err
	}
	loss := nn.BCEWithLogits(nn.ReduceMean)
	return nn.NewHogwild(model, opt, 2,
		func() (*clickModel, error) { return newClickModel(users), nil }, // a replica: same table, own head
		func(m *clickModel, b clicks) *nn.Tensor {
			return loss(m.head.Forward(m.users.Forward(b.users)), b.labels)
		})
}

// Two goroutines train one model: each its own replica of the dense head, both the same table.
// A reader goroutine sends the batches and closes the channel at the end of the data.
func ExampleHogwild() {
	users, _ := embedding.New(embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{LR: 0.01}})
	defer users.Close()
	h, err := newClickHogwild(users)
	if err != nil {
		panic(err)
	}
	batches := make(chan clicks)
	go func() {
		defer close(batches)
		for i := int64(0); i < 100; i++ {
			batches <- clickBatch(i)
		}
	}()
	if err := h.Train(context.Background(), batches); err != nil {
		panic(err)
	}
	st, _ := users.Stats()
	fmt.Printf("%d workers, %d ids, %d table steps\n", h.Workers(), st.Len, st.Step)
	// Output:
	// 2 workers, 20 ids, 100 table steps
}

// Each worker reads its own part of the data (Hogwild's classic form): worker w trains on
// batches w, w+2, w+4, ..., drawn in its own goroutine, with no channel between them.
func ExampleHogwild_TrainEach() {
	users, _ := embedding.New(embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{LR: 0.01}})
	defer users.Close()
	h, err := newClickHogwild(users)
	if err != nil {
		panic(err)
	}
	part := func(worker int) iter.Seq[clicks] {
		return func(yield func(clicks) bool) {
			for i := int64(worker); i < 100; i += int64(h.Workers()) {
				if !yield(clickBatch(i)) {
					return // TrainEach stopped early (an error, or ctx done)
				}
			}
		}
	}
	if err := h.TrainEach(context.Background(), part); err != nil {
		panic(err)
	}
	st, _ := users.Stats()
	fmt.Printf("%d workers, %d ids, %d table steps\n", h.Workers(), st.Len, st.Step)
	// Output:
	// 2 workers, 20 ids, 100 table steps
}
