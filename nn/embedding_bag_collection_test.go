package nn_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// bagCase is one case of testdata/bags.json (gen_bags.py): torch.nn.EmbeddingBag over rows of
// random floats, its output for bags given by lengths (and the equivalent offsets) and the
// gradient of loss = sum(out * coef) with respect to every row.
type bagCase struct {
	Name     string    `json:"name"`
	Dim      int       `json:"dim"`
	Mode     string    `json:"mode"`
	TableIDs []int64   `json:"table_ids"`
	Rows     []float32 `json:"rows"`
	IDs      []int64   `json:"ids"`
	Lengths  []int64   `json:"lengths"`
	Offsets  []int64   `json:"offsets"` // include_last_offset
	Weights  []float32 `json:"weights"`
	Padding  *int64    `json:"padding"`
	Coef     []float32 `json:"coef"`
	Out      []float32 `json:"out"`
	Grad     []float32 `json:"grad"`
}

func loadBagCases(t *testing.T) []bagCase {
	t.Helper()
	b, err := os.ReadFile("testdata/bags.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []bagCase }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 5 {
		t.Fatalf("only %d cases", len(f.Cases))
	}
	return f.Cases
}

// bagGradTol: torch sums each id's gradient in sorted-index order, gorec in position order; the
// gradients are sums of up to about 20 products of floats of magnitude about 1.
const bagGradTol = 1e-6

