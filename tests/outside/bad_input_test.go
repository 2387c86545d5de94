package outside

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// badInput is a collective call of a case: bad makes this rank's input invalid.
type badInput func(g *dist.Group, users, items *dist.ShardedTable, bad bool) error

var badInputs = map[string]badInput{
	"bag-missing-key": func(_ *dist.Group, users, items *dist.ShardedTable, bad bool) error {
		return bagsForward(users, items, bad, func(in *nn.KeyedJagged) { in.Keys = []string{"user", "itemz"} })
	},
	"bag-lengths-and-offsets": func(_ *dist.Group, users, items *dist.ShardedTable, bad bool) error {
		return bagsForward(users, items, bad, func(in *nn.KeyedJagged) { in.Offsets = cgotorch.MustFromSlice([]int64{0, 1, 2}) })
	},
	"bag-float-values": func(_ *dist.Group, users, items *dist.ShardedTable, bad bool) error {
		return bagsForward(users, items, bad, func(in *nn.KeyedJagged) { in.Values = cgotorch.MustFromSlice([]float32{1, 2}) })
	},
	"bag-lengths-count": func(_ *dist.Group, users, items *dist.ShardedTable, bad bool) error {
		return bagsForward(users, items, bad, func(in *nn.KeyedJagged) { in.Lengths = cgotorch.MustFromSlice([]int64{1, 1, 0}) })
	},
	"bag-lengths-sum": func(_ *dist.Group, users, items *dist.ShardedTable, bad bool) error {
		return bagsForward(users, items, bad, func(in *nn.KeyedJagged) { in.Lengths = cgotorch.MustFromSlice([]int64{1, 3}) })
	},
	"collection-missing-key": func(_ *dist.Group, users, items *dist.ShardedTable, bad bool) error {
		ec, err := nn.NewEmbeddingCollection([]nn.EmbeddingFeature{{Name: "user", Table: users}, {Name: "item", Table: items}}, nn.EmbeddingOptions{})
		if err != nil {
			return err
		}
		in := nn.KeyedJagged{Keys: []string{"user", "item"}, Values: cgotorch.MustFromSlice([]int64{1, 100}), Lengths: cgotorch.MustFromSlice([]int64{1, 1})}
		if bad {
			in.Keys = []string{"user", "itemz"}
		}
		return cgotorch.TryWithScope(func() error { ec.Forward(in); return nil })
	},
	"embedding-float-ids": func(_ *dist.Group, users, _ *dist.ShardedTable, bad bool) error {
		ids := cgotorch.MustFromSlice([]int64{1, 2})
		if bad {
			ids = cgotorch.MustFromSlice([]float32{1, 2})
		}
		e := nn.NewEmbedding(users, nn.EmbeddingOptions{})
		return cgotorch.TryWithScope(func() error { e.Forward(ids); return nil })
	},
	"embedding-bag-bad-offsets": func(_ *dist.Group, users, _ *dist.ShardedTable, bad bool) error {
		off := cgotorch.MustFromSlice([]int64{0, 1})
		if bad {
			off = cgotorch.MustFromSlice([]int64{1, 0})
		}
		e := nn.NewEmbeddingBag(users, embedding.Sum, nn.EmbeddingOptions{})
		return cgotorch.TryWithScope(func() error { e.Forward(cgotorch.MustFromSlice([]int64{1, 2}), off); return nil })
	},
	"write-nan": func(g *dist.Group, users, _ *dist.ShardedTable, bad bool) error {
		v := []float32{1, 2}
		if bad {
			v[0] = float32(math.NaN())
		}
		return users.Write(cgotorch.MustFromSlice([]int64{int64(7 + g.Rank())}), cgotorch.MustFromSlice(v, 1, 2))
	},
}

// bagsForward is an EmbeddingBagCollection's Forward of one sample over users and items, its
// input spoiled when bad.
func bagsForward(users, items *dist.ShardedTable, bad bool, spoil func(*nn.KeyedJagged)) error {
	bags, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{
		{Name: "user", Table: users, Mode: embedding.Sum},
		{Name: "item", Table: items, Mode: embedding.Sum},
	}, nn.EmbeddingOptions{})
	if err != nil {
		return err
	}
	in := nn.KeyedJagged{Keys: []string{"user", "item"}, Values: cgotorch.MustFromSlice([]int64{1, 100}), Lengths: cgotorch.MustFromSlice([]int64{1, 1})}
	if bad {
		spoil(&in)
	}
	return cgotorch.TryWithScope(func() error { bags.Forward(in); return nil })
}

// Two ranks make three calls of a collective operation over sharded tables; rank 1's input of
// the second call is invalid. As the dist docs promise (bad input on one rank makes every
// other rank return an error, no shard changes), every rank's second call fails, and the
// group stays in step: the third call succeeds on both. A user who skips the bad batch, as a
// failed batch operation changes nothing, goes on training.
func TestBadInputOnOneRank(t *testing.T) {
	if c := os.Getenv("OUTSIDE_CASE"); c != "" {
		g := rankGroup(t, 10*time.Second)
		defer g.Close()
		users, err := dist.NewShardedTable(g, "users", embedding.Config{Dim: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer users.Close()
		items, err := dist.NewShardedTable(g, "items", embedding.Config{Dim: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer items.Close()
		for call := range 3 {
			if err := badInputs[c](g, users, items, call == 1 && g.Rank() == 1); err != nil {
				say(g, "call %d: error: %v", call, err)
			} else {
				say(g, "call %d: ok", call)
			}
		}
		return
	}
	for name := range badInputs {
		t.Run(name, func(t *testing.T) {
			outs, errs := runRanks(t, 2, "TestBadInputOnOneRank", "OUTSIDE_CASE="+name)
			want := []string{"RANK0: call 1: error", "RANK1: call 1: error", "RANK0: call 2: ok"}
			got := outs[0] + outs[1]
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("no %q", w)
				}
			}
			if !strings.Contains(outs[1], "RANK1: call 2: ok") {
				t.Errorf("rank 1's call 2 failed")
			}
			if t.Failed() {
				for r := range outs {
					t.Logf("rank %d (exit %v):\n%s", r, errs[r], rankLines(outs[r]))
				}
			}
		})
	}
}
