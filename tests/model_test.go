package tests

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// recModel is a small ranking model: a user and an item table, a bag of tags per sample
// (mean), and an MLP with dropout over the three rows, concatenated.
type recModel struct {
	nn.Container
	users, items *nn.Embedding
	tags         *nn.EmbeddingBag
	mlp          *nn.Sequential
	tables       []*embedding.Table
	opt          *nn.Optimizer
	sched        *nn.Scheduler
}

const dim = 8

// newRecModel creates the model's tables under names prefixed by prefix:
//   - users: SparseAdam, admission at the second training lookup;
//   - items: Adagrad, access tracking (the test evicts by TTL and compacts);
//   - tags: SGD with momentum (its rows catch up on skipped steps lazily), grown from a
//     capacity of 16.
//
// The dense layers are trained by AdamW. One cosine schedule anneals every rate, dense and
// tables', stepped after each training step.
func newRecModel(t *testing.T, prefix string) *recModel {
	t.Helper()
	m := &recModel{}
	table := func(name string, cfg embedding.Config) *embedding.Table {
		cfg.Dim, cfg.Seed = dim, 7
		tab, err := embedding.NewNamed(prefix+name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tab.Close() })
		m.tables = append(m.tables, tab)
		return tab
	}
	users := table("users", embedding.Config{Optimizer: embedding.SparseAdam{LR: 0.01}})
	if err := users.SetAdmission(2); err != nil {
		t.Fatal(err)
	}
	items := table("items", embedding.Config{Optimizer: embedding.Adagrad{LR: 0.05}, TrackAccess: true})
	tags := table("tags", embedding.Config{Optimizer: embedding.SGD{LR: 0.05, Momentum: 0.9}, Capacity: 16})
	m.users = nn.NewEmbedding(users, nn.EmbeddingOptions{})
	m.items = nn.NewEmbedding(items, nn.EmbeddingOptions{})
	m.tags = nn.NewEmbeddingBag(tags, embedding.Mean, nn.EmbeddingOptions{})
	cgotorch.ManualSeed(3)
	m.mlp = nn.NewSequential(nn.NewLinear(3*dim, 16, true), &nn.ReLU{}, nn.NewDropout(0.2), nn.NewLinear(16, 1, true))
	m.Add("users", m.users)
	m.Add("items", m.items)
	m.Add("tags", m.tags)
	m.Add("mlp", m.mlp)
	opt, err := nn.NewAdamW(m, nn.DefaultAdamWOptions())
	if err != nil {
		t.Fatal(err)
	}
	m.opt = opt
	if m.sched, err = nn.NewScheduler(opt, nn.CosineAnnealingLR{TMax: 16, EtaMin: 1e-4}); err != nil {
		t.Fatal(err)
	}
	return m
}

// Forward is the dense part: the MLP over the three rows of each sample, concatenated (the
// lookups take a batch, not one tensor: see step).
func (m *recModel) Forward(x *nn.Tensor) *nn.Tensor { return m.mlp.Forward(x) }

// batch is step s's samples: users from 1,000 and items from 300 ids (Zipf-like: low ids
// often, each step also brings new ones), 1 to 3 tags of 50, and clicks drawn from a hidden
// rule. It depends only on s, so a resumed run sees the batches the uninterrupted one saw.
type batch struct {
	users, items, tags, offsets []int64
	clicks                      []float32
}

func batchAt(s int) batch {
	r := rand.New(rand.NewPCG(uint64(s), 99))
	var b batch
	for i := 0; i < 64; i++ {
		u := int64(math.Pow(r.Float64(), 3)*1000) * 7919
		it := int64(math.Pow(r.Float64(), 2)*300) + 1<<40
		b.users = append(b.users, u)
		b.items = append(b.items, it)
		b.offsets = append(b.offsets, int64(len(b.tags)))
		for k := 0; k <= r.IntN(3); k++ {
			b.tags = append(b.tags, int64(r.IntN(50))-25) // negative ids too
		}
		click := float32(0)
		if (u/7919+it)%3 == 0 || r.Float64() < 0.1 {
			click = 1
		}
		b.clicks = append(b.clicks, click)
	}
	return b
}

// step trains on batch s and returns the loss.
func (m *recModel) step(t *testing.T, s int) float32 {
	t.Helper()
	b := batchAt(s)
	var loss float32
	var err error
	cgotorch.WithScope(func(*cgotorch.Scope) {
		m.opt.ZeroGrad()
		x := cgotorch.Cat([]*cgotorch.Tensor{
			m.users.Forward(cgotorch.MustFromSlice(b.users)),
			m.items.Forward(cgotorch.MustFromSlice(b.items)),
			m.tags.Forward(cgotorch.MustFromSlice(b.tags), cgotorch.MustFromSlice(b.offsets)),
		}, 1)
		l := nn.BCEWithLogits(nn.ReduceMean)(m.Forward(x), cgotorch.MustFromSlice(b.clicks, int64(len(b.clicks)), 1))
		l.Backward()
		v, itemErr := l.Item()
		loss = float32(v)
		err = errors.Join(itemErr, m.opt.Step(), m.sched.Step())
	})
	if err != nil {
		t.Fatal(err)
	}
	return loss
}

// digest is a hash of everything the model holds: the dense state and, per table, the export
// (ids, rows, optimizer states, step), the access metadata, the admission counts and the
// learning rate.
func (m *recModel) digest(t *testing.T) string {
	t.Helper()
	h := fnv.New64a()
	for _, p := range nn.StateDict(m) {
		v, err := cgotorch.ToSlice[float32](p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(h, p.Name, v)
	}
	for _, tab := range m.tables {
		err := tab.ExportEach(context.Background(), 1<<10, func(c *embedding.ExportChunk) error {
			fmt.Fprint(h, tab.Name(), c.Step, c.IDs, c.Rows, c.LastStep, c.Frequency)
			for _, st := range c.States {
				fmt.Fprint(h, st.Name, st.Values)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		k, counted, err := tab.Admission()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(h, k, counted, tab.Len(), tab.LR())
	}
	return fmt.Sprintf("%x", h.Sum64())
}

// maintain is what a long-running trainer does every few steps: evict the items not seen for
// 5 steps and give their memory back.
func (m *recModel) maintain(t *testing.T) int {
	t.Helper()
	items := m.tables[1]
	ev, err := items.Evict(context.Background(), embedding.TTL(5), false)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if err := items.Compact(); err != nil {
		t.Fatal(err)
	}
	return ev.N
}