func (c *bagCase) table(t *testing.T, name string) *embedding.Table {
	tbl := newEmbTable(t, "bags/"+c.Name+"/"+name, embedding.Config{Dim: c.Dim, Initializer: embedding.Zeros{},
		Optimizer: embedding.SGD{LR: 1}})
	var ids []int64
	var vals []float32
	for r, id := range c.TableIDs {
		if c.Padding == nil || id != *c.Padding {
			ids = append(ids, id)
			vals = append(vals, c.Rows[r*c.Dim:(r+1)*c.Dim]...)
		}
	}
	if err := tbl.WriteIDs(ids, vals); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func (c *bagCase) mode() embedding.BagMode {
	return map[string]embedding.BagMode{"sum": embedding.Sum, "mean": embedding.Mean}[c.Mode]
}

func (c *bagCase) options() nn.EmbeddingOptions {
	if c.Padding == nil {
		return nn.EmbeddingOptions{}
	}
	return nn.EmbeddingOptions{Padding: true, PaddingID: *c.Padding}
}

func (c *bagCase) weights() *cgotorch.Tensor {
	if c.Weights == nil {
		return nil
	}
	return cgotorch.MustFromSlice(c.Weights)
}

// check compares out with torch's output (bit for bit), runs the backward pass and compares the
// table's pending gradient with torch's.
func (c *bagCase) check(t *testing.T, what string, tbl *embedding.Table, out *cgotorch.Tensor) {
	t.Helper()
	got := f32(t, out)
	if len(got) != len(c.Out) {
		t.Fatalf("%s %s: %d outputs, want %d", c.Name, what, len(got), len(c.Out))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(c.Out[i]) {
			t.Fatalf("%s %s: out[%d] = %v, torch %v (bit for bit)", c.Name, what, i, got[i], c.Out[i])
		}
	}
	out.Mul(cgotorch.MustFromSlice(c.Coef, out.Shape()...)).Sum().Backward()
	ids, grads, err := tbl.PendingGrad()
	if err != nil {
		t.Fatal(err)
	}
	gi, gg := toInt64(t, ids), f32(t, grads)
	for r, id := range c.TableIDs {
		want := c.Grad[r*c.Dim : (r+1)*c.Dim]
		k := slices.Index(gi, id)
		for j := range want {
			var g float32
			if k >= 0 {
				g = gg[k*c.Dim+j]
			}
			if math.Abs(float64(g-want[j])) > bagGradTol*(1+math.Abs(float64(want[j]))) {
				t.Fatalf("%s %s: grad of id %d [%d] = %v, torch %v", c.Name, what, id, j, g, want[j])
			}
		}
	}
}

func toInt64(t *testing.T, x *cgotorch.Tensor) []int64 {
	t.Helper()
	v, err := cgotorch.ToSlice[int64](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestEmbeddingBagLargeBagsMatchTorch checks nn.EmbeddingBag (offsets, the last one left out as
// torch's default, and lengths) and nn.EmbeddingBagCollection (lengths, and include_last_offset offsets)
// against torch.nn.EmbeddingBag on bags of random rows: outputs bit for bit, gradients to
// bagGradTol.
func TestEmbeddingBagLargeBagsMatchTorch(t *testing.T) {
	for _, c := range loadBagCases(t) {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			tbl := c.table(t, "bag")
			b := nn.NewEmbeddingBag(tbl, c.mode(), c.options())
			offsets := cgotorch.MustFromSlice(c.Offsets[:len(c.Offsets)-1])
			c.check(t, "EmbeddingBag", tbl, b.ForwardWeighted(cgotorch.MustFromSlice(c.IDs), offsets, c.weights()))
			tbl = c.table(t, "bag-lengths")
			b = nn.NewEmbeddingBag(tbl, c.mode(), c.options())
			c.check(t, "EmbeddingBag lengths", tbl, b.ForwardLengths(cgotorch.MustFromSlice(c.IDs), cgotorch.MustFromSlice(c.Lengths), c.weights()))

			for _, kind := range []string{"lengths", "offsets"} {
				tbl := c.table(t, "collection-"+kind)
				col, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{{Name: "f", Table: tbl, Mode: c.mode()}}, c.options())
				if err != nil {
					t.Fatal(err)
				}
				in := nn.KeyedJagged{Keys: []string{"f"}, Values: cgotorch.MustFromSlice(c.IDs), Weights: c.weights()}
				if kind == "lengths" {
					in.Lengths = cgotorch.MustFromSlice(c.Lengths)
				} else {
					in.Offsets = cgotorch.MustFromSlice(c.Offsets)
				}
				c.check(t, "collection "+kind, tbl, col.Forward(in))
			}
		})
	}
}

// collectionTwins are the same features twice: each over its own tables with the same
// configuration (and so the same initial rows).
type collectionTwins struct {
	features [2][]nn.EmbeddingBagFeature
	tables   [2][]*embedding.Table
}

func newCollectionTwins(t *testing.T, name string, modes []embedding.BagMode) *collectionTwins {
	dims := []int{16, 5, 72}
	tw := &collectionTwins{}
	for k := 0; k < 2; k++ {
		for i, d := range dims {
			tbl := newEmbTable(t, fmt.Sprintf("%s/%d/t%d", name, k, i), embedding.Config{Dim: d, Seed: 9,
				Initializer: embedding.Normal{Std: 0.5}, Optimizer: embedding.SparseAdam{LR: 0.05}})
			tw.tables[k] = append(tw.tables[k], tbl)
		}
		for i, m := range modes {
			// feature 3 shares table 0 with feature 0
			tw.features[k] = append(tw.features[k], nn.EmbeddingBagFeature{Name: fmt.Sprintf("f%d", i), Table: tw.tables[k][i%3], Mode: m})
		}
	}
	return tw
}

// kjtBatch draws a batch of bags for every feature: ids from a small range (repeats within and
// across bags), some bags empty, some containing the padding id 7.
func kjtBatch(seed, features, batch int, weighted bool) (ids, lengths []int64, weights []float32) {
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	next := func(n int) int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(n))
	}
	for f := 0; f < features; f++ {
		for b := 0; b < batch; b++ {
			l := next(6)
			lengths = append(lengths, int64(l))
			for ; l > 0; l-- {
				ids = append(ids, int64(next(40)))
				if weighted {
					weights = append(weights, float32(next(9))/4-0.5)
				}
			}
		}
	}
	return ids, lengths, weights
}

