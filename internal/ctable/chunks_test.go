package ctable_test

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// Tensor-kernel tables (CUDA's storage, here on the CPU) allocate one tensor per growth, a
// chunk, and grow at least by the capacity they have; batches are gathered and scattered chunk
// by chunk. TestTableChunks grows such a table through five chunks, checks the capacities,
// runs batches that mix all chunks (in scrambled order, with repeats) against a raw table,
// compacts (the rows left move into one new chunk of just the blocks they fill, the old chunks
// are freed) and grows again, for both layouts and for block sizes that are and are not powers
// of two.
func TestTableChunks(t *testing.T) {
	for _, c := range []struct {
		layout    ctable.Layout
		blockRows int64
		caps      []int64 // after inserting 1, 5, 9, 17 and 33 ids
		compacted int64   // the capacity after compaction down to 9 ids
		regrown   int64   // and after growing back to 30
	}{
		{ctable.LayoutSeparate, 4, []int64{4, 8, 16, 32, 64}, 12, 32},
		{ctable.LayoutInterleaved, 4, []int64{4, 8, 16, 32, 64}, 12, 32},
		{ctable.LayoutSeparate, 3, []int64{3, 6, 12, 24, 48}, 9, 30},
	} {
		t.Run(fmt.Sprintf("layout%d/blocks%d", c.layout, c.blockRows), func(t *testing.T) {
			var raw, ten *ctable.Table
			for i, p := range []**ctable.Table{&raw, &ten} {
				var err error
				*p, err = ctable.New(fmt.Sprintf("chunks-%d-%d-%d", c.layout, c.blockRows, i), ctable.Config{
					Dim: 3, BlockRows: c.blockRows, Init: ctable.InitNormal, InitParams: [4]float64{0, 1},
					Optimizer: ctable.OptSparseAdam, OptParams: [8]float64{0.05, 0.9, 0.999, 1e-8},
					Device: cgotorch.CPU, Layout: c.layout, TensorKernels: i == 1})
				if err != nil {
					t.Fatal(err)
				}
				defer (*p).Close()
			}
			var ids []int64
			for i, n := range []int{1, 5, 9, 17, 33} {
				for len(ids) < n {
					ids = append(ids, int64(1000-7*len(ids)))
				}
				lookupBoth(t, raw, ten, ids)
				if st := tableStats(t, ten); st.Capacity != c.caps[i] {
					t.Fatalf("%d ids: capacity %d, want %d", n, st.Capacity, c.caps[i])
				}
			}
			rng := rand.New(rand.NewSource(3))
			for step := 0; step < 3; step++ {
				batch := make([]int64, 40)
				for i := range batch {
					batch[i] = ids[rng.Intn(len(ids))]
				}
				grads := make([]float32, 3*len(batch))
				for i := range grads {
					grads[i] = rng.Float32() - 0.5
				}
				for _, tbl := range []*ctable.Table{raw, ten} {
					k, g := cgotorch.MustFromSlice(batch), cgotorch.MustFromSlice(grads, int64(len(batch)), 3)
					if err := tbl.Update(k, g); err != nil {
						t.Fatal(err)
					}
					k.Close()
					g.Close()
				}
				lookupBoth(t, raw, ten, batch)
			}
			sameExports(t, raw, ten)

			// keep the 9 ids inserted last (rows 24 to 32, in the last two chunks)
			del := cgotorch.MustFromSlice(ids[:len(ids)-9])
			before := tableStats(t, ten)
			for _, tbl := range []*ctable.Table{raw, ten} {
				if _, err := tbl.Delete(del); err != nil {
					t.Fatal(err)
				}
				if err := tbl.Compact(); err != nil {
					t.Fatal(err)
				}
			}
			del.Close()
			after := tableStats(t, ten)
			if after.Size != 9 || after.Capacity != c.compacted || after.Bytes >= before.Bytes {
				t.Fatalf("compacted: %+v (before %+v), want capacity %d", after, before, c.compacted)
			}
			sameExports(t, raw, ten)
			ids = ids[len(ids)-9:]
			for len(ids) < 30 {
				ids = append(ids, int64(-5*len(ids)))
			}
			lookupBoth(t, raw, ten, ids)
			if st := tableStats(t, ten); st.Capacity != c.regrown {
				t.Fatalf("grown again: capacity %d, want %d", st.Capacity, c.regrown)
			}
			sameExports(t, raw, ten)
		})
	}
}

func tableStats(t *testing.T, tbl *ctable.Table) ctable.Stats {
	t.Helper()
	st, err := tbl.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// lookupBoth looks ids up in both tables and wants the same rows.
func lookupBoth(t *testing.T, a, b *ctable.Table, ids []int64) {
	t.Helper()
	k := cgotorch.MustFromSlice(ids)
	defer k.Close()
	var got [2][]float32
	for i, tbl := range []*ctable.Table{a, b} {
		r, err := tbl.Lookup(k)
		if err != nil {
			t.Fatal(err)
		}
		got[i], _ = cgotorch.ToSlice[float32](r)
		r.Close()
	}
	if !floatsNear(got[0], got[1]) {
		t.Fatalf("lookup of %v: raw %v, tensor kernels %v", ids, got[0], got[1])
	}
}

// sameExports wants the same ids, rows and states in both tables.
func sameExports(t *testing.T, a, b *ctable.Table) {
	t.Helper()
	var snaps [2]*ctable.Snapshot
	for i, tbl := range []*ctable.Table{a, b} {
		s, err := tbl.Export()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		snaps[i] = s
	}
	ia, _ := cgotorch.ToSlice[int64](snaps[0].IDs)
	ib, _ := cgotorch.ToSlice[int64](snaps[1].IDs)
	if !slices.Equal(ia, ib) {
		t.Fatalf("ids %v and %v", ia, ib)
	}
	ts := [][2]*cgotorch.Tensor{{snaps[0].Rows, snaps[1].Rows}}
	for i := range snaps[0].States {
		ts = append(ts, [2]*cgotorch.Tensor{snaps[0].States[i], snaps[1].States[i]})
	}
	for i, p := range ts {
		x, _ := cgotorch.ToSlice[float32](p[0])
		y, _ := cgotorch.ToSlice[float32](p[1])
		if len(x) != 3*len(ia) || !floatsNear(x, y) {
			t.Fatalf("export part %d: raw %v, tensor kernels %v", i, x, y)
		}
	}
}

func floatsNear(x, y []float32) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if d := x[i] - y[i]; d > 1e-5 || d < -1e-5 {
			return false
		}
	}
	return true
}
