package dist

// Several sharded tables stepped together, in one exchange of gradients (StepAll).

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() {
	scenarios["joint-bad"] = scenarioJointBad
}

// itemsConfig is the second table of the joint tests: another width and optimizer than the
// first (trainConfigs).
var itemsConfig = embedding.Config{Dim: 3, Seed: 43, Initializer: embedding.Normal{Std: 0.1}, Optimizer: embedding.SGD{LR: 0.02, Momentum: 0.5}}

// jointModel looks up users (one id per sample) and items (a bag per sample) and projects the
// concatenated rows.
type jointModel struct {
	nn.Container
	users *nn.Embedding
	items *nn.EmbeddingBag
}

func newJointModel(users, items nn.EmbeddingTable) *jointModel {
	m := &jointModel{users: nn.NewEmbedding(users, nn.EmbeddingOptions{}), items: nn.NewEmbeddingBag(items, embedding.Sum, nn.EmbeddingOptions{})}
	m.Add("users", m.users)
	m.Add("items", m.items)
	return m
}

// loss is the squared error summed over samples (so that the ranks' gradients add up to the
// whole batch's).
func (m *jointModel) loss(samples []sample) (*cgotorch.Tensor, error) {
	ids, offs, one := sampleIDs(samples)
	ys := make([]float32, len(samples))
	for i, s := range samples {
		ys[i] = s.y
	}
	x := cgotorch.Cat([]*cgotorch.Tensor{m.users.Forward(cgotorch.MustFromSlice(one)),
		m.items.Forward(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offs))}, 1)
	proj := cgotorch.MustFromSlice([]float32{0.5, -1, 0.25, 2, 1, -0.5, 0.75}, trainDim+3, 1)
	return x.MM(proj).Sub(cgotorch.MustFromSlice(ys, int64(len(ys)), 1)).Square().Sum(), nil
}

// lookups are the model's lookups of samples, in the order loss runs them.
func (m *jointModel) lookups(samples []sample) []Prefetch {
	ids, _, one := sampleIDs(samples)
	return []Prefetch{{Table: m.users.Table.(*ShardedTable), IDs: cgotorch.MustFromSlice(one)},
		{Table: m.items.Table.(*ShardedTable), IDs: cgotorch.MustFromSlice(ids)}}
}

// Stepping several sharded tables together keeps each table's own Step semantics, and the ranks
// must step the same tables: a NaN in one table's pending gradients on rank 1 refuses that
// table on every rank (ErrBadInput there, ErrMismatch on rank 0; its shards unchanged, its
// gradients still pending) while the other table steps; ranks that pass other tables, or the
// same in another order, fail alike with ErrMismatch and change nothing; and the group still
// works after both.
func TestShardedTablesStepTogetherRefusals(t *testing.T) {
	requirePassed(t, runSharded(t, "joint-bad", 2, time.Minute))
}

func scenarioJointBad(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	users, err := NewShardedTable(g, "users", trainConfigs["adagrad"])
	if err != nil {
		return err
	}
	defer users.Close()
	items, err := NewShardedTable(g, "items", itemsConfig)
	if err != nil {
		return err
	}
	defer items.Close()
	m := newJointModel(users, items)
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		return err
	}
	bad := g.Rank() == 1
	// gradients for both tables, a NaN among the users' on rank 1
	pend := func(nan bool) error {
		opt.ZeroGrad()
		return cgotorch.Try(func() {
			scale := 1.0
			if nan {
				scale = math.NaN()
			}
			u := m.users.Forward(cgotorch.MustFromSlice([]int64{1006, 1012, 1018}))
			i := m.items.Forward(cgotorch.MustFromSlice([]int64{1024, 1030}), cgotorch.MustFromSlice([]int64{0}))
			u.Sum().MulScalar(scale).Add(i.Sum()).Backward()
		})
	}
	if err := pend(bad); err != nil {
		return err
	}
	before, err := shardState(users)
	if err != nil {
		return err
	}
	err = opt.Step()
	switch {
	case bad && (!errors.Is(err, embedding.ErrBadInput) || errors.Is(err, ErrMismatch)):
		return fmt.Errorf("NaN on this rank: %v, want ErrBadInput alone", err)
	case !bad && (!errors.Is(err, ErrMismatch) || errors.Is(err, embedding.ErrBadInput)):
		return fmt.Errorf("NaN on rank 1: %v, want ErrMismatch alone", err)
	}
	fmt.Printf("rank %d: a NaN in one table: %v\n", g.Rank(), err)
	if err := steps(users, 0, items, 1); err != nil {
		return err
	}
	if after, err := shardState(users); err != nil || after != before {
		return fmt.Errorf("the refused table's shard changed (%v)", err)
	}
	if ids, grads, err := users.cache.PendingGrad(); err != nil || ids.Numel() == 0 {
		return fmt.Errorf("the refused table's gradients are no longer pending (%v)", err)
	} else {
		ids.Close()
		grads.Close()
	}
	// other tables, or another order, on rank 1
	if err := pend(false); err != nil {
		return err
	}
	for _, other := range [][]*ShardedTable{{items, users}, {users}} {
		order := []*ShardedTable{users, items}
		if bad {
			order = other
		}
		err := StepAll(order)
		if !errors.Is(err, ErrMismatch) {
			return fmt.Errorf("ranks stepping other tables: %v, want ErrMismatch", err)
		}
		fmt.Printf("rank %d: other tables: %v\n", g.Rank(), err)
		if err := steps(users, 0, items, 1); err != nil {
			return err
		}
	}
	if err := StepAll([]*ShardedTable{users, items, users}); err != nil { // the group still works
		return err
	}
	return steps(users, 1, items, 2)
}

// steps checks the step counts of two sharded tables.
func steps(a *ShardedTable, na int64, b *ShardedTable, nb int64) error {
	for _, c := range []struct {
		t *ShardedTable
		n int64
	}{{a, na}, {b, nb}} {
		st, err := c.t.Stats()
		if err != nil {
			return err
		}
		if st.Step != c.n {
			return fmt.Errorf("table %q took %d steps, want %d", c.t.name, st.Step, c.n)
		}
	}
	return nil
}
