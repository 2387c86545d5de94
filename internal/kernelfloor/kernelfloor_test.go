package kernelfloor

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// testBags draws bags of ids from a small universe (repeats within and across bags; bag 1 is
// empty) with per-id weights.
func testBags(rng *rand.Rand) (ids, offsets []int64, weights []float32) {
	for b := 0; b < 37; b++ {
		offsets = append(offsets, int64(len(ids)))
		n := rng.Intn(60)
		if b == 1 {
			n = 0
		}
		for range n {
			ids = append(ids, int64(rng.Intn(90))<<33|7)
			weights = append(weights, rng.Float32()*2-1)
		}
	}
	return ids, offsets, weights
}

func randFloats(rng *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = (rng.Float32()*2 - 1) * scale
	}
	return x
}

// The kernels of every form this CPU runs, on 1 and 3 threads, give the bits of a plain Go
// computation (products rounded before they are added, torch's SparseAdam operations), for
// dims that take the AVX-512, the AVX2 and the portable loops.
func TestKernelsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	ids, offsets, weights := testBags(rng)
	for _, dim := range []int{128, 144, 40, 13} {
		b, err := NewBatch(ids, offsets, weights, dim)
		if err != nil {
			t.Fatal(err)
		}
		rows := randFloats(rng, b.Rows*dim, 1)
		bagGrad := randFloats(rng, b.Bags*dim, 1e-2)
		p, m, v := randFloats(rng, b.Rows*dim, 1), randFloats(rng, b.Rows*dim, 1e-2), randFloats(rng, b.Rows*dim, 1e-4)
		for i := range v {
			v[i] = float32(math.Abs(float64(v[i])))
		}
		o := AdamOptions{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
		wantOut, wantGrad := goForward(ids, offsets, weights, rows, dim), goBackward(ids, offsets, weights, bagGrad, dim)
		wantP, wantM, wantV := slices.Clone(p), slices.Clone(m), slices.Clone(v)
		goSparseAdam(wantP, wantM, wantV, wantGrad, o, 3)
		for _, isa := range []ISA{Portable, AVX2, AVX512} {
			if !Supported(isa) {
				t.Logf("%v: not on this CPU", isa)
				continue
			}
			for _, threads := range []int{1, 3} {
				out, grad := make([]float32, b.Bags*dim), make([]float32, b.Rows*dim)
				b.Forward(isa, out, rows, threads)
				b.Backward(isa, grad, bagGrad, threads)
				gp, gm, gv := slices.Clone(p), slices.Clone(m), slices.Clone(v)
				SparseAdam(isa, gp, gm, gv, grad, o, 3, threads)
				for _, c := range []struct {
					what      string
					got, want []float32
				}{{"forward", out, wantOut}, {"backward", grad, wantGrad}, {"adam p", gp, wantP}, {"adam m", gm, wantM},
					{"adam v", gv, wantV}} {
					if i := firstDiff(c.got, c.want); i >= 0 {
						t.Errorf("dim %d, %v, %d threads: %s[%d] = %g, want %g", dim, isa, threads, c.what, i, c.got[i], c.want[i])
					}
				}
			}
		}
	}
}

// NewBatch numbers the distinct ids in order of first occurrence and lists each row's
// occurrences in position order.
func TestNewBatchRows(t *testing.T) {
	b, err := NewBatch([]int64{50, 7, 50, 9, 7}, []int64{0, 2, 2}, []float32{1, 2, 3, 4, 5}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if b.Rows != 3 || b.Bags != 3 || !slices.Equal(b.idx, []int32{0, 1, 0, 2, 1}) ||
		!slices.Equal(b.bagStart, []int32{0, 2, 2, 5}) || !slices.Equal(b.occStart, []int32{0, 2, 4, 5}) ||
		!slices.Equal(b.occBag, []int32{0, 2, 0, 2, 2}) || !slices.Equal(b.occW, []float32{1, 3, 2, 5, 4}) {
		t.Fatalf("batch %+v", b)
	}
	for _, offsets := range [][]int64{{0, 3}, {1}, {}, {0, 2, 1}} {
		if _, err := NewBatch([]int64{1, 2}, offsets, []float32{1, 1}, 4); err == nil {
			t.Errorf("offsets %v of 2 ids: no error", offsets)
		}
	}
}

func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// bagEnd is the end of bag b's positions.
func bagEnd(offsets []int64, b, n int) int64 {
	if b+1 < len(offsets) {
		return offsets[b+1]
	}
	return int64(n)
}

// goForward pools each bag: the sum of weight x row over its ids, in order (rows numbered by
// first occurrence).
func goForward(ids, offsets []int64, w, rows []float32, dim int) []float32 {
	row := firstOccurrence(ids)
	out := make([]float32, len(offsets)*dim)
	for b := range offsets {
		o := out[b*dim : (b+1)*dim]
		for q := offsets[b]; q < bagEnd(offsets, b, len(ids)); q++ {
			s := rows[row[ids[q]]*dim:]
			for j := range o {
				o[j] += float32(w[q] * s[j])
			}
		}
	}
	return out
}

// goBackward adds each occurrence's bag gradient times its weight to its row's gradient, in
// position order.
func goBackward(ids, offsets []int64, w, bagGrad []float32, dim int) []float32 {
	row := firstOccurrence(ids)
	grad := make([]float32, len(row)*dim)
	for b := range offsets {
		for q := offsets[b]; q < bagEnd(offsets, b, len(ids)); q++ {
			g := grad[row[ids[q]]*dim:]
			for j := 0; j < dim; j++ {
				g[j] += float32(bagGrad[b*dim+j] * w[q])
			}
		}
	}
	return grad
}

// goSparseAdam is torch.optim.SparseAdam's step on every element, in float32.
func goSparseAdam(p, m, v, g []float32, o AdamOptions, step int) {
	bc1, bc2 := 1-math.Pow(o.Beta1, float64(step)), 1-math.Pow(o.Beta2, float64(step))
	nss := float32(-o.LR * math.Sqrt(bc2) / bc1)
	a1, a2, eps := float32(1-o.Beta1), float32(1-o.Beta2), float32(o.Eps)
	for i := range p {
		mu := float32(float32(g[i]-m[i]) * a1)
		vu := float32(float32(float32(g[i]*g[i])-v[i]) * a2)
		numer := mu + m[i]
		denom := float32(math.Sqrt(float64(vu+v[i]))) + eps
		m[i] += mu
		v[i] += vu
		p[i] += float32(nss * float32(numer/denom))
	}
}

func firstOccurrence(ids []int64) map[int64]int {
	row := map[int64]int{}
	for _, id := range ids {
		if _, ok := row[id]; !ok {
			row[id] = len(row)
		}
	}
	return row
}
