package nn_test

import (
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// BenchmarkIDBits times a lookup of 50,000 distinct ids through nn.Embedding and through one bag
// of nn.EmbeddingBag, for ids that differ in their low bits (0, 1, 2, ...) and ids that differ
// only in their high bits (i << 40, as a field tag above a value may make them). Both
// deduplicate the ids in an open-addressed table; its home slot once came from the product's
// middle bits, which every high-bit id shares, and the high case took 0.7 s a call against 2 ms.
// scripts/bench.sh prints high over low (about 1 when the hash spreads them).
func BenchmarkIDBits(b *testing.B) {
	for _, c := range []struct {
		name  string
		shift int
	}{{"low", 0}, {"high", 40}} {
		ids := make([]int64, 50_000)
		for i := range ids {
			ids[i] = int64(i) << c.shift
		}
		for _, op := range []string{"lookup", "bag"} {
			b.Run(op+"-"+c.name, func(b *testing.B) {
				tbl, err := embedding.New(embedding.Config{Dim: 8, Initializer: embedding.Zeros{}, Optimizer: embedding.SGD{LR: 0.1}})
				if err != nil {
					b.Fatal(err)
				}
				defer tbl.Close()
				t, offsets := cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice([]int64{0})
				forward := nn.NewEmbedding(tbl, nn.EmbeddingOptions{}).Forward
				if op == "bag" {
					bag := nn.NewEmbeddingBag(tbl, embedding.Sum, nn.EmbeddingOptions{})
					forward = func(ids *nn.Tensor) *nn.Tensor { return bag.Forward(ids, offsets) }
				}
				forward(t) // the rows exist from here on: the loop times deduplication and lookup
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					cgotorch.WithScope(func(*cgotorch.Scope) { forward(t) })
				}
			})
		}
	}
}
