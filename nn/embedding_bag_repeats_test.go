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

// TestEmbeddingBagRepeatedBags checks bags that repeat an earlier bag of the batch (pooled once
// on the C side): bags equal to an earlier one, a bag that differs from one only at an id its
// hash does not sample, one with the same ids but other weights, empty bags, padding. Each
// output row must equal the same bag pooled alone (bit for bit), the gradient must equal a
// float64 sum over every occurrence, and the lookup must count every occurrence of an id (as
// a plain Embedding lookup of the same ids counts them).
func TestEmbeddingBagRepeatedBags(t *testing.T) {
	const dim, nIDs, pad = 20, 60, int64(99)
	rng := rand.New(rand.NewSource(7))
	bag := func(n int) []int64 {
		b := make([]int64, n)
		for i := range b {
			b[i] = rng.Int63n(nIDs)
		}
		return b
	}
	a, b, c := bag(30), bag(25), bag(18)
	a2 := slices.Clone(a)
	a2[2] = (a2[2] + 1) % nIDs // (the hash samples positions 0, 4, 8, ...: a2 hashes as a)
	for _, mode := range []struct {
		name             string
		mode             embedding.BagMode
		weighted, padded bool
	}{{"sum", embedding.Sum, false, false}, {"sum-weighted", embedding.Sum, true, false}, {"mean-padding", embedding.Mean, false, true}} {
		t.Run(mode.name, func(t *testing.T) {
			aa := slices.Clone(a)
			if mode.padded {
				aa[5], aa[17] = pad, pad
			}
			// Bags; each kind's weights are drawn once, except the last A's (other weights).
			bags := [][]int64{aa, b, aa, c, a2, b, c, aa, aa, {}, b, {}}
			kinds := []int{0, 1, 0, 2, 3, 1, 2, 0, 4, 5, 1, 5}
			kindW := map[int][]float32{}
			var ids, offsets []int64
			var weights []float32
			for i, bg := range bags {
				offsets = append(offsets, int64(len(ids)))
				ids = append(ids, bg...)
				w, ok := kindW[kinds[i]]
				if !ok {
					for range bg {
						w = append(w, rng.Float32()+0.5)
					}
					kindW[kinds[i]] = w
				}
				weights = append(weights, w...)
			}
			cfg := embedding.Config{Dim: dim, Initializer: embedding.Zeros{}, Optimizer: embedding.SGD{LR: 1}, TrackAccess: true}
			rows := make([]float32, nIDs*dim)
			for i := range rows {
				rows[i] = rng.Float32()*2 - 1
			}
			all := make([]int64, nIDs)
			for i := range all {
				all[i] = int64(i)
			}
			newTable := func(name string) *embedding.Table {
				tbl := newEmbTable(t, "repeats/"+mode.name+"/"+name, cfg)
				if err := tbl.WriteIDs(all, rows); err != nil {
					t.Fatal(err)
				}
				return tbl
			}
			opts := nn.EmbeddingOptions{Padding: mode.padded, PaddingID: pad}
			w := func(ws []float32) *cgotorch.Tensor {
				if !mode.weighted {
					return nil
				}
				return cgotorch.MustFromSlice(ws)
			}
			coef := make([]float32, len(bags)*dim)
			for i := range coef {
				coef[i] = rng.Float32()*2 - 1
			}
			cgotorch.WithScope(func(*cgotorch.Scope) {
				tbl := newTable("batch")
				out := nn.NewEmbeddingBag(tbl, mode.mode, opts).ForwardWeighted(cgotorch.MustFromSlice(ids),
					cgotorch.MustFromSlice(offsets), w(weights))
				got := f32(t, out)
				// Each row: the bag pooled alone (a call of one bag has no repeats), bit for bit.
				alone := newTable("alone")
				for i, bg := range bags {
					o0 := int(offsets[i])
					fo := embedding.ForwardOptions{Padding: mode.padded, PaddingID: pad}
					var one *cgotorch.Tensor
					var err error
					if len(bg) == 0 {
						one = cgotorch.Zeros([]int64{1, dim})
					} else {
						one, err = alone.ForwardBag(cgotorch.MustFromSlice(bg), cgotorch.MustFromSlice([]int64{0}),
							w(weights[o0:o0+len(bg)]), mode.mode, fo)
						if err != nil {
							t.Fatal(err)
						}
					}
					want := f32(t, one)
					for j := range want {
						if math.Float32bits(got[i*dim+j]) != math.Float32bits(want[j]) {
							t.Fatalf("bag %d [%d] = %v, pooled alone %v (bit for bit)", i, j, got[i*dim+j], want[j])
						}
					}
				}
				// The gradient of sum(out * coef): every occurrence of an id, in float64.
				out.Mul(cgotorch.MustFromSlice(coef, out.Shape()...)).Sum().Backward()
				gids, grads, err := tbl.PendingGrad()
				if err != nil {
					t.Fatal(err)
				}
				want := make([]float64, nIDs*dim)
				for i, bg := range bags {
					n := 0
					for _, id := range bg {
						if !mode.padded || id != pad {
							n++
						}
					}
					for k, id := range bg {
						if mode.padded && id == pad {
							continue
						}
						s := 1.0
						if mode.weighted {
							s = float64(weights[int(offsets[i])+k])
						}
						if mode.mode == embedding.Mean {
							s /= float64(n)
						}
						for j := 0; j < dim; j++ {
							want[int(id)*dim+j] += s * float64(coef[i*dim+j])
						}
					}
				}
				gi, gg := toInt64(t, gids), f32(t, grads)
				for id := int64(0); id < nIDs; id++ {
					k := slices.Index(gi, id)
					for j := 0; j < dim; j++ {
						var g float64
						if k >= 0 {
							g = float64(gg[k*dim+j])
						}
						if wj := want[int(id)*dim+j]; math.Abs(g-wj) > 1e-5*(1+math.Abs(wj)) {
							t.Fatalf("grad of id %d [%d] = %v, want %v", id, j, g, wj)
						}
					}
				}
				// Occurrences counted: as a plain Embedding lookup of the same ids counts them.
				plain := newTable("plain")
				nn.NewEmbedding(plain, opts).Forward(cgotorch.MustFromSlice(ids))
				_, freq := idsAndFrequencies(t, tbl)
				_, wantFreq := idsAndFrequencies(t, plain)
				if !slices.Equal(freq, wantFreq) {
					t.Fatalf("frequencies %v, want %v", freq, wantFreq)
				}
			})
		})
	}
}

// idsAndFrequencies returns the ids of tbl's rows and their lookup counts (Metadata's).
func idsAndFrequencies(t *testing.T, tbl *embedding.Table) (ids, frequency []int64) {
	t.Helper()
	ids, _, frequency, err := tbl.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	return ids, frequency
}
