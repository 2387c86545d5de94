package dist

import (
	"fmt"
	"os"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

func init() { scenarios["sharded-bench"] = scenarioShardedBench }

// scenarioShardedBench times $GOREC_DIST_BENCH_OP on 2 ranks: "sharded" is a Lookup and an
// Update of 4,096 distinct ids per rank at Dim 64 on a sharded table (SGD); "raw" the four
// all-to-alls that move the same bytes (ids to the owners, rows back, ids and gradients to the
// owners), without the agreement, the deduplication or the table.
func scenarioShardedBench(o Options) error {
	g, n, err := benchGroup(o, "GOREC_DIST_BENCH_N")
	if err != nil {
		return err
	}
	defer g.Close()
	const count, dim = 4096, 64
	ids := make([]int64, count)
	for k := range ids {
		ids[k] = int64(g.Rank())<<32 + int64(7*k)
	}
	st, err := NewShardedTable(g, "bench", embedding.Config{Dim: dim, Optimizer: embedding.SGD{LR: 0.01}})
	if err != nil {
		return err
	}
	defer st.Close()
	idt := cgotorch.MustFromSlice(ids)
	grads := cgotorch.Full([]int64{count, dim}, 0.001)
	defer idt.Close()
	defer grads.Close()
	// the raw form: ids grouped by owner once, as the sharded table groups them at every call
	r, _, err := st.owners(ids, nil, false)
	if err != nil {
		return err
	}
	sent := make([]int64, count)
	for k, i := range r.perm {
		sent[k] = ids[i]
	}
	grouped := cgotorch.MustFromSlice(sent)
	defer grouped.Close()
	var run func() error
	switch op := os.Getenv("GOREC_DIST_BENCH_OP"); op {
	case "sharded":
		run = func() error {
			rows, err := st.Lookup(idt)
			if err != nil {
				return err
			}
			rows.Close()
			return st.Update(idt, grads)
		}
	case "raw":
		run = func() error { return rawExchange(g, grouped, grads, r.send) }
	default:
		return fmt.Errorf("unknown op %q", op)
	}
	return timed(g, n, run)
}

// rawExchange is the collectives of a lookup and an update, alone.
func rawExchange(g *Group, ids, grads *cgotorch.Tensor, send []int64) error {
	got, recv, err := g.AllToAll(ids, send)
	if err != nil {
		return err
	}
	got.Close()
	n := int64(0)
	for _, c := range recv {
		n += c
	}
	rows := cgotorch.Zeros([]int64{n, grads.Shape()[1]})
	defer rows.Close()
	back, _, err := g.AllToAll(rows, recv)
	if err != nil {
		return err
	}
	back.Close()
	if got, _, err = g.AllToAll(ids, send); err != nil {
		return err
	}
	got.Close()
	gg, _, err := g.AllToAll(grads, send)
	if err != nil {
		return err
	}
	gg.Close()
	return nil
}

// BenchmarkShardedTable compares a sharded Lookup + Update of 4,096 ids at Dim 64 on 2 local
// ranks with the raw all-to-alls that move the same bytes (issue 30's target: at most 1.3x).
func BenchmarkShardedTable(b *testing.B) {
	for _, op := range []string{"raw", "sharded"} {
		b.Run(op, func(b *testing.B) { benchRanks(b, "sharded-bench", op) })
	}
}
