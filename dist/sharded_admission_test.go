package dist

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() {
	scenarios["admission"] = scenarioAdmission
	scenarios["admission-resharded"] = scenarioAdmissionResharded
}

// Admission on a sharded table: a new id gets its row at its k-th training lookup, every
// occurrence in every rank's batch counting, as in one table (id 1006: rank 0 alone, three
// times a batch: admitted at the first step; id 1012: once in each rank's batch: at the
// second); before, its lookups give zero rows and its gradients are dropped. Ranks passing
// another k fail with ErrMismatch and change nothing. A table's checkpoint and a model's keep
// the threshold and every id's count, loaded on 2 ranks and on 3 (the counts then move to the
// ids' new owners).
func TestShardedAdmission(t *testing.T) {
	env := "GOREC_TEST_DIR=" + t.TempDir()
	requirePassed(t, runSharded(t, "admission", 2, time.Minute, env))
	requirePassed(t, runSharded(t, "admission-resharded", 3, time.Minute, env))
}

func scenarioAdmission(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	tbl, err := NewShardedTable(g, "admission", embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1}, Optimizer: embedding.SGD{LR: 1}})
	if err != nil {
		return err
	}
	defer tbl.Close()
	if err := tbl.SetAdmission(3 + g.Rank()); !errors.Is(err, ErrMismatch) {
		return fmt.Errorf("ranks passing 3 and 4: %v, want ErrMismatch", err)
	}
	if k, _, err := tbl.Admission(); err != nil || k > 1 {
		return fmt.Errorf("after the refusal the threshold is %d (%v), want none", k, err)
	}
	if err := tbl.SetAdmission(3); err != nil {
		return err
	}
	const a, b = 1006, 1012 // a: rank 0's batches only (three times each); b: both ranks'
	ids := []int64{b}
	if g.Rank() == 0 {
		ids = []int64{a, b, a, a}
	}
	for step, want := range []struct {
		len, counted int
		rowA, rowB   float32 // the rows rank 0 looks up, before this step's update (SGD, rate 1:
		// the ranks' gradients, 3 for a and 2 for b, come off an admitted row)
	}{{1, 1, 1, 0}, {2, 0, -2, 1}, {2, 0, -5, -1}, {2, 0, -8, -3}} {
		rows, err := tbl.Lookup(cgotorch.MustFromSlice(ids))
		if err != nil {
			return err
		}
		v, _ := cgotorch.ToSlice[float32](rows)
		rows.Close()
		if g.Rank() == 0 && (v[0] != want.rowA || v[2] != want.rowB) {
			return fmt.Errorf("step %d: rows of a and b %v, want %v and %v", step, v, want.rowA, want.rowB)
		}
		grads := make([]float32, 2*len(ids))
		for i := range grads {
			grads[i] = 1
		}
		if err := tbl.Update(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(grads, int64(len(ids)), 2)); err != nil {
			return err
		}
		n, err := tbl.Len()
		if err != nil {
			return err
		}
		_, counted, err := tbl.Admission()
		if err != nil || n != want.len || counted != want.counted {
			return fmt.Errorf("step %d: %d ids, %d counted (%v), want %d and %d", step, n, counted, err, want.len, want.counted)
		}
	}
	return admissionLoads(g, tbl)
}

// pendingCounts are the admission counts admissionLoads leaves in the saved table (threshold
// 3): ids seen once or twice, by one rank or by both.
var pendingCounts = map[int64]int64{2001: 1, 2002: 2, 2003: 1, 2004: 2}

