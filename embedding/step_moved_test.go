package embedding_test

import (
	"slices"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// Step takes its ids' rows from their training lookup only while no row has moved since: a
// delete between the lookup and Step frees rows that new ids take at once, and a compaction
// moves rows. The step must still update the ids it has gradients for (those deleted inserted
// again, as Update does), and no other.
func TestStepAfterRowsMoved(t *testing.T) {
	cfg := embedding.Config{Dim: 4, Optimizer: embedding.SGD{LR: 1}, Seed: 2}
	ids := []int64{10, 11, 12, 13}
	for _, move := range []string{"none", "delete", "compact"} {
		t.Run(move, func(t *testing.T) {
			tbl := newTable(t, cfg)
			ref := newTable(t, cfg, "ref") // the same ids' initial rows
			out, err := tbl.Forward(ids64(t, ids), embedding.ForwardOptions{Train: true})
			if err != nil {
				t.Fatal(err)
			}
			coef := make([]float32, len(ids)*cfg.Dim)
			for i := range coef {
				coef[i] = float32(i%5) - 2
			}
			backwardWith(out, coef)
			switch move {
			case "delete": // 20 and 21 take the rows of 10 and 11
				if _, err := tbl.DeleteIDs([]int64{10, 11}); err != nil {
					t.Fatal(err)
				}
				lookup(t, tbl, 20, 21)
			case "compact": // 12 and 13 move to the rows of 10 and 11
				if _, err := tbl.DeleteIDs([]int64{10, 11}); err != nil {
					t.Fatal(err)
				}
				if err := tbl.Compact(); err != nil {
					t.Fatal(err)
				}
			}
			if err := tbl.Step(); err != nil {
				t.Fatal(err)
			}
			got, _ := read(t, tbl, ids...)
			want := lookup(t, ref, ids...)
			for i := range ids {
				for j := range want[i] {
					want[i][j] -= coef[i*cfg.Dim+j] // SGD, lr 1: w -= g
				}
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("id %d: %v after the step, want %v", ids[i], got[i], want[i])
				}
			}
			if move == "delete" {
				got, _ := read(t, tbl, 20, 21)
				if want := lookup(t, ref, 20, 21); !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
					t.Errorf("ids 20, 21 (in rows freed after the lookup): %v, want their initial rows %v", got, want)
				}
			}
		})
	}
}
