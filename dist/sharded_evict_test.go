package dist

// Eviction and compaction of sharded tables: the rows a policy keeps across every shard.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

func init() {
	scenarios["evict"] = scenarioEvict
}

var evictConfig = embedding.Config{Dim: 3, Seed: 5, TrackAccess: true, Initializer: embedding.Normal{Std: 0.1}, Optimizer: embedding.Adagrad{LR: 0.1}}

// rowMeta is a row's metadata.
type rowMeta struct{ id, last, freq int64 }

// trainForEviction gives t's rows a spread of last steps and frequencies, with ties: 6 steps of
// lookups (some ids twice in a batch, some on several ranks) and updates.
func trainForEviction(t *ShardedTable, rank int) error {
	for step := range 6 {
		var ids []int64
		for j := step * 4; j < step*4+7+rank; j++ {
			ids = append(ids, trainID(j%30), trainID((j*7)%30))
		}
		if _, err := t.Lookup(cgotorch.MustFromSlice(ids)); err != nil {
			return err
		}
		grads := make([]float32, 3*len(ids)/2)
		for i := range grads {
			grads[i] = 0.01 * float32(i%5)
		}
		if err := t.Update(cgotorch.MustFromSlice(ids[:len(ids)/2]), cgotorch.MustFromSlice(grads, int64(len(ids)/2), 3)); err != nil {
			return err
		}
	}
	return nil
}

// gatherMeta returns the metadata of every shard's rows (collective).
func gatherMeta(t *ShardedTable) ([]rowMeta, error) {
	ids, last, freq, err := t.shard.Metadata()
	if err != nil {
		return nil, err
	}
	lens, err := t.gatherInt64s("test", []int64{int64(len(ids))})
	if err != nil {
		return nil, err
	}
	width := slices.Max(lens)
	mine := make([]int64, 3*width)
	for i := range ids {
		mine[3*i], mine[3*i+1], mine[3*i+2] = ids[i], last[i], freq[i]
	}
	all, err := gatherInt64s(t.g, "test", "gather", mine)
	if err != nil {
		return nil, err
	}
	var out []rowMeta
	for r, n := range lens {
		for i := range n {
			at := 3 * (int64(r)*width + i)
			out = append(out, rowMeta{all[at], all[at+1], all[at+2]})
		}
	}
	return out, nil
}

// keptByRule returns the ids of the n rows embedding's KeepRecent (KeepFrequent: byFreq) keeps:
// the latest last step, then the highest frequency (the other way round byFreq), then the
// smallest id; ascending.
func keptByRule(rows []rowMeta, n int, byFreq bool) []int64 {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b rowMeta) int {
		x, y := [2]int64{a.last, a.freq}, [2]int64{b.last, b.freq}
		if byFreq {
			x, y = [2]int64{a.freq, a.last}, [2]int64{b.freq, b.last}
		}
		return cmp.Or(cmp.Compare(y[0], x[0]), cmp.Compare(y[1], x[1]), cmp.Compare(a.id, b.id))
	})
	var out []int64
	for _, r := range rows[:min(n, len(rows))] {
		out = append(out, r.id)
	}
	slices.Sort(out)
	return out
}

// exportIDs returns the whole table's ids (collective).
func exportIDs(t *ShardedTable) ([]int64, error) {
	snap, err := t.Export()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	return cgotorch.ToSlice[int64](snap.IDs)
}

