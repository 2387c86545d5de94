package kernelfloor

// #cgo CFLAGS: -O2 -std=c11 -Wall
// #cgo LDFLAGS: -lm
// #include "kernelfloor.h"
import "C"

import (
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
)

// ISA is an instruction set the kernels can run with.
type ISA int

// The kernels' forms: Portable runs everywhere; AVX2 and AVX512 only where Supported.
const (
	Portable ISA = C.KF_PORTABLE
	AVX2     ISA = C.KF_AVX2
	AVX512   ISA = C.KF_AVX512
)

func (i ISA) String() string {
	return [...]string{"portable", "avx2", "avx512"}[i]
}

// Supported reports whether isa's kernels run on this CPU.
func Supported(isa ISA) bool { return C.kf_supported(C.int(isa)) != 0 }

// Best is the widest form this CPU runs (AVX-512 left out when GOREC_NO_AVX512 is set and not
// 0, as for gorec's table kernels).
func Best() ISA {
	if e := os.Getenv("GOREC_NO_AVX512"); (e == "" || e == "0") && Supported(AVX512) {
		return AVX512
	}
	if Supported(AVX2) {
		return AVX2
	}
	return Portable
}

// Batch is one batch's bags over rows remapped to 0..Rows-1, with each row's occurrences listed
// for the backward.
type Batch struct {
	Dim, Bags, Rows  int
	bagStart, idx    []int32 // bag b holds occurrences [bagStart[b], bagStart[b+1]) of rows idx
	w                []float32
	occStart, occBag []int32 // row k occurs [occStart[k], occStart[k+1]) in bags occBag (position order)
	occW             []float32
}

// NewBatch prepares the bags of ids (bag b: positions [offsets[b], offsets[b+1]), the first at
// 0, the last one to the end) with per-id weights: the distinct ids become rows 0..Rows-1 in order of first
// occurrence.
func NewBatch(ids, offsets []int64, weights []float32, dim int) (*Batch, error) {
	n := len(ids)
	if len(weights) != n || dim <= 0 || n > math.MaxInt32 || (n > 0 && (len(offsets) == 0 || offsets[0] != 0)) {
		return nil, fmt.Errorf("kernelfloor: %d ids, %d weights, %d offsets (the first at 0), dim %d", n, len(weights),
			len(offsets), dim)
	}
	b := &Batch{Dim: dim, Bags: len(offsets), bagStart: make([]int32, len(offsets)+1), idx: make([]int32, n),
		w: append([]float32(nil), weights...)}
	for i, o := range offsets {
		if o < 0 || o > int64(n) || (i > 0 && o < offsets[i-1]) {
			return nil, fmt.Errorf("kernelfloor: offset %d is %d (of %d ids)", i, o, n)
		}
		b.bagStart[i] = int32(o)
	}
	b.bagStart[len(offsets)] = int32(n)
	row := make(map[int64]int32)
	for q, id := range ids {
		k, ok := row[id]
		if !ok {
			k = int32(len(row))
			row[id] = k
		}
		b.idx[q] = k
	}
	b.Rows = len(row)
	// Each row's occurrences, in position order (a counting sort).
	b.occStart = make([]int32, b.Rows+1)
	for _, k := range b.idx {
		b.occStart[k+1]++
	}
	for k := 0; k < b.Rows; k++ {
		b.occStart[k+1] += b.occStart[k]
	}
	next := append([]int32(nil), b.occStart[:b.Rows]...)
	b.occBag, b.occW = make([]int32, n), make([]float32, n)
	for bag := 0; bag < b.Bags; bag++ {
		for q := b.bagStart[bag]; q < b.bagStart[bag+1]; q++ {
			k := b.idx[q]
			b.occBag[next[k]], b.occW[next[k]] = int32(bag), b.w[q]
			next[k]++
		}
	}
	return b, nil
}

// IDs is the number of ids in the bags (occurrences, repeats counted).
func (b *Batch) IDs() int { return len(b.idx) }

