package nn_test

import (
	"math"
	"math/rand"
	"runtime"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// TestDistinctIdsAcrossCalls checks the thread's distinct-id table (distinct_ids, batch.cc.h),
// which Embedding lookups and the bags share and which keeps its size and (free) slots from
// call to call: on one OS thread, a sequence of calls of like and unlike lengths whose distinct
// ids grow the table within a call, start from a large table with few distinct ids (the slots
// freed one by one) or many (freed at once), and skip a padding id. Every output row must be
// its id's row (bags of one id, weight 1: the row exactly), so an id mapped to another's place,
// or a slot left taken by an earlier call, shows.
func TestDistinctIdsAcrossCalls(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const dim, nIDs, pad = 8, 9000, int64(-3)
	rng := rand.New(rand.NewSource(21))
	cfg := embedding.Config{Dim: dim, Initializer: embedding.Zeros{}, Optimizer: embedding.SGD{LR: 1}}
	tbl := newEmbTable(t, "distinct", cfg)
	all := make([]int64, nIDs)
	rows := make([]float32, nIDs*dim)
	for i := range all {
		all[i] = int64(i)*7919 - 40000 // (negative ones too)
	}
	for i := range rows {
		rows[i] = rng.Float32()*2 - 1
	}
	if err := tbl.WriteIDs(all, rows); err != nil {
		t.Fatal(err)
	}
	rowOf := map[int64]int{}
	for i, id := range all {
		rowOf[id] = i
	}
	opts := nn.EmbeddingOptions{Padding: true, PaddingID: pad}
	emb, bag := nn.NewEmbedding(tbl, opts), nn.NewEmbeddingBag(tbl, embedding.Sum, opts)
	check := func(step string, ids []int64, got []float32) {
		t.Helper()
		for i, id := range ids {
			for j := 0; j < dim; j++ {
				want := float32(0)
				if id != pad {
					want = rows[rowOf[id]*dim+j]
				}
				if math.Float32bits(got[i*dim+j]) != math.Float32bits(want) {
					t.Fatalf("%s: row %d (id %d) [%d] = %v, want %v", step, i, id, j, got[i*dim+j], want)
				}
			}
		}
	}
	draw := func(n, distinct int) []int64 { // n ids of at most distinct distinct ones, some padding
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = all[rng.Intn(distinct)]
			if rng.Intn(100) == 0 {
				ids[i] = pad
			}
		}
		return ids
	}
	three := []int64{all[0], all[1], all[2]}
	var cycle []int64
	for len(cycle) < 20000 {
		cycle = append(cycle, three...)
	}
	// A call of three distinct ids in a large table (their slots freed one by one), then one that
	// starts with the same three (a slot left taken would map them to places not yet filled).
	for k, ids := range [][]int64{
		draw(20000, 6000), cycle, append(append([]int64{}, three...), draw(20000, 7000)...), draw(20000, 1),
		draw(30000, 9000), draw(16, 16), draw(5000, 9000), draw(17000, 40), draw(1, 1), {},
	} {
		offsets := make([]int64, len(ids)) // (a bag per id)
		for i := range offsets {
			offsets[i] = int64(i)
		}
		cgotorch.WithScope(func(*cgotorch.Scope) {
			x := cgotorch.MustFromSlice(ids)
			check("embedding "+string(rune('a'+k)), ids, f32(t, emb.Forward(x)))
			if len(ids) > 0 {
				check("bag "+string(rune('a'+k)), ids, f32(t, bag.Forward(x, cgotorch.MustFromSlice(offsets))))
			}
		})
	}
}
