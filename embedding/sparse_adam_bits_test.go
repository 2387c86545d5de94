package embedding_test

import (
	"math"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// SparseAdam's raw kernel (four floats at a time, then one) gives, bit for bit, the float32
// operations of the rule in their order, each rounded: mu = (g-m)(1-b1), vu = (g*g-v)(1-b2),
// m += mu, v += vu, w += (-step) * ((mu+m_old) / (sqrt(vu+v_old)+eps)), over three steps, at
// dims 16, 21 (a tail of one) and 3. A faster kernel must keep these bits.
func TestSparseAdamRawKernelBits(t *testing.T) {
	const lr, b1, b2, eps = 0.05, 0.9, 0.999, 1e-8
	for _, dim := range []int{16, 21, 3} {
		tbl, err := embedding.New(embedding.Config{Dim: dim, Seed: 11, Initializer: embedding.Normal{Std: 1},
			Optimizer: embedding.SparseAdam{LR: lr, Beta1: b1, Beta2: b2, Eps: eps}})
		if err != nil {
			t.Fatal(err)
		}
		defer tbl.Close()
		ids := []int64{5, 8, 13}
		r0, err := tbl.LookupIDs(ids)
		if err != nil {
			t.Fatal(err)
		}
		w := floats(t, r0)
		m, v := make([]float32, len(w)), make([]float32, len(w))
		a1, a2, e := float32(1-b1), float32(1-b2), float32(eps)
		for step := 1; step <= 3; step++ {
			g := make([]float32, len(w))
			for i := range g {
				g[i] = float32(math.Sin(float64(i*step)+0.5)) * float32(step)
			}
			out, err := tbl.Forward(cgotorch.MustFromSlice(ids), embedding.ForwardOptions{Train: true})
			if err != nil {
				t.Fatal(err)
			}
			backwardWith(out, g)
			if err := tbl.Step(); err != nil {
				t.Fatal(err)
			}
			ss := lr * math.Sqrt(1-math.Pow(b2, float64(step))) / (1 - math.Pow(b1, float64(step)))
			nss := float32(-ss)
			for i := range w {
				mu := float32(float32(g[i]-m[i]) * a1)
				vu := float32(float32(float32(g[i]*g[i])-v[i]) * a2)
				numer := float32(mu + m[i])
				denom := float32(float32(math.Sqrt(float64(float32(vu+v[i])))) + e)
				m[i], v[i] = float32(m[i]+mu), float32(v[i]+vu)
				w[i] = float32(w[i] + float32(nss*float32(numer/denom)))
			}
			got, _, err := tbl.ReadIDs(ids)
			if err != nil {
				t.Fatal(err)
			}
			sameBits(t, "rows", floats(t, got), w)
		}
	}
}
