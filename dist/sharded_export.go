package dist

import (
	"fmt"
	"sort"

	"github.com/gorec/gorec/cgotorch"
)

// gatherer gathers the shards' rows on every rank, in the order of their ids ascending.
type gatherer struct {
	s      *ShardedTable
	counts []int64 // ids on each rank
	most   int64   // the largest count: every rank pads to it
	order  []int   // order[k]: the position, in the padded gather, of the k-th id ascending
	ids    []int64 // every id, ascending
}

// start gathers the ids of every shard (this rank's: ids) and orders them.
func (g *gatherer) start(op string, ids []int64) error {
	var err error
	if g.counts, err = g.s.gatherInt64s(op, []int64{int64(len(ids))}); err != nil {
		return err
	}
	for _, n := range g.counts {
		g.most = max(g.most, n)
	}
	all, err := gatherPadded(g, op, ids, 1)
	if err != nil {
		return err
	}
	for r, n := range g.counts {
		for i := int64(0); i < n; i++ {
			g.order = append(g.order, r*int(g.most)+int(i))
		}
	}
	sort.Slice(g.order, func(a, b int) bool { return all[g.order[a]] < all[g.order[b]] })
	for _, k := range g.order {
		g.ids = append(g.ids, all[k])
	}
	return nil
}

// rows gathers a float32 tensor of this shard, [len(ids), W], into [every id, W].
func (g *gatherer) rows(op string, t *cgotorch.Tensor) (*cgotorch.Tensor, error) {
	sh := t.Shape()
	if len(sh) != 2 {
		return nil, fmt.Errorf("sharded table %q: %s: a state of shape %v", g.s.name, op, sh)
	}
	w := int(sh[1])
	v, err := cgotorch.ToSlice[float32](t)
	if err != nil {
		return nil, err
	}
	all, err := gatherPadded(g, op, v, w)
	if err != nil {
		return nil, err
	}
	out := make([]float32, 0, len(g.order)*w)
	for _, k := range g.order {
		out = append(out, all[k*w:(k+1)*w]...)
	}
	return cgotorch.FromSlice(out, int64(len(g.order)), int64(w))
}

// gatherPadded gathers every rank's v ([count, w]) padded to [most, w]: [world*most, w].
func gatherPadded[T cgotorch.Element](g *gatherer, op string, v []T, w int) ([]T, error) {
	p := make([]T, int(g.most)*w)
	copy(p, v)
	t, err := cgotorch.FromSlice(p, g.most, int64(w))
	if err != nil {
		return nil, err
	}
	defer t.Close()
	all, err := g.s.g.AllGather(t)
	if err != nil {
		return nil, fmt.Errorf("sharded table %q: %s: %w", g.s.name, op, err)
	}
	defer all.Close()
	return cgotorch.ToSlice[T](all)
}
