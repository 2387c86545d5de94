package nn_test

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// largeBags draws nb bags of arbitrary int64 ids (large, negative; some repeated within and
// across bags) from a pool of distinct ids, with the padding id pad in some of them.
func largeBags(rng *rand.Rand, nb, distinct int, pad int64) (pool, ids, offsets []int64, weights []float32) {
	for len(pool) < distinct {
		id := rng.Int63() - rng.Int63()
		if id != pad && !slices.Contains(pool, id) {
			pool = append(pool, id)
		}
	}
	for b := 0; b < nb; b++ {
		offsets = append(offsets, int64(len(ids)))
		n := rng.Intn(400)
		for k := 0; k < n; k++ {
			id := pool[int(float64(len(pool))*math.Pow(rng.Float64(), 2))] // popular ids repeat
			if rng.Intn(50) == 0 {
				id = pad
			}
			ids = append(ids, id)
			weights = append(weights, rng.Float32()+0.25)
		}
	}
	return pool, ids, offsets, weights
}

// TestEmbeddingBagLargeBags checks the pooling of bags whose call holds thousands of distinct
// ids (the bags' hash table of distinct ids grows several times in a call, bags_dedupe.cc.h):
// arbitrary int64 ids, padding, sum with per-sample weights and mean. The output must equal a
// float64 pooling of the table's rows, the gradient a float64 sum over every occurrence, and
// the lookup must count every occurrence of each id as a plain Embedding lookup does.
func TestEmbeddingBagLargeBags(t *testing.T) {
	const dim, pad = 24, int64(-7)
	rng := rand.New(rand.NewSource(11))
	pool, ids, offsets, weights := largeBags(rng, 90, 6000, pad)
	rows := make([]float32, len(pool)*dim)
	for i := range rows {
		rows[i] = rng.Float32()*2 - 1
	}
	rowOf := map[int64]int{}
	for i, id := range pool {
		rowOf[id] = i
	}
	coef := make([]float32, len(offsets)*dim)
	for i := range coef {
		coef[i] = rng.Float32()*2 - 1
	}
	for _, mode := range []struct {
		name     string
		mode     embedding.BagMode
		weighted bool
	}{{"sum-weighted", embedding.Sum, true}, {"mean", embedding.Mean, false}} {
		t.Run(mode.name, func(t *testing.T) {
			cfg := embedding.Config{Dim: dim, Initializer: embedding.Zeros{}, Optimizer: embedding.SGD{LR: 1}, TrackAccess: true}
			newTable := func(name string) *embedding.Table {
				tbl := newEmbTable(t, "large/"+mode.name+"/"+name, cfg)
				if err := tbl.WriteIDs(pool, rows); err != nil {
					t.Fatal(err)
				}
				return tbl
			}
			opts := nn.EmbeddingOptions{Padding: true, PaddingID: pad}
			cgotorch.WithScope(func(*cgotorch.Scope) {
				tbl := newTable("bags")
				var w *cgotorch.Tensor
				if mode.weighted {
					w = cgotorch.MustFromSlice(weights)
				}
				out := nn.NewEmbeddingBag(tbl, mode.mode, opts).ForwardWeighted(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offsets), w)
				got := f32(t, out)
				want := make([]float64, len(offsets)*dim)
				grad := make([]float64, len(pool)*dim)
				for b := range offsets {
					end := int64(len(ids))
					if b+1 < len(offsets) {
						end = offsets[b+1]
					}
					n := 0
					for _, id := range ids[offsets[b]:end] {
						if id != pad {
							n++
						}
					}
					for p := offsets[b]; p < end; p++ {
						if ids[p] == pad {
							continue
						}
						s := 1.0
						if mode.weighted {
							s = float64(weights[p])
						} else {
							s /= float64(n)
						}
						r := rowOf[ids[p]]
						for j := 0; j < dim; j++ {
							want[b*dim+j] += s * float64(rows[r*dim+j])
							grad[r*dim+j] += s * float64(coef[b*dim+j])
						}
					}
				}
				for i := range want {
					if math.Abs(float64(got[i])-want[i]) > 1e-4*(1+math.Abs(want[i])) {
						t.Fatalf("out[%d] = %v, want %v", i, got[i], want[i])
					}
				}
				out.Mul(cgotorch.MustFromSlice(coef, out.Shape()...)).Sum().Backward()
				gids, grads, err := tbl.PendingGrad()
				if err != nil {
					t.Fatal(err)
				}
				gi, gg := toInt64(t, gids), f32(t, grads)
				seen := 0
				for k, id := range gi {
					r, ok := rowOf[id]
					if !ok {
						t.Fatalf("gradient of id %d, in no bag", id)
					}
					seen++
					for j := 0; j < dim; j++ {
						if g, wj := float64(gg[k*dim+j]), grad[r*dim+j]; math.Abs(g-wj) > 1e-4*(1+math.Abs(wj)) {
							t.Fatalf("grad of id %d [%d] = %v, want %v", id, j, g, wj)
						}
					}
				}
				plain := newTable("plain")
				nn.NewEmbedding(plain, opts).Forward(cgotorch.MustFromSlice(ids))
				mi, freq := idsAndFrequencies(t, tbl)
				pi, wantFreq := idsAndFrequencies(t, plain)
				if !slices.Equal(mi, pi) || !slices.Equal(freq, wantFreq) {
					t.Fatalf("ids and frequencies differ from a plain lookup's")
				}
				if distinct := len(slices.Compact(slices.Sorted(slices.Values(gi)))); distinct != len(gi) || seen < 2000 {
					t.Fatalf("%d gradient rows, %d distinct: want distinct ids, thousands of them", len(gi), distinct)
				}
			})
		})
	}
}
