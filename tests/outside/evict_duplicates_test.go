package outside

import (
	"context"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// KeepRecent(1) and KeepFrequent(1) after three steps on the batch [5 5 5 2], on one table and
// on a sharded table of one rank. The dist doc promises that KeepRecent(n) and KeepFrequent(n)
// "keep the n rows of the whole table that one table's ranking keeps"; one table counts id 5
// three times a batch and keeps it (both ids were seen at the last step: KeepRecent breaks the
// tie by frequency). The sharded table counted each id once per rank and batch, tied, and kept
// the smaller id 2, until it counted every occurrence (a800d90).
func TestEvictRanksDuplicatesAsOneTable(t *testing.T) {
	for _, policy := range []embedding.EvictPolicy{embedding.KeepRecent(1), embedding.KeepFrequent(1)} {
		g := oneRank(t)
		cfg := embedding.Config{Dim: 2, TrackAccess: true, Optimizer: embedding.Adagrad{LR: 0.1}}
		sharded, err := dist.NewShardedTable(g, "users", cfg)
		if err != nil {
			t.Fatal(err)
		}
		local, err := embedding.NewNamed("users-local", cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, tab := range []nn.EmbeddingTable{sharded, local} {
			m := nn.NewEmbedding(tab, nn.EmbeddingOptions{})
			opt, err := nn.NewAdam(m, nn.AdamOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if err := cgotorch.TryWithScope(func() error {
					opt.ZeroGrad()
					m.Forward(cgotorch.MustFromSlice([]int64{5, 5, 5, 2})).Sum().Backward()
					return opt.Step()
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
		one, err := local.Evict(context.Background(), policy, true)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := sharded.Evict(context.Background(), policy, true)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := cgotorch.ToSlice[int64](one.IDs)
		ids, _ := cgotorch.ToSlice[int64](got.IDs)
		if !slices.Equal(ids, want) {
			t.Errorf("%v: the sharded table evicted %v, one table %v", policy, ids, want)
		}
		one.Close()
		got.Close()
		sharded.Close()
		local.Close()
	}
}
