package embedding_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// TestRowOrderWithFreeRows: save, metadata, deltas and compaction walk a table's rows in row
// order, which the table builds by placing each id at its row while at most half of the rows
// ever handed out are free, and by sorting otherwise. Both ways must pair every id with its own
// row: with 10% and with 70% of the rows deleted, a save loads back bit for bit, a delta of the
// whole table applied to an empty one gives the same table, and compaction changes nothing a
// caller can see.
func TestRowOrderWithFreeRows(t *testing.T) {
	for _, percent := range []int{10, 70} {
		t.Run(fmt.Sprint(percent), func(t *testing.T) {
			cfg := embedding.Config{Dim: 3, Optimizer: embedding.Adagrad{LR: 0.1}, BlockRows: 64, TrackAccess: true,
				Initializer: embedding.Uniform{Low: -1, High: 1}, Seed: 5}
			tbl := newTable(t, cfg)
			r := rand.New(rand.NewPCG(3, 4))
			train(t, tbl, r, 10, 200, 3000)
			all := export(t, tbl).ids
			r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			deleted := len(all) * percent / 100
			if _, err := tbl.DeleteIDs(all[:deleted]); err != nil {
				t.Fatal(err)
			}
			before := dump(t, tbl)
			if len(before.IDs) != tbl.Len() || tbl.Len() != len(all)-deleted {
				t.Fatalf("%d ids exported, Len %d", len(before.IDs), tbl.Len())
			}

			dir := t.TempDir()
			if err := embedding.Save(context.Background(), dir, tbl); err != nil {
				t.Fatal(err)
			}
			loaded, err := embedding.LoadRenamed(context.Background(), dir, func(saved string) string { return saved + "/loaded" })
			if err != nil {
				t.Fatal(err)
			}
			defer loaded[0].Close()
			sameDump(t, "loaded", dump(t, loaded[0]), before)

			d, err := tbl.Delta(false)
			if err != nil {
				t.Fatal(err)
			}
			other := newTable(t, cfg, "delta")
			if err := other.ApplyDelta(d); err != nil {
				t.Fatal(err)
			}
			sameDump(t, "delta applied", dump(t, other), before)

			if err := tbl.Compact(); err != nil {
				t.Fatal(err)
			}
			sameDump(t, "compacted", dump(t, tbl), before)
		})
	}
}
