package nn_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// splitBags are bags large enough for a bag call to split over threads: about 75k ids, 51k of
// them in first bags (as SVD++'s), of 14k-18k distinct (the pooling splits from a million
// multiply-adds, the optimizer step by its work, the id map's find from 32k ids), every third
// bag a repeat of the one before, some padding ids (0).
func splitBags() (ids, offsets []int64, weights []float32) {
	r := rand.New(rand.NewPCG(7, 8))
	for b := 0; b < 700; b++ {
		offsets = append(offsets, int64(len(ids)))
		if b%3 == 2 { // the bag before, again
			p0, p1 := offsets[b-1], offsets[b]
			ids = append(ids, ids[p0:p1]...)
			weights = append(weights, weights[p0:p1]...)
			continue
		}
		for k, n := 0, 60+r.IntN(100); k < n; k++ {
			id := int64(1 + r.IntN(20000))
			if r.IntN(40) == 0 {
				id = 0
			}
			ids = append(ids, id)
			weights = append(weights, r.Float32()-0.3)
		}
	}
	return ids, offsets, weights
}

// TestEmbeddingBagLargeSplitsSameResults checks that a bag call whose lookup, gather and pooling
// are split over two threads gives what one thread gives, bit for bit: the pooled output, the
// rows' gradient and its ids' order, and the rows the new ids were given (their insertion
// order: a split that reordered the distinct ids would change them), for weighted sum bags and
// mean bags with a padding id, on tables already holding half of the ids.
func TestEmbeddingBagLargeSplitsSameResults(t *testing.T) {
	prev := cgotorch.NumThreads()
	defer cgotorch.SetNumThreads(prev)
	ids, offsets, weights := splitBags()
	const dim = 64
	for _, mode := range []embedding.BagMode{embedding.Sum, embedding.Mean} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			type result struct {
				out, grad []float32
				gradIDs   []int64
				rows      []int64
			}
			var res [2]result
			for i, threads := range []int{1, 2} {
				if err := cgotorch.SetNumThreads(threads); err != nil {
					t.Fatal(err)
				}
				tbl := newEmbTable(t, fmt.Sprintf("%s/%d", t.Name(), threads), embedding.Config{Dim: dim, Seed: 5,
					Initializer: embedding.Normal{Std: 1}, Optimizer: embedding.SGD{LR: 1}})
				present := make([]int64, 0, 10000)
				for id := int64(20000); id > 0; id -= 2 { // half of the ids, in an order of their own
					present = append(present, id)
				}
				if _, err := tbl.IndicesIDs(present, true); err != nil {
					t.Fatal(err)
				}
				bag := nn.NewEmbeddingBag(tbl, mode, nn.EmbeddingOptions{Padding: true, PaddingID: 0})
				cgotorch.WithScope(func(*cgotorch.Scope) {
					var out *cgotorch.Tensor
					if mode == embedding.Sum {
						out = bag.ForwardWeighted(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offsets), cgotorch.MustFromSlice(weights))
					} else {
						out = bag.Forward(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offsets))
					}
					bags := int64(len(offsets))
					out.Mul(cgotorch.MustFromSlice(coefs(int(bags)*dim), bags, dim)).Sum().Backward()
					gids, g, err := tbl.PendingGrad()
					if err != nil {
						t.Fatal(err)
					}
					res[i].out, res[i].grad = f32(t, out), f32(t, g)
					if res[i].gradIDs, err = cgotorch.ToSlice[int64](gids); err != nil {
						t.Fatal(err)
					}
				})
				all := slices.Clone(ids)
				slices.Sort(all)
				all = slices.Compact(all)[1:] // (without the padding id)
				rows, err := tbl.IndicesIDs(all, false)
				if err != nil {
					t.Fatal(err)
				}
				res[i].rows = rows
			}
			if len(res[0].gradIDs) < 10000 {
				t.Fatalf("%d distinct ids: too few to split the lookup", len(res[0].gradIDs))
			}
			equalBits(t, "output, 2 threads", res[1].out, res[0].out)
			if !slices.Equal(res[1].gradIDs, res[0].gradIDs) {
				t.Fatal("the gradient's ids differ (order) between 1 and 2 threads")
			}
			equalBits(t, "gradient, 2 threads", res[1].grad, res[0].grad)
			if !slices.Equal(res[1].rows, res[0].rows) {
				t.Fatal("the ids' rows (insertion order) differ between 1 and 2 threads")
			}
		})
	}
}