// Evicting a sharded table keeps, on 2 and 3 ranks, exactly the rows the policy's rule keeps
// over every shard (KeepRecent, KeepFrequent: ties among last steps and frequencies broken as
// embedding's; TTL by age), returns each shard's removed rows as they were and the whole
// table's count; MemoryBudget bounds each shard; ranks with other policies, or one whose ctx is
// done, fail on every rank and nothing is removed; Compact works after.
func TestShardedEvict(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world, "-ranks"), func(t *testing.T) {
			res := runSharded(t, "evict", world, time.Minute)
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

func scenarioEvict(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	for k, c := range []struct {
		p        embedding.EvictPolicy
		keep     func(rows []rowMeta, step int64) []int64
		perShard bool
	}{
		{embedding.KeepRecent(9), func(rows []rowMeta, _ int64) []int64 { return keptByRule(rows, 9, false) }, false},
		{embedding.KeepFrequent(11), func(rows []rowMeta, _ int64) []int64 { return keptByRule(rows, 11, true) }, false},
		{embedding.KeepRecent(0), func([]rowMeta, int64) []int64 { return nil }, false},
		{embedding.KeepFrequent(1000), func(rows []rowMeta, _ int64) []int64 { return keptByRule(rows, 1000, true) }, false},
		{embedding.TTL(2), func(rows []rowMeta, step int64) []int64 {
			var out []int64
			for _, r := range rows {
				if step-r.last <= 2 {
					out = append(out, r.id)
				}
			}
			slices.Sort(out)
			return out
		}, false},
		{embedding.MemoryBudget(4 * 64), nil, true}, // 64 bytes a row: 4 rows a shard
	} {
		tbl, err := NewShardedTable(g, fmt.Sprint("evict-", k), evictConfig)
		if err != nil {
			return err
		}
		defer tbl.Close()
		if err := trainForEviction(tbl, g.Rank()); err != nil {
			return err
		}
		if err := checkEviction(g, tbl, c.p, c.keep, c.perShard); err != nil {
			return fmt.Errorf("%v: %w", c.p, err)
		}
	}
	return checkEvictionRefusals(g)
}

// checkEviction evicts by p and checks the table's ids against keep's (nil: MemoryBudget,
// checked per shard).
func checkEviction(g *Group, tbl *ShardedTable, p embedding.EvictPolicy, keep func([]rowMeta, int64) []int64, perShard bool) error {
	meta, err := gatherMeta(tbl)
	if err != nil {
		return err
	}
	st, err := tbl.Stats()
	if err != nil {
		return err
	}
	before, err := tbl.shard.Export()
	if err != nil {
		return err
	}
	defer before.Close()
	ev, total, err := tbl.Evict(context.Background(), p, true)
	if err != nil {
		return err
	}
	defer ev.Close()
	ids, err := exportIDs(tbl)
	if err != nil {
		return err
	}
	if total != len(meta)-len(ids) {
		return fmt.Errorf("%d rows removed, but the table went from %d to %d ids", total, len(meta), len(ids))
	}
	if perShard { // each shard kept its most recent rows, fewer than it had
		var mine []rowMeta
		for _, r := range meta {
			if Owner(r.id, g.WorldSize()) == g.Rank() {
				mine = append(mine, r)
			}
		}
		kept, _, _, err := tbl.shard.Metadata()
		if err != nil {
			return err
		}
		if want := keptByRule(mine, len(kept), false); len(kept) >= len(mine) || fmt.Sprint(kept) != fmt.Sprint(want) {
			return fmt.Errorf("this shard keeps %v of its %d rows, want fewer, the most recent: %v", kept, len(mine), want)
		}
	} else if want := keep(meta, st.Step); fmt.Sprint(ids) != fmt.Sprint(want) {
		return fmt.Errorf("the table keeps %v, want %v", ids, want)
	}
	// the removed rows: this shard's ids the table lost, with their rows as they were
	gone, _ := cgotorch.ToSlice[int64](ev.IDs)
	had, _ := cgotorch.ToSlice[int64](before.IDs)
	var lost []int64
	for _, id := range had {
		if _, ok := slices.BinarySearch(ids, id); !ok {
			lost = append(lost, id)
		}
	}
	if fmt.Sprint(gone) != fmt.Sprint(lost) || ev.N != len(lost) {
		return fmt.Errorf("this shard removed %v (N %d), but lost %v", gone, ev.N, lost)
	}
	if len(lost) > 0 {
		rows, _ := embedding.Rows(ev.Rows)
		all, _ := embedding.Rows(before.Rows)
		for i, id := range gone {
			at, _ := slices.BinarySearch(had, id)
			if fmt.Sprint(rows[i]) != fmt.Sprint(all[at]) {
				return fmt.Errorf("removed id %d's row %v, was %v", id, rows[i], all[at])
			}
		}
	}
	fmt.Printf("rank %d: %v: %d of %d rows kept (%d removed here)\n", g.Rank(), p, len(ids), len(meta), len(gone))
	return tbl.Compact()
}

// checkEvictionRefusals: other policies on one rank, or a done ctx on one rank, fail the call
// on every rank and remove nothing; the table evicts after.
func checkEvictionRefusals(g *Group) error {
	tbl, err := NewShardedTable(g, "evict-refused", evictConfig)
	if err != nil {
		return err
	}
	defer tbl.Close()
	if err := trainForEviction(tbl, g.Rank()); err != nil {
		return err
	}
	n, err := tbl.Len()
	if err != nil {
		return err
	}
	last := g.Rank() == g.WorldSize()-1
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		what string
		p    embedding.EvictPolicy
		ctx  context.Context
		want error // on the other ranks
	}{
		{"another n", embedding.KeepRecent(5 + boolIntN(last)), context.Background(), ErrMismatch},
		{"another policy", pick(last, embedding.TTL(5), embedding.KeepRecent(5)), context.Background(), ErrMismatch},
		{"a done ctx", embedding.KeepRecent(5), pick(last, done, context.Background()), ErrMismatch},
	} {
		_, _, err := tbl.Evict(c.ctx, c.p, false)
		switch {
		case err == nil:
			return fmt.Errorf("%s on the last rank: no error", c.what)
		case !last && !errors.Is(err, c.want):
			return fmt.Errorf("%s on the last rank: %v, want %v", c.what, err, c.want)
		}
		if m, err := tbl.Len(); err != nil || m != n {
			return fmt.Errorf("%s on the last rank: %d ids, %d before (%v)", c.what, m, n, err)
		}
	}
	if _, total, err := tbl.Evict(context.Background(), embedding.KeepRecent(5), false); err != nil || total != n-5 {
		return fmt.Errorf("the eviction after: %d removed (%v), want %d", total, err, n-5)
	}
	return nil
}