// TestEmbeddingBagCollectionMatchesSeparateBags trains a collection of four features over three
// tables (one shared by two features) and, on twin tables, one nn.EmbeddingBag per feature whose
// outputs are concatenated, for a few steps of SparseAdam (Step, or fused into the backward pass):
// outputs and the rows after every step must be equal bit for bit.
func TestEmbeddingBagCollectionMatchesSeparateBags(t *testing.T) {
	const batch = 9
	for _, tc := range []struct {
		name     string
		modes    []embedding.BagMode
		weighted bool
		fused    bool
	}{
		{"mixed", []embedding.BagMode{embedding.Sum, embedding.Mean, embedding.Mean, embedding.Sum}, false, false},
		{"weighted", []embedding.BagMode{embedding.Sum, embedding.Sum, embedding.Sum, embedding.Sum}, true, false},
		{"fused", []embedding.BagMode{embedding.Mean, embedding.Sum, embedding.Mean, embedding.Sum}, false, true},
	} {
		tw := newCollectionTwins(t, t.Name()+"/"+tc.name, tc.modes)
		opts := nn.EmbeddingOptions{Padding: true, PaddingID: 7, Fused: tc.fused}
		col, err := nn.NewEmbeddingBagCollection(tw.features[0], opts)
		if err != nil {
			t.Fatal(err)
		}
		var bags []*nn.EmbeddingBag
		for _, f := range tw.features[1] {
			bags = append(bags, nn.NewEmbeddingBag(f.Table, f.Mode, opts))
		}
		keys := []string{"f3", "f0", "f2", "f1"} // the input's keys in another order than the features
		for step := 0; step < 4; step++ {
			ids, lengths, weights := kjtBatch(step, len(keys), batch, tc.weighted)
			cgotorch.WithScope(func(*cgotorch.Scope) {
				in := nn.KeyedJagged{Keys: keys, Values: cgotorch.MustFromSlice(ids), Lengths: cgotorch.MustFromSlice(lengths)}
				if tc.weighted {
					in.Weights = cgotorch.MustFromSlice(weights)
				}
				col.ZeroGrad()
				got := col.Forward(in)
				var parts []*cgotorch.Tensor
				for i, b := range bags {
					seg := slices.Index(keys, fmt.Sprintf("f%d", i))
					start := sumInt64(lengths[:seg*batch])
					offs := make([]int64, batch)
					for j := range offs {
						offs[j] = sumInt64(lengths[seg*batch : seg*batch+j])
					}
					end := start + sumInt64(lengths[seg*batch:(seg+1)*batch])
					var w *cgotorch.Tensor
					if tc.weighted {
						w = cgotorch.MustFromSlice(weights[start:end])
					}
					b.ZeroGrad()
					parts = append(parts, b.ForwardWeighted(cgotorch.MustFromSlice(ids[start:end]), cgotorch.MustFromSlice(offs), w))
				}
				want := cgotorch.Cat(parts, 1)
				equalBits(t, fmt.Sprintf("%s step %d output", tc.name, step), f32(t, got), f32(t, want))
				coef := cgotorch.MustFromSlice(coefs(int(got.Numel())), got.Shape()...)
				got.Mul(coef).Sum().Backward()
				want.Mul(coef).Sum().Backward()
				if err := col.Step(); err != nil {
					t.Fatal(err)
				}
				for _, b := range bags {
					if err := b.Step(); err != nil {
						t.Fatal(err)
					}
				}
			})
			for i := range tw.tables[0] {
				a, b := exportRows(t, tw.tables[0][i]), exportRows(t, tw.tables[1][i])
				if len(a) != len(b) {
					t.Fatalf("%s step %d table %d: %d ids, want %d", tc.name, step, i, len(a), len(b))
				}
				for id, r := range b {
					equalBits(t, fmt.Sprintf("%s step %d table %d id %d", tc.name, step, i, id), a[id], r)
				}
			}
		}
	}
}

func sumInt64(v []int64) (s int64) {
	for _, x := range v {
		s += x
	}
	return s
}

func coefs(n int) []float32 {
	c := make([]float32, n)
	for k := range c {
		c[k] = 0.25*float32(k%7-3) + 0.125*float32(k%3) + 0.0625
	}
	return c
}

func equalBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v (bit for bit)", what, i, got[i], want[i])
		}
	}
}