// admissionLoads checks that a model's checkpoint and a table's carry the threshold and the
// counts (it closes tbl).
func admissionLoads(g *Group, tbl *ShardedTable) error {
	ctx := context.Background()
	dir := os.Getenv("GOREC_TEST_DIR")
	batches := [][]int64{{2002}, {2003}} // rank 1's
	if g.Rank() == 0 {
		batches = [][]int64{{2001, 2002, 2004}, {2004}}
	}
	for _, ids := range batches {
		rows, err := tbl.Lookup(cgotorch.MustFromSlice(ids))
		if err != nil {
			return err
		}
		rows.Close()
	}
	if err := hasCounts("before the saves", tbl, pendingCounts); err != nil {
		return err
	}
	m := &nn.Container{}
	m.Add("emb", nn.NewEmbedding(tbl, nn.EmbeddingOptions{}))
	if err := SaveCheckpoint(ctx, g, filepath.Join(dir, "model"), m, nil); err != nil {
		return err
	}
	if err := tbl.Save(ctx, filepath.Join(dir, "table")); err != nil {
		return err
	}
	if err := tbl.SetAdmission(1); err != nil { // (forgets the counts)
		return err
	}
	if err := LoadCheckpoint(ctx, g, filepath.Join(dir, "model"), m, nil); err != nil {
		return err
	}
	if err := hasCounts("LoadCheckpoint", tbl, pendingCounts); err != nil {
		return err
	}
	tbl.Close() // its name is the loaded one's
	loaded, err := LoadShardedTable(ctx, g, filepath.Join(dir, "table"))
	if err != nil {
		return err
	}
	defer loaded.Close()
	return hasCounts("LoadShardedTable", loaded, pendingCounts)
}

// scenarioAdmissionResharded loads the 2-rank scenario's checkpoints on 3 ranks: the threshold
// and the counts are the saved ones, and an id seen twice before the save is admitted at its
// third lookup.
func scenarioAdmissionResharded(o Options) error {
	ctx := context.Background()
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	dir := os.Getenv("GOREC_TEST_DIR")
	loaded, err := LoadShardedTable(ctx, g, filepath.Join(dir, "table"))
	if err != nil {
		return err
	}
	err = hasCounts("LoadShardedTable", loaded, pendingCounts)
	loaded.Close()
	if err != nil {
		return err
	}
	tbl, err := NewShardedTable(g, "admission", embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1}, Optimizer: embedding.SGD{LR: 1}})
	if err != nil {
		return err
	}
	defer tbl.Close()
	m := &nn.Container{}
	m.Add("emb", nn.NewEmbedding(tbl, nn.EmbeddingOptions{}))
	if err := LoadCheckpoint(ctx, g, filepath.Join(dir, "model"), m, nil); err != nil {
		return err
	}
	if err := hasCounts("LoadCheckpoint", tbl, pendingCounts); err != nil {
		return err
	}
	before, err := tbl.Len()
	if err != nil {
		return err
	}
	ids := [][]int64{{2002}, {2003}, {2001}}[g.Rank()]
	rows, err := tbl.Lookup(cgotorch.MustFromSlice(ids))
	if err != nil {
		return err
	}
	rows.Close()
	after, err := tbl.Len()
	if err != nil || after != before+1 {
		return fmt.Errorf("%d rows after the lookup (%v), want %d: id 2002 admitted", after, err, before+1)
	}
	return hasCounts("after the lookup", tbl, map[int64]int64{2001: 2, 2003: 2, 2004: 2})
}

// hasCounts checks the admission threshold (3), the admission counts of tbl's shard on this
// rank (the ids of want it owns) and the number of ids counted by all shards (collective).
func hasCounts(when string, tbl *ShardedTable, want map[int64]int64) error {
	k, counted, err := tbl.Admission()
	if err != nil || k != 3 || counted != len(want) {
		return fmt.Errorf("%s: threshold %d, %d ids counted (%v), want 3 and %d", when, k, counted, err, len(want))
	}
	d, err := tbl.shard.Delta(false)
	if err != nil {
		return err
	}
	got := map[int64]int64{}
	for i, id := range d.CountIDs {
		got[id] = d.Counts[i]
	}
	for id, c := range want {
		if Owner(id, tbl.g.WorldSize()) == tbl.g.Rank() && got[id] != c {
			return fmt.Errorf("%s: rank %d counts id %d %d times, want %d (its counts: %v)", when, tbl.g.Rank(), id, got[id], c, got)
		}
	}
	return nil
}
