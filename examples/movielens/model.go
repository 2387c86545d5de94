package main

import (
	"errors"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// Model is biased matrix factorisation: the predicted rating of item i by user u is
// mu + b_u + b_i + <p_u, q_i>, with the global mean mu of the training ratings held fixed and
// b, p, q rows of hash embedding tables keyed by the raw MovieLens ids. With Dim 0 it is the
// biases-only model mu + b_u + b_i.
type Model struct {
	nn.Container
	mu                 float64
	l2, l2Bias         float64
	userBias, itemBias *nn.Embedding
	user, item         *nn.Embedding // nil in the biases-only model
	tables             []*embedding.Table
}

// NewModel creates the tables (unnamed: nothing looks them up or saves them) with the given
// optimizer. Each table gets its own seed (seed, seed+1, ...), so that user 42 and movie 42
// do not start with the same row. l2 and l2Bias weigh the squared norms of the factor rows and
// of the biases a rating uses in the loss.
func NewModel(mu float64, dim int, opt embedding.Optimizer, l2, l2Bias float64, seed uint64) (*Model, error) {
	m := &Model{mu: mu, l2: l2, l2Bias: l2Bias}
	add := func(name string, d int, init embedding.Initializer) (*nn.Embedding, error) {
		t, err := embedding.New(embedding.Config{Dim: d, Initializer: init, Optimizer: opt, Seed: seed + uint64(len(m.tables))})
		if err != nil {
			return nil, err
		}
		m.tables = append(m.tables, t)
		e := nn.NewEmbedding(t, nn.EmbeddingOptions{})
		m.Add(name, e)
		return e, nil
	}
	var err error
	if m.userBias, err = add("user_bias", 1, embedding.Zeros{}); err != nil {
		return nil, err
	}
	if m.itemBias, err = add("item_bias", 1, embedding.Zeros{}); err != nil {
		return nil, errors.Join(err, m.Close())
	}
	if dim > 0 {
		init := embedding.Normal{Std: 0.1}
		if m.user, err = add("user", dim, init); err != nil {
			return nil, errors.Join(err, m.Close())
		}
		if m.item, err = add("item", dim, init); err != nil {
			return nil, errors.Join(err, m.Close())
		}
	}
	return m, nil
}

// Forward predicts the ratings of pairs, int64 [B, 2] of (user id, item id), as float32 [B].
func (m *Model) Forward(pairs *nn.Tensor) *nn.Tensor {
	pred, _ := m.forward(pairs)
	return pred
}

// forward returns the predictions and the L2 penalty of the rows used, summed over the batch.
func (m *Model) forward(pairs *nn.Tensor) (pred, penalty *nn.Tensor) {
	u := pairs.Narrow(1, 0, 1).Reshape(-1)
	i := pairs.Narrow(1, 1, 1).Reshape(-1)
	bu, bi := m.userBias.Forward(u), m.itemBias.Forward(i) // [B, 1]
	pred = bu.Add(bi).Reshape(-1).AddScalar(m.mu)
	penalty = bu.Square().Sum().Add(bi.Square().Sum()).MulScalar(m.l2Bias)
	if m.user != nil {
		p, q := m.user.Forward(u), m.item.Forward(i) // [B, dim]
		pred = pred.Add(p.Mul(q).SumDim([]int64{1}, false))
		penalty = penalty.Add(p.Square().Sum().Add(q.Square().Sum()).MulScalar(m.l2))
	}
	return pred, penalty
}

// Loss returns the training loss of a batch, its mean squared error plus the L2 penalty per
// rating, and the mean squared error alone.
func (m *Model) Loss(pairs, ratings *nn.Tensor) (loss, mse *nn.Tensor) {
	pred, penalty := m.forward(pairs)
	mse = cgotorch.MSELoss(pred, ratings, cgotorch.ReduceMean)
	return mse.Add(penalty.DivScalar(float64(ratings.Numel()))), mse
}

// Step applies one step of the tables' optimizer from the pending gradients.
func (m *Model) Step() error {
	var errs []error
	for _, s := range m.Steppers() {
		errs = append(errs, s.Step())
	}
	return errors.Join(errs...)
}

// Sizes returns the number of ids in the user and item bias tables.
func (m *Model) Sizes() (users, items int, err error) {
	us, err := m.userBias.Table.Stats()
	if err != nil {
		return 0, 0, err
	}
	is, err := m.itemBias.Table.Stats()
	return us.Len, is.Len, err
}

// Close closes the model's tables.
func (m *Model) Close() error {
	var errs []error
	for _, t := range m.tables {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

var _ nn.Module = (*Model)(nil)
