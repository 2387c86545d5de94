package nn_test

import (
	"errors"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// bagModel is a DeepFM-like model: a plain Container with an Embedding and an EmbeddingBag
// (a Module of two inputs) as children, beside a dense head.
type bagModel struct {
	nn.Container
	users *nn.Embedding
	tags  *nn.EmbeddingBag
	head  *nn.Linear
}

func newBagModel(t *testing.T, name string, sgd float64) *bagModel {
	t.Helper()
	table := func(suffix string) *embedding.Table {
		tab, err := embedding.NewNamed(name+suffix, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: sgd}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tab.Close() })
		return tab
	}
	m := &bagModel{users: nn.NewEmbedding(table("-users"), nn.EmbeddingOptions{}),
		tags: nn.NewEmbeddingBag(table("-tags"), embedding.Sum, nn.EmbeddingOptions{}), head: nn.NewLinear(4, 1, true)}
	m.Add("users", m.users)
	m.Add("tags", m.tags)
	m.Add("head", m.head)
	return m
}

// loss is the model's forward pass, summed.
func (m *bagModel) loss() *nn.Tensor {
	u := m.users.Forward(cgotorch.MustFromSlice([]int64{1, 2}))
	g := m.tags.Forward(cgotorch.MustFromSlice([]int64{5, 6, 7}), cgotorch.MustFromSlice([]int64{0, 1}))
	return m.head.Forward(cgotorch.Cat([]*nn.Tensor{u, g}, 1)).Sum()
}

// An optimizer made from the model steps its dense parameters and both tables, the bag's
// included, and SetLR reaches the tables.
func TestOptimizerTrainsTheWholeModel(t *testing.T) {
	m := newBagModel(t, "contract-whole", 0.1)
	if got := nn.Tables(m); len(got) != 2 || got[0] != m.users.Table || got[1] != m.tags.Table {
		t.Fatalf("Tables: %v", got)
	}
	opt, err := nn.NewSGD(m, nn.SGDOptions{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if st := opt.Steppers(); len(st) != 2 {
		t.Fatalf("optimizer steps %d tables, want 2", len(st))
	}
	opt.ZeroGrad()
	m.loss().Backward()
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	for _, tab := range nn.Tables(m) {
		if st, err := tab.Stats(); err != nil || st.Step != 1 {
			t.Errorf("table %s: step %d (%v), want 1", tab.Name(), st.Step, err)
		}
	}
	if err := opt.SetLR(0.25); err != nil {
		t.Fatal(err)
	}
	if m.users.Table.LR() != 0.25 || m.tags.Table.LR() != 0.25 || opt.LR() != 0.25 {
		t.Errorf("SetLR(0.25): dense %v, tables %v and %v", opt.LR(), m.users.Table.LR(), m.tags.Table.LR())
	}
	if err := opt.SetLR(-1); !errors.Is(err, cgotorch.ErrInvalidArgument) || m.users.Table.LR() != 0.25 || opt.LR() != 0.25 {
		t.Errorf("SetLR(-1): %v; rates %v and %v after", err, opt.LR(), m.users.Table.LR())
	}
}

// A module listed twice (shared under two names) is stepped once per step.
func TestOptimizerStepsASharedModuleOnce(t *testing.T) {
	m := newBagModel(t, "contract-shared", 0.1)
	m.Add("again", m.users)
	opt, err := nn.NewSGD(m, nn.SGDOptions{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if st := opt.Steppers(); len(st) != 2 {
		t.Errorf("optimizer steps %d steppers, want 2", len(st))
	}
}

// The trap of the old API: an optimizer over the dense parameters alone leaves the tables
// untrained while their pending gradients pile up. Their lookups fail loudly at the bound.
func TestUnsteppedTableLookupsPanicAtTheBound(t *testing.T) {
	m := newBagModel(t, "contract-trap", 0.1)
	opt, err := nn.NewSGD(nn.ParamList(m.Parameters()), nn.SGDOptions{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var steps int
	err = cgotorch.Try(func() {
		for steps = 0; steps <= nn.MaxLookupsWithoutStep; steps++ {
			cgotorch.WithScope(func(*cgotorch.Scope) {
				opt.ZeroGrad() // drops the tables' gradients too, but they never train
				m.loss().Backward()
				if err := opt.Step(); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	if !errors.Is(err, cgotorch.ErrInvalidArgument) || steps != nn.MaxLookupsWithoutStep {
		t.Fatalf("after %d steps: %v; want the lookup after %d to panic", steps, err, nn.MaxLookupsWithoutStep)
	}
	// Evaluation-mode lookups leave nothing pending: they go on.
	m.Train(false)
	if err := cgotorch.Try(func() { m.loss() }); err != nil {
		t.Errorf("evaluation lookup: %v", err)
	}
}

// Stepped tables never hit the bound, whoever steps them (here the table itself), and an
// accumulation of several lookups per step is within it.
func TestSteppedTableLookupsGoOn(t *testing.T) {
	m := newBagModel(t, "contract-stepped", 0)
	err := cgotorch.Try(func() {
		for i := 0; i < 2*nn.MaxLookupsWithoutStep/3; i++ {
			cgotorch.WithScope(func(*cgotorch.Scope) {
				for k := 0; k < 3; k++ { // three micro-batches per step
					m.loss().Backward()
				}
				for _, tab := range nn.Tables(m) {
					if err := tab.Step(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