// TestEmbeddingBagCollectionBadInput checks that bad input is refused with ErrInvalidArgument
// and inserts nothing.
func TestEmbeddingBagCollectionBadInput(t *testing.T) {
	tbl := newEmbTable(t, t.Name(), embedding.Config{Dim: 4, Optimizer: embedding.SGD{LR: 1}})
	if _, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{{Name: "a", Table: tbl, Mode: embedding.Max}}, nn.EmbeddingOptions{}); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("max mode: %v", err)
	}
	if _, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{{Name: "a", Table: tbl}, {Name: "a", Table: tbl}}, nn.EmbeddingOptions{}); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("duplicate name: %v", err)
	}
	col, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{{Name: "a", Table: tbl, Mode: embedding.Mean}}, nn.EmbeddingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{1, 2, 3}
	for name, in := range map[string]nn.KeyedJagged{
		"lengths not adding up": {Keys: []string{"a"}, Lengths: cgotorch.MustFromSlice([]int64{1, 1})},
		"negative length":       {Keys: []string{"a"}, Lengths: cgotorch.MustFromSlice([]int64{4, -1})},
		"last offset not N":     {Keys: []string{"a"}, Offsets: cgotorch.MustFromSlice([]int64{0, 1, 2})},
		"decreasing offsets":    {Keys: []string{"a"}, Offsets: cgotorch.MustFromSlice([]int64{0, 2, 1, 3})},
		"missing key":           {Keys: []string{"b"}, Lengths: cgotorch.MustFromSlice([]int64{3})},
		"uneven segments":       {Keys: []string{"a", "b"}, Lengths: cgotorch.MustFromSlice([]int64{1, 1, 1})},
		"weights with mean":     {Keys: []string{"a"}, Lengths: cgotorch.MustFromSlice([]int64{3}), Weights: cgotorch.MustFromSlice([]float32{1, 1, 1})},
		"no bounds":             {Keys: []string{"a"}},
	} {
		in.Values = cgotorch.MustFromSlice(ids)
		err := cgotorch.Try(func() { col.Forward(in) })
		if !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if st, err := tbl.Stats(); err != nil || st.Len != 0 {
		t.Fatalf("after refused batches the table holds %d ids (%v), want 0", st.Len, err)
	}
}

// TestEmbeddingBagThreadsSameNumbers checks that a bag large enough to be pooled by several
// threads (forward split by bags, backward by ids) gives the numbers of one thread, bit for bit.
func TestEmbeddingBagThreadsSameNumbers(t *testing.T) {
	prev := cgotorch.NumThreads()
	defer cgotorch.SetNumThreads(prev)
	const dim, bags = 64, 400
	var ids, offsets []int64
	var weights []float32
	for b := 0; b < bags; b++ {
		offsets = append(offsets, int64(len(ids)))
		for k := 0; k < 60+b%17; k++ { // about 27k ids: 1.7M multiply-adds, over the serial bound
			ids = append(ids, int64((b*131+k*977)%3001))
			weights = append(weights, float32(k%5)/4-0.3)
		}
	}
	var outs, grads [2][]float32
	for i, threads := range []int{1, 2} {
		if err := cgotorch.SetNumThreads(threads); err != nil {
			t.Fatal(err)
		}
		tbl := newEmbTable(t, fmt.Sprintf("%s/%d", t.Name(), threads), embedding.Config{Dim: dim, Seed: 3,
			Initializer: embedding.Normal{Std: 1}, Optimizer: embedding.SGD{LR: 1}})
		b := nn.NewEmbeddingBag(tbl, embedding.Sum, nn.EmbeddingOptions{})
		cgotorch.WithScope(func(*cgotorch.Scope) {
			out := b.ForwardWeighted(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offsets), cgotorch.MustFromSlice(weights))
			out.Mul(cgotorch.MustFromSlice(coefs(bags*dim), bags, dim)).Sum().Backward()
			_, g, err := tbl.PendingGrad()
			if err != nil {
				t.Fatal(err)
			}
			outs[i], grads[i] = f32(t, out), f32(t, g)
		})
	}
	equalBits(t, "output, 2 threads", outs[1], outs[0])
	equalBits(t, "gradient, 2 threads", grads[1], grads[0])
}
