package embedding_test

import (
	"math"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// Forward's lookup of host ids gathers rows and sums their gradients in raw loops: its output
// and pending gradients equal, bit for bit, index_select over the distinct ids' rows and that
// op's backward (index_add_ into zeros, in position order), with repeated ids, the padding id
// and a dim that is no multiple of four.
func TestForwardGatherEqualsIndexSelect(t *testing.T) {
	const dim, pad = 5, 7
	tbl, err := embedding.New(embedding.Config{Dim: dim, Seed: 3, Initializer: embedding.Normal{Std: 1},
		Optimizer: embedding.SGD{LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	ids := []int64{4, 9, pad, 4, 2, 9, 9, pad, 1, 4, 2, 3}
	coef := make([]float32, len(ids)*dim)
	for i := range coef {
		coef[i] = float32(math.Sin(float64(i)*1.7)) * 3
	}
	out, err := tbl.Forward(cgotorch.MustFromSlice(ids, 3, 4), embedding.ForwardOptions{Train: true, Padding: true, PaddingID: pad})
	if err != nil {
		t.Fatal(err)
	}
	backwardWith(out, coef)
	got := floats(t, out)
	pids, pgrads, err := tbl.PendingGrad()
	if err != nil {
		t.Fatal(err)
	}
	pending := map[int64][]float32{}
	pg := floats(t, pgrads)
	for i, id := range floats64(t, pids) {
		pending[id] = pg[i*dim : (i+1)*dim]
	}
	// The reference: the distinct ids' rows as a leaf, index_select by position (padding left
	// out), the same coefficients.
	var uids, inverse []int64
	var refCoef []float32
	for i, id := range ids {
		if id == pad {
			for j := 0; j < dim; j++ {
				if got[i*dim+j] != 0 {
					t.Fatalf("padding position %d: %v, want zeros", i, got[i*dim:(i+1)*dim])
				}
			}
			continue
		}
		k := -1
		for j, u := range uids {
			if u == id {
				k = j
			}
		}
		if k < 0 {
			k = len(uids)
			uids = append(uids, id)
		}
		inverse = append(inverse, int64(k))
		refCoef = append(refCoef, coef[i*dim:(i+1)*dim]...)
	}
	rows, _, err := tbl.ReadIDs(uids)
	if err != nil {
		t.Fatal(err)
	}
	w := rows.SetRequiresGrad(true)
	ref := w.IndexSelect(0, cgotorch.MustFromSlice(inverse))
	backwardWith(ref, refCoef)
	wantOut, wantGrad := floats(t, ref), floats(t, w.Grad())
	p := 0
	for i, id := range ids {
		if id == pad {
			continue
		}
		sameBits(t, "output", got[i*dim:(i+1)*dim], wantOut[p*dim:(p+1)*dim])
		p++
	}
	for k, id := range uids {
		sameBits(t, "gradient", pending[id], wantGrad[k*dim:(k+1)*dim])
	}
	if _, ok := pending[pad]; ok {
		t.Fatal("the padding id has a pending gradient")
	}
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d]: %v (%#x), want %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}