func boolIntN(b bool) int { return int(boolInt(b)) }

func pick[T any](b bool, yes, no T) T {
	if b {
		return yes
	}
	return no
}

// On one rank, a sharded table's eviction ranks the rows as embedding.Table's own does, ties
// included: KeepRecent and KeepFrequent leave the ids the shard's own Evict leaves.
func TestShardedEvictRanksAsTable(t *testing.T) {
	g := oneRank(t)
	for _, p := range []embedding.EvictPolicy{embedding.KeepRecent(7), embedding.KeepFrequent(7), embedding.KeepRecent(19), embedding.KeepFrequent(23)} {
		var left [2][]int64
		for k := range 2 {
			tbl, err := NewShardedTable(g, fmt.Sprint("ranks-", k), evictConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Close()
			if err := trainForEviction(tbl, 0); err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				_, _, err = tbl.Evict(context.Background(), p, false)
			} else {
				_, err = tbl.Shard().Evict(context.Background(), p, false)
			}
			if err != nil {
				t.Fatal(err)
			}
			if left[k], _, _, err = tbl.shard.Metadata(); err != nil {
				t.Fatal(err)
			}
			tbl.Close()
		}
		if len(left[0]) != int(mustKeeps(p)) || fmt.Sprint(left[0]) != fmt.Sprint(left[1]) {
			t.Errorf("%v: the sharded table keeps %v, the table's own eviction %v", p, left[0], left[1])
		}
	}
}

func mustKeeps(p embedding.EvictPolicy) int64 {
	n, _, _ := p.Keeps()
	return n
}
