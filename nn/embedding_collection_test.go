package nn_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// An EmbeddingCollection gives, feature by feature, the rows and gradients of one Embedding per
// feature, bit for bit, with padding, a table shared by two features and keys in another order
// than the features, by lengths and by offsets; then every table steps as the Embeddings' do.
func TestEmbeddingCollectionMatchesSeparateEmbeddings(t *testing.T) {
	const batch = 7
	tw := newCollectionTwins(t, t.Name(), []embedding.BagMode{embedding.Sum, embedding.Sum, embedding.Sum, embedding.Sum})
	opts := nn.EmbeddingOptions{Padding: true, PaddingID: 7}
	var fs []nn.EmbeddingFeature
	for _, f := range tw.features[0] {
		fs = append(fs, nn.EmbeddingFeature{Name: f.Name, Table: f.Table})
	}
	col, err := nn.NewEmbeddingCollection(fs, opts)
	if err != nil {
		t.Fatal(err)
	}
	var embs []*nn.Embedding
	for _, f := range tw.features[1] {
		embs = append(embs, nn.NewEmbedding(f.Table, opts))
	}
	keys := []string{"f3", "f0", "f2", "f1"}
	for step := 0; step < 4; step++ {
		ids, lengths, _ := kjtBatch(step, len(keys), batch, false)
		in := nn.KeyedJagged{Keys: keys, Values: cgotorch.MustFromSlice(ids), Lengths: cgotorch.MustFromSlice(lengths)}
		if step%2 == 1 { // by offsets
			offs := []int64{0}
			for _, l := range lengths {
				offs = append(offs, offs[len(offs)-1]+l)
			}
			in.Lengths, in.Offsets = nil, cgotorch.MustFromSlice(offs)
		}
		cgotorch.WithScope(func(*cgotorch.Scope) {
			col.ZeroGrad()
			for _, e := range embs {
				e.ZeroGrad()
			}
			got := col.Forward(in)
			for i, e := range embs {
				seg := slices.Index(keys, fmt.Sprintf("f%d", i))
				start := sumInt64(lengths[:seg*batch])
				end := start + sumInt64(lengths[seg*batch:(seg+1)*batch])
				want := e.Forward(cgotorch.MustFromSlice(ids[start:end]))
				equalBits(t, fmt.Sprintf("step %d feature %d", step, i), f32(t, got[i]), f32(t, want))
				coef := cgotorch.MustFromSlice(coefs(int(want.Numel())), want.Shape()...)
				got[i].Mul(coef).Sum().Backward()
				want.Mul(coef).Sum().Backward()
			}
			if err := col.Step(); err != nil {
				t.Fatal(err)
			}
			for _, e := range embs {
				if err := e.Step(); err != nil {
					t.Fatal(err)
				}
			}
		})
		for i := range tw.tables[0] {
			a, b := exportRows(t, tw.tables[0][i]), exportRows(t, tw.tables[1][i])
			if len(a) != len(b) {
				t.Fatalf("step %d table %d: %d ids, want %d", step, i, len(a), len(b))
			}
			for id, r := range b {
				equalBits(t, fmt.Sprintf("step %d table %d id %d", step, i, id), a[id], r)
			}
		}
	}
	if tables, ids, err := col.TableIDs(nn.KeyedJagged{Keys: []string{"f0", "f1", "f2", "f3"},
		Values: cgotorch.MustFromSlice([]int64{1, 7, 2, 3, 4}), Lengths: cgotorch.MustFromSlice([]int64{2, 1, 1, 1})}); err != nil ||
		len(tables) != 3 || fmt.Sprint(ids) != "[[1 4] [2] [3]]" {
		t.Errorf("TableIDs: %d tables, ids %v (%v); want 3 tables, [[1 4] [2] [3]] (the padding id left out)", len(tables), ids, err)
	}
}

// Bad input to an EmbeddingCollection is refused with ErrInvalidArgument and inserts nothing.
func TestEmbeddingCollectionBadInput(t *testing.T) {
	tbl := newEmbTable(t, t.Name(), embedding.Config{Dim: 4, Optimizer: embedding.SGD{LR: 1}})
	if _, err := nn.NewEmbeddingCollection([]nn.EmbeddingFeature{{Name: "a", Table: tbl}, {Name: "a", Table: tbl}}, nn.EmbeddingOptions{}); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("duplicate name: %v", err)
	}
	if _, err := nn.NewEmbeddingCollection(nil, nn.EmbeddingOptions{}); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("no features: %v", err)
	}
	col, err := nn.NewEmbeddingCollection([]nn.EmbeddingFeature{{Name: "a", Table: tbl}}, nn.EmbeddingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := cgotorch.MustFromSlice([]int64{1, 2, 3})
	closed := cgotorch.MustFromSlice([]int64{1, 2, 3})
	closed.Close()
	for name, in := range map[string]nn.KeyedJagged{
		"closed ids":  {Keys: []string{"a"}, Values: closed, Lengths: cgotorch.MustFromSlice([]int64{3})},
		"2-d ids":     {Keys: []string{"a"}, Values: cgotorch.MustFromSlice([]int64{1, 2, 3}, 1, 3), Lengths: cgotorch.MustFromSlice([]int64{3})},
		"no key":      {Keys: []string{"b"}, Values: ids, Lengths: cgotorch.MustFromSlice([]int64{3})},
		"lengths":     {Keys: []string{"a"}, Values: ids, Lengths: cgotorch.MustFromSlice([]int64{4})},
		"no bounds":   {Keys: []string{"a"}, Values: ids},
		"weights":     {Keys: []string{"a"}, Values: ids, Lengths: cgotorch.MustFromSlice([]int64{3}), Weights: cgotorch.MustFromSlice([]float32{1, 1, 1})},
		"float ids":   {Keys: []string{"a"}, Values: cgotorch.MustFromSlice([]float32{1, 2, 3}), Lengths: cgotorch.MustFromSlice([]int64{3})},
		"both bounds": {Keys: []string{"a"}, Values: ids, Lengths: cgotorch.MustFromSlice([]int64{3}), Offsets: cgotorch.MustFromSlice([]int64{0, 3})},
	} {
		if err := cgotorch.Try(func() { col.Forward(in) }); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
		if _, _, err := col.TableIDs(in); !errors.Is(err, cgotorch.ErrInvalidArgument) { // as Forward
			t.Errorf("%s: TableIDs: %v, want ErrInvalidArgument", name, err)
		}
		if tbl.Len() != 0 {
			t.Fatalf("%s: %d ids inserted", name, tbl.Len())
		}
	}
}
