package ctable_test

import (
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/ctable"
	"github.com/gorec/gorec/internal/ctable/clookup"
)

// BenchmarkTableLookupGo compares Table.Lookup called from Go with the same op called from C,
// side by side in one process: a lookup of a batch of 4,096 random present ids on a table of
// 2^20 ids at dim 64, single thread, result freed, through embedding.Table.Lookup, through the
// binding's handle (ctable.Table.Lookup), and from a C loop over the C ABI (clookup.Loop). Each
// iteration times a group of 32 batches with each of the three, in a rotating order; each
// reports <name>-ns/batch, the best group mean. scripts/bench.sh prints the ratios to C
// (target: Go overhead under 20%).
func BenchmarkTableLookupGo(b *testing.B) {
	const n, dim, groups, batch = 1 << 20, 64, 32, 4096
	if err := cgotorch.SetNumThreads(1); err != nil {
		b.Fatal(err)
	}
	tbl, err := embedding.NewNamed(b.Name(), embedding.Config{Dim: dim, Capacity: n, Seed: 1,
		Initializer: embedding.Uniform{Low: -0.05, High: 0.05}})
	if err != nil {
		b.Fatal(err)
	}
	defer tbl.Close()
	key := func(k int64) int64 { return int64(uint64(k) * 0x9E3779B97F4A7C15) }
	v := make([]int64, 0, 65536)
	for s := int64(0); s < n; s += int64(cap(v)) {
		v = v[:0]
		for i := s; i < n && len(v) < cap(v); i++ {
			v = append(v, key(i))
		}
		k := cgotorch.MustFromSlice(v)
		if _, err := tbl.Indices(k, true); err != nil {
			b.Fatal(err)
		}
		k.Close()
	}
	raw, err := ctable.Open(b.Name())
	if err != nil {
		b.Fatal(err)
	}
	// (raw is released by its cleanup; closing it would close the table for tbl too.)
	rng := rand.New(rand.NewSource(7))
	var keys []*cgotorch.Tensor
	for j := 0; j < groups; j++ {
		v = v[:0]
		for i := 0; i < batch; i++ {
			v = append(v, key(rng.Int63n(n)))
		}
		keys = append(keys, cgotorch.MustFromSlice(v))
	}
	defer func() {
		for _, k := range keys {
			k.Close()
		}
	}()
	fromGo := func(lookup func(*cgotorch.Tensor) (*cgotorch.Tensor, error)) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			start := time.Now()
			for _, k := range keys {
				r, err := lookup(k)
				if err != nil {
					return 0, err
				}
				r.Close()
			}
			return time.Since(start), nil
		}
	}
	ways := []struct {
		name string
		run  func() (time.Duration, error)
	}{
		{"embedding", fromGo(tbl.Lookup)},
		{"ctable", fromGo(raw.Lookup)},
		{"c", func() (time.Duration, error) { return clookup.Loop(b.Name(), keys, groups) }},
	}
	best := make([]time.Duration, len(ways))
	for w := range best {
		best[w] = time.Duration(1 << 62)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range ways {
			w := (i + j) % len(ways)
			d, err := ways[w].run()
			if err != nil {
				b.Fatal(err)
			}
			best[w] = min(best[w], d)
		}
	}
	for w, way := range ways {
		b.ReportMetric(float64(best[w].Nanoseconds())/groups, way.name+"-ns/batch")
	}
}

// TestLookupLoopC checks the C baseline the benchmark compares with: it looks up (so it
// inserts) and reports its time, and it rejects what Table.Lookup rejects and a name that no
// open table has.
func TestLookupLoopC(t *testing.T) {
	tbl, err := ctable.New(t.Name(), ctable.Config{Dim: 4})
	if err != nil {
		t.Fatal(err)
	}
	keys := []*cgotorch.Tensor{cgotorch.MustFromSlice([]int64{1, 2, 3}), cgotorch.MustFromSlice([]int64{3, 4})}
	defer keys[0].Close()
	defer keys[1].Close()
	d, err := clookup.Loop(t.Name(), keys, 5)
	if err != nil || d <= 0 {
		t.Fatalf("Loop = %v, %v; want a positive duration", d, err)
	}
	if st, err := tbl.Stats(); err != nil || st.Size != 4 {
		t.Errorf("after the loop: stats %+v, %v; want 4 ids", st, err)
	}
	bad := cgotorch.MustFromSlice([]float32{1})
	defer bad.Close()
	if _, err := clookup.Loop(t.Name(), []*cgotorch.Tensor{bad}, 1); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("float keys: err = %v, want ErrInvalidArgument", err)
	}
	if _, err := clookup.Loop(t.Name(), nil, 1); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("no keys: err = %v, want ErrInvalidArgument", err)
	}
	tbl.Close()
	if _, err := clookup.Loop(t.Name(), keys, 1); !errors.Is(err, cgotorch.ErrNotFound) {
		t.Errorf("closed table: err = %v, want ErrNotFound", err)
	}
}