// Forward sets out ([Bags, Dim]) to each bag's weighted sum of its rows of rows ([Rows, Dim]).
func (b *Batch) Forward(isa ISA, out, rows []float32, threads int) {
	need(len(out), b.Bags*b.Dim, "forward's out")
	need(len(rows), b.Rows*b.Dim, "forward's rows")
	b.weightedSum(isa, out, rows, b.bagStart, b.idx, b.w, threads)
}

// Backward sets grad ([Rows, Dim]) to each row's sum over its occurrences of its bag's gradient
// (bagGrad: [Bags, Dim]) times its weight.
func (b *Batch) Backward(isa ISA, grad, bagGrad []float32, threads int) {
	need(len(grad), b.Rows*b.Dim, "backward's grad")
	need(len(bagGrad), b.Bags*b.Dim, "backward's bag gradient")
	b.weightedSum(isa, grad, bagGrad, b.occStart, b.occBag, b.occW, threads)
}

func (b *Batch) weightedSum(isa ISA, out, src []float32, start, idx []int32, w []float32, threads int) {
	if len(start) < 2 || len(idx) == 0 {
		clear(out)
		return
	}
	bounds := split(start, threads)
	parallel(bounds, func(r0, r1 int) {
		C.kf_weighted_sum(C.int(isa), (*C.float)(&out[0]), (*C.float)(&src[0]), C.int64_t(b.Dim),
			(*C.int32_t)(&start[0]), (*C.int32_t)(&idx[0]), (*C.float)(&w[0]), C.int64_t(r0), C.int64_t(r1))
	})
}

// AdamOptions are SparseAdam's hyperparameters.
type AdamOptions struct {
	LR, Beta1, Beta2, Eps float64
}

// SparseAdam takes step (1, 2, ...) of SparseAdam on p with moments m and v and gradient g
// (all of one length), as torch.optim.SparseAdam computes it for the rows of a sparse gradient.
func SparseAdam(isa ISA, p, m, v, g []float32, o AdamOptions, step, threads int) {
	n := len(p)
	need(len(m), n, "adam's m")
	need(len(v), n, "adam's v")
	need(len(g), n, "adam's g")
	if n == 0 {
		return
	}
	bc1, bc2 := 1-math.Pow(o.Beta1, float64(step)), 1-math.Pow(o.Beta2, float64(step))
	nss := C.float(-o.LR * math.Sqrt(bc2) / bc1)
	a1, a2, eps := C.float(1-o.Beta1), C.float(1-o.Beta2), C.float(o.Eps)
	threads = max(1, min(threads, n/16))
	bounds := make([]int, threads+1)
	for t := range bounds {
		bounds[t] = n * t / threads / 16 * 16 // (whole vectors but the last part's)
	}
	bounds[threads] = n
	parallel(bounds, func(i0, i1 int) {
		C.kf_sparse_adam(C.int(isa), (*C.float)(&p[0]), (*C.float)(&m[0]), (*C.float)(&v[0]), (*C.float)(&g[0]),
			C.int64_t(i0), C.int64_t(i1), a1, a2, eps, nss)
	})
}

// split cuts rows [0, len(start)-1) into at most threads ranges of about equal occurrences
// (start: each row's first, then their end): bounds of the ranges.
func split(start []int32, threads int) []int {
	rows := len(start) - 1
	threads = max(1, min(threads, rows))
	bounds := make([]int, threads+1)
	total := int64(start[rows] - start[0])
	for t := 1; t < threads; t++ {
		at := int32(int64(start[0]) + total*int64(t)/int64(threads))
		bounds[t] = max(bounds[t-1], sort.Search(rows, func(r int) bool { return start[r] >= at }))
	}
	bounds[threads] = rows
	return bounds
}

// parallel runs f on each range [bounds[t], bounds[t+1]), the last on the calling goroutine.
func parallel(bounds []int, f func(lo, hi int)) {
	last := len(bounds) - 2
	var wg sync.WaitGroup
	for t := 0; t < last; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(bounds[t], bounds[t+1])
		}()
	}
	f(bounds[last], bounds[last+1])
	wg.Wait()
}

func need(got, want int, what string) {
	if got != want {
		panic(fmt.Sprintf("kernelfloor: %s has %d floats, want %d", what, got, want))
	}
}
