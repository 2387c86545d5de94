package embedding_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/procstat"
)

func int64s(t testing.TB, x *cgotorch.Tensor) []int64 {
	t.Helper()
	v, err := cgotorch.ToSlice[int64](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ones(n int) []float32 { return filled(n, 1) }

// stepEach updates id k once at step k+1 (ids 0..n-1), so id k's last step is k+1.
func stepEach(t testing.TB, tbl *embedding.Table, n int) {
	for k := 0; k < n; k++ {
		if err := tbl.UpdateIDs([]int64{int64(k)}, ones(tbl.Dim())); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEvictTTL(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.SGD{LR: 0.1}, BlockRows: 4, TrackAccess: true})
	stepEach(t, tbl, 10)
	rowsBefore, _ := read(t, tbl, 0, 1, 2, 3, 4, 5)
	ev, err := tbl.Evict(context.Background(), embedding.TTL(3), true)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	// step 10: rows last seen at steps 1..6 are more than 3 steps old.
	if got := int64s(t, ev.IDs); !reflect.DeepEqual(got, []int64{0, 1, 2, 3, 4, 5}) || ev.N != 6 {
		t.Fatalf("evicted %v (N %d), want 0..5", got, ev.N)
	}
	gotRows, err := embedding.Rows(ev.Rows)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotRows, rowsBefore) {
		t.Errorf("evicted rows %v, want %v", gotRows, rowsBefore)
	}
	ids, _, _, _ := tbl.Metadata()
	if !reflect.DeepEqual(ids, []int64{6, 7, 8, 9}) {
		t.Errorf("left %v, want 6..9", ids)
	}
	// An evicted id that comes back starts from its initial row with fresh optimizer state.
	fresh := newTable(t, tbl.Config(), "fresh") // (tbl's seed: the same initial rows)
	if a, b := lookup(t, tbl, 2), lookup(t, fresh, 2); !reflect.DeepEqual(a, b) {
		t.Errorf("evicted id 2 came back as %v, want its initial row %v", a, b)
	}
}

// keepRef is the reference of KeepRecent / KeepFrequent over exported metadata.
func keepRef(ids, last, freq []int64, n int, lfu bool) []int64 {
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	key := func(i int) (int64, int64) {
		if lfu {
			return freq[i], last[i]
		}
		return last[i], freq[i]
	}
	sort.Slice(idx, func(a, b int) bool {
		a1, a2 := key(idx[a])
		b1, b2 := key(idx[b])
		if a1 != b1 {
			return a1 > b1
		}
		if a2 != b2 {
			return a2 > b2
		}
		return ids[idx[a]] < ids[idx[b]]
	})
	var gone []int64
	for _, i := range idx[min(n, len(idx)):] {
		gone = append(gone, ids[i])
	}
	sort.Slice(gone, func(a, b int) bool { return gone[a] < gone[b] })
	return gone
}

// evictKeepN evicts all but keep rows by recency (lfu: by frequency) and returns the ids it
// evicted and the ids keepRef evicts from the metadata just before.
func evictKeepN(t *testing.T, tbl *embedding.Table, keep int, lfu bool) (got, want []int64) {
	t.Helper()
	ids, last, freq, err := tbl.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	p := embedding.KeepRecent(keep)
	if lfu {
		p = embedding.KeepFrequent(keep)
	}
	ev, err := tbl.Evict(context.Background(), p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	got = int64s(t, ev.IDs)
	if ev.N != len(got) {
		t.Errorf("Evicted.N %d for %d ids", ev.N, len(got))
	}
	return got, keepRef(ids, last, freq, keep, lfu)
}

func TestEvictLRUAndLFU(t *testing.T) {
	for _, lfu := range []bool{false, true} {
		tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}, BlockRows: 8, TrackAccess: true}, map[bool]string{false: "lru", true: "lfu"}[lfu])
		r := rand.New(rand.NewPCG(4, 2))
		// Random batches over 300 ids: distinct recencies and frequencies, with ties.
		train(t, tbl, r, 40, 25, 300)
		if _, err := tbl.LookupIDs([]int64{5, 5, 5, 6}); err != nil { // lookups count too
			t.Fatal(err)
		}
		const keep = 50
		if got, want := evictKeepN(t, tbl, keep, lfu); !reflect.DeepEqual(got, want) {
			t.Errorf("lfu=%v: evicted %d ids, want %d (%v vs %v)", lfu, len(got), len(want), got[:5], want[:5])
		}
		if tbl.Len() != keep {
			t.Errorf("lfu=%v: %d rows left, want %d", lfu, tbl.Len(), keep)
		}
		// Keeping as many rows as there are evicts nothing.
		if got, _ := evictKeepN(t, tbl, keep, lfu); len(got) != 0 {
			t.Errorf("second eviction: %v", got)
		}
	}
}

// Keep-N with ranks tied in large groups (4 recencies x 3 frequencies over 400 rows), rows
// deleted first (their indices free, some reused), and keeps that cut through a tie group,
// keep nothing, keep all or more: the ids evicted are the reference's.
func TestEvictKeepTies(t *testing.T) {
	for _, lfu := range []bool{false, true} {
		for _, keep := range []int{0, 1, 7, 170, 351, 352, 1000} {
			name := fmt.Sprintf("lfu=%v/keep=%d", lfu, keep)
			tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, BlockRows: 16, TrackAccess: true}, name)
			const n = 400
			d := &embedding.Delta{Rows: make([]float32, 2*n), Meta: make([]int64, 3*n), Step: 10}
			for i := 0; i < n; i++ {
				d.IDs = append(d.IDs, int64(i*37%1009)-500)
				d.Meta[3*i], d.Meta[3*i+1] = int64(5+i%4), int64(i%3)
			}
			sort.Slice(d.IDs, func(a, b int) bool { return d.IDs[a] < d.IDs[b] })
			if err := tbl.ApplyDelta(d); err != nil {
				t.Fatal(err)
			}
			// 60 deleted, 12 of their indices reused by new ids seen at step 10
			del := []int64{d.IDs[1], d.IDs[2]}
			for i := 0; i < n; i += 7 {
				del = append(del, d.IDs[i])
			}
			if _, err := tbl.DeleteIDs(del); err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.LookupIDs([]int64{2000, 2001, 2002, 2003, 2004, 2005, 2006, 2007, 2008, 2009, 2010, 2011}); err != nil {
				t.Fatal(err)
			}
			if tbl.Len() != 352 {
				t.Fatalf("%s: %d rows", name, tbl.Len())
			}
			if got, want := evictKeepN(t, tbl, keep, lfu); !slices.Equal(got, want) {
				t.Errorf("%s: evicted %d ids %v, want %d %v", name, len(got), got, len(want), want)
			}
			if tbl.Len() != min(keep, 352) {
				t.Errorf("%s: %d rows left", name, tbl.Len())
			}
		}
	}
}

func TestEvictIf(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SparseAdam{}, TrackAccess: true})
	stepEach(t, tbl, 20)
	ev, err := tbl.EvictIf(context.Background(), func(id, last, freq int64) bool { return id%2 == 1 || last <= 3 })
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	want := []int64{0, 1, 2, 3, 5, 7, 9, 11, 13, 15, 17, 19}
	if got := int64s(t, ev.IDs); !reflect.DeepEqual(got, want) {
		t.Errorf("evicted %v, want %v", got, want)
	}
	ids, _, _, _ := tbl.Metadata()
	if !reflect.DeepEqual(ids, []int64{4, 6, 8, 10, 12, 14, 16, 18}) {
		t.Errorf("left %v", ids)
	}
	if _, err := tbl.Evict(context.Background(), embedding.TTL(-1), false); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("TTL(-1): %v, want ErrBadInput", err)
	}
}

// A row trained while EvictIf's predicate runs (after the export, before the removal) stays;
// the others go, with their rows as they were.
func TestEvictIfKeepsRowsTrainedMeanwhile(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}, Initializer: embedding.Zeros{}, TrackAccess: true})
	stepEach(t, tbl, 6) // ids 0..5, each row -1 after its update
	ev, err := tbl.EvictIf(context.Background(), func(id, _, _ int64) bool {
		if id == 2 {
			if err := tbl.UpdateIDs([]int64{2}, ones(2)); err != nil {
				t.Error(err)
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if got, want := int64s(t, ev.IDs), []int64{0, 1, 3, 4, 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("evicted %v, want %v", got, want)
	}
	rows, err := embedding.Rows(ev.Rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !reflect.DeepEqual(r, []float32{-1, -1}) {
			t.Errorf("evicted row %v, want [-1 -1]", r)
		}
	}
	if got, _ := read(t, tbl, 2); tbl.Len() != 1 || !reflect.DeepEqual(got[0], []float32{-2, -2}) {
		t.Errorf("%d rows left, id 2 is %v; want 1 row, [-2 -2]", tbl.Len(), got)
	}
}

// EvictUnchanged removes the rows whose metadata is still what the caller read: not a row
// trained since, nor an id not in the table; lengths that differ are refused.
func TestEvictUnchanged(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}, Initializer: embedding.Zeros{}, TrackAccess: true})
	stepEach(t, tbl, 6) // ids 0..5
	ids, last, freq, err := tbl.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.UpdateIDs([]int64{2}, ones(2)); err != nil { // trained since
		t.Fatal(err)
	}
	ids, last, freq = append(ids, 99), append(last, 0), append(freq, 0) // not in the table
	if _, err := tbl.EvictUnchanged(context.Background(), ids, last[:2], freq); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("2 last steps for %d ids: %v, want ErrBadInput", len(ids), err)
	}
	ev, err := tbl.EvictUnchanged(context.Background(), ids, last, freq)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if got, want := int64s(t, ev.IDs), []int64{0, 1, 3, 4, 5}; !reflect.DeepEqual(got, want) || ev.N != 5 {
		t.Errorf("evicted %v (N %d), want %v", got, ev.N, want)
	}
	if left, _, _, _ := tbl.Metadata(); !reflect.DeepEqual(left, []int64{2}) {
		t.Errorf("left %v, want [2]", left)
	}
}

// EvictUnchanged takes the ids in any order and returns them ascending; of an id given twice the
// first occurrence's metadata decides. So too for thousands of ids, negative ones among them.
func TestEvictUnchangedAnyOrder(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}, Initializer: embedding.Zeros{}, TrackAccess: true})
	stepEach(t, tbl, 6) // ids 0..5
	ids, last, freq, err := tbl.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(ids)
	slices.Reverse(last)
	slices.Reverse(freq)
	// 3 first with a last step it does not have (it stays), 4 again at the end with one (it goes)
	ids, last, freq = append([]int64{3}, append(ids, 4)...), append([]int64{99}, append(last, 99)...), append([]int64{1}, append(freq, 1)...)
	given := slices.Clone(ids)
	ev, err := tbl.EvictUnchanged(context.Background(), ids, last, freq)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if got, want := int64s(t, ev.IDs), []int64{0, 1, 2, 4, 5}; !reflect.DeepEqual(got, want) || ev.N != 5 {
		t.Errorf("evicted %v (N %d), want %v", got, ev.N, want)
	}
	if !slices.Equal(ids, given) {
		t.Errorf("the caller's ids became %v, were %v", ids, given)
	}
	if left, _, _, _ := tbl.Metadata(); !reflect.DeepEqual(left, []int64{3}) {
		t.Errorf("left %v, want [3]", left)
	}

	// thousands of ids (a radix sort), negative and beyond 2^32 among them, shuffled
	var many []int64
	r := rand.New(rand.NewPCG(6, 7))
	for k := range 3000 {
		many = append(many, int64(k-1500)*int64(r.IntN(1<<22)+1))
	}
	slices.Sort(many)
	many = slices.Compact(many)
	if err := tbl.UpdateIDs(many, ones(2*len(many))); err != nil {
		t.Fatal(err)
	}
	ids, last, freq, err = tbl.MetadataUnsorted()
	if err != nil {
		t.Fatal(err)
	}
	r.Shuffle(len(ids), func(i, j int) {
		ids[i], ids[j], last[i], last[j], freq[i], freq[j] = ids[j], ids[i], last[j], last[i], freq[j], freq[i]
	})
	ids, last, freq = append([]int64{many[7]}, ids...), append([]int64{0}, last...), append([]int64{0}, freq...) // stays
	ev, err = tbl.EvictUnchanged(context.Background(), ids, last, freq)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	want := slices.DeleteFunc(slices.Concat(many, []int64{3}), func(id int64) bool { return id == many[7] })
	slices.Sort(want)
	if got := int64s(t, ev.IDs); !slices.Equal(got, slices.Compact(want)) {
		t.Errorf("evicted %d ids, ascending: %v; want the %d ids but %d", len(got), slices.IsSorted(got), len(want), many[7])
	}
}

// MetadataUnsorted gives the rows of Metadata, each with its last step and frequency, in their
// storage order (here not by id: the ids came descending), also after most rows went; without
// TrackAccess, or on a nil table, it fails as Metadata does.
func TestMetadataUnsorted(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}, BlockRows: 16, TrackAccess: true})
	var ids []int64
	for k := 200; k > 0; k-- {
		ids = append(ids, int64(k)*7919)
	}
	for _, every := range []int{1, 3, 7} { // a spread of last steps (1 to 3) and frequencies
		var some []int64
		for i := 0; i < len(ids); i += every {
			some = append(some, ids[i])
		}
		if err := tbl.UpdateIDs(some, ones(2*len(some))); err != nil {
			t.Fatal(err)
		}
	}
	type row struct{ id, last, freq int64 }
	rows := func(ids, last, freq []int64) []row {
		var out []row
		for i := range ids {
			out = append(out, row{ids[i], last[i], freq[i]})
		}
		return out
	}
	for _, deleted := range []bool{false, true} {
		if deleted { // 4 rows in 5 go
			var gone []int64
			for i, id := range ids {
				if i%5 != 0 {
					gone = append(gone, id)
				}
			}
			if _, err := tbl.DeleteIDs(gone); err != nil {
				t.Fatal(err)
			}
		}
		si, sl, sf, err := tbl.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		ui, ul, uf, err := tbl.MetadataUnsorted()
		if err != nil {
			t.Fatal(err)
		}
		if slices.IsSorted(ui) {
			t.Errorf("deleted %v: MetadataUnsorted's ids are ascending", deleted)
		}
		got, want := rows(ui, ul, uf), rows(si, sl, sf)
		slices.SortFunc(got, func(a, b row) int { return cmp.Compare(a.id, b.id) })
		if len(want) != tbl.Len() || !slices.Equal(got, want) {
			t.Errorf("deleted %v: MetadataUnsorted sorted by id is %v, Metadata %v (%d rows)", deleted, got, want, tbl.Len())
		}
		if !slices.ContainsFunc(want, func(r row) bool { return r.last != want[0].last }) ||
			!slices.ContainsFunc(want, func(r row) bool { return r.freq != want[0].freq }) {
			t.Errorf("deleted %v: every row has the metadata %v", deleted, want[0])
		}
	}
	plain := newTable(t, embedding.Config{Dim: 2}, "plain")
	if _, _, _, err := plain.MetadataUnsorted(); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("without TrackAccess: %v, want ErrBadInput", err)
	}
	var none *embedding.Table
	if _, _, _, err := none.MetadataUnsorted(); err == nil {
		t.Error("a nil table's MetadataUnsorted: no error")
	}
}

// A byte budget holds, within a block of rows, whether the eviction removes most rows or a
// tenth (the id map is rebuilt smaller whenever it holds more than the budget counted for it).
func TestEvictMemoryBudgetReturnsMemory(t *testing.T) {
	for _, percent := range []int64{10, 50, 90} {
		t.Run(fmt.Sprintf("%d%%", percent), func(t *testing.T) {
			tbl := newTable(t, embedding.Config{Dim: 16, Optimizer: embedding.SGD{}, BlockRows: 1024, TrackAccess: true})
			const n = 100_000
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = int64(i) * 31
			}
			if _, err := tbl.LookupIDs(ids); err != nil {
				t.Fatal(err)
			}
			before, _ := tbl.Stats()
			budget := before.Bytes * percent / 100
			ev, err := tbl.Evict(context.Background(), embedding.MemoryBudget(budget), false)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := tbl.Stats()
			t.Logf("bytes %d -> %d (budget %d), rows %d -> %d", before.Bytes, after.Bytes, budget, before.Len, after.Len)
			block := 1024 * before.Bytes / n // storage comes in blocks of 1024 rows
			if after.Bytes > budget+block || after.Len == 0 || ev.N+after.Len != n {
				t.Errorf("after a budget of %d bytes: %d bytes, %d rows (evicted %d)", budget, after.Bytes, after.Len, ev.N)
			}
			// Compaction kept every row and state.
			d := dump(t, tbl)
			if len(d.IDs) != after.Len {
				t.Errorf("export has %d ids", len(d.IDs))
			}
		})
	}
}

func TestCompactKeepsEverything(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}, BlockRows: 8, TrackAccess: true})
	r := rand.New(rand.NewPCG(8, 8))
	train(t, tbl, r, 10, 30, 400)
	ids, _, _, _ := tbl.Metadata()
	if _, err := tbl.DeleteIDs(ids[:len(ids)*3/4]); err != nil {
		t.Fatal(err)
	}
	want := dump(t, tbl)
	b0, _ := tbl.Stats()
	if err := tbl.Compact(); err != nil {
		t.Fatal(err)
	}
	b1, _ := tbl.Stats()
	sameDump(t, "after compaction", dump(t, tbl), want)
	if b1.Bytes >= b0.Bytes || b1.Capacity >= b0.Capacity {
		t.Errorf("compaction: bytes %d -> %d, capacity %d -> %d", b0.Bytes, b1.Bytes, b0.Capacity, b1.Capacity)
	}
	// Training goes on normally afterwards (momentum included).
	train(t, tbl, r, 5, 30, 400)
}

// After a few deletions compaction moves only the rows above the new size, each into an index
// freed below it; every other row keeps its index, and every row its values and states.
func TestCompactMovesOnlyTheRowsAbove(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}, BlockRows: 8})
	const n = 1000
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)*37 - 500
	}
	before, err := tbl.IndicesIDs(ids, true)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	for range 3 { // (momentum states to move too)
		g := make([]float32, n*3)
		for i := range g {
			g[i] = float32(r.NormFloat64())
		}
		if err := tbl.UpdateIDs(ids, g); err != nil {
			t.Fatal(err)
		}
	}
	var gone, kept []int64
	for i, id := range ids {
		if i%50 == 7 {
			gone = append(gone, id)
		} else {
			kept = append(kept, id)
		}
	}
	if _, err := tbl.DeleteIDs(gone); err != nil {
		t.Fatal(err)
	}
	want := dump(t, tbl)
	if err := tbl.Compact(); err != nil {
		t.Fatal(err)
	}
	sameDump(t, "after compaction", dump(t, tbl), want)
	after, err := tbl.IndicesIDs(kept, false)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(kept))
	holes := map[int64]bool{}
	for _, id := range gone {
		if x := before[(id+500)/37]; x < size {
			holes[x] = true
		}
	}
	moved := 0
	for i, id := range kept {
		was, now := before[(id+500)/37], after[i]
		switch {
		case now < 0 || now >= size:
			t.Fatalf("id %d at index %d after compaction, want below %d", id, now, size)
		case was < size && now != was:
			t.Errorf("id %d moved from %d to %d; only rows at or above %d move", id, was, now, size)
		case was >= size && !holes[now]:
			t.Errorf("id %d moved from %d to %d, not a freed index", id, was, now)
		case was >= size:
			moved++
		}
	}
	if moved != len(holes) {
		t.Errorf("%d rows moved into %d freed indices", moved, len(holes))
	}
}

// Compaction gives the memory of the dropped blocks back to the system, also when the blocks
// were carved out of one huge-page slab that the surviving blocks keep mapped.
func TestCompactReleasesMemory(t *testing.T) {
	if procstat.ResidentKB() == 0 {
		t.Skip("no /proc/self/status")
	}
	const n, dim = 200_000, 64 // 51 MB of rows: the blocks come from a slab
	tbl := newTable(t, embedding.Config{Dim: dim, Initializer: embedding.Constant{Value: 1}, TrackAccess: true})
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i) * 7
	}
	rows, err := tbl.LookupIDs(ids) // every row written: all pages resident
	if err != nil {
		t.Fatal(err)
	}
	rows.Close() // its 51 MB go back now, not during the measurement
	if _, err := tbl.DeleteIDs(ids[n/20:]); err != nil {
		t.Fatal(err)
	}
	before := procstat.ResidentKB()
	if err := tbl.Compact(); err != nil {
		t.Fatal(err)
	}
	after := procstat.ResidentKB()
	t.Logf("RSS %d MiB -> %d MiB after compacting %d rows to %d", before>>10, after>>10, n, n/20)
	if before-after < 30<<10 {
		t.Errorf("compaction released %d KiB, want about 48 MiB", before-after)
	}
	rows, found, err := tbl.ReadIDs(ids[:3])
	if err != nil || !found[0] {
		t.Fatalf("read after compaction: %v %v", found, err)
	}
	if v := floats(t, rows); v[0] != 1 || v[dim-1] != 1 {
		t.Errorf("row of id 0 after compaction: %v", v[:dim])
	}
}

func TestAdmission(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}, Initializer: embedding.Constant{Value: 0.5}, TrackAccess: true})
	if err := tbl.SetAdmission(3); err != nil {
		t.Fatal(err)
	}
	zero := [][]float32{{0, 0}}
	if got := lookup(t, tbl, 7); !reflect.DeepEqual(got, zero) || tbl.Len() != 0 {
		t.Fatalf("first sighting: %v, len %d", got, tbl.Len())
	}
	// Not admitted: the gradient is dropped (the step still counts).
	if err := tbl.UpdateIDs([]int64{7}, []float32{1, 1}); err != nil || tbl.Len() != 0 {
		t.Fatalf("update of a counted id: %v, len %d", err, tbl.Len())
	}
	if got := lookup(t, tbl, 8, 7); !reflect.DeepEqual(got, [][]float32{{0, 0}, {0, 0}}) || tbl.Len() != 0 {
		t.Fatalf("second sighting: %v", got)
	}
	if _, counted, _ := tbl.Admission(); counted != 2 {
		t.Errorf("counted %d ids, want 2", counted)
	}
	// Third sighting of 7 (twice in one batch counts twice for 8: 1 + 2 = 3).
	got := lookup(t, tbl, 7, 8, 8)
	if !reflect.DeepEqual(got, [][]float32{{0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}}) || tbl.Len() != 2 {
		t.Fatalf("admitted: %v, len %d", got, tbl.Len())
	}
	if _, counted, _ := tbl.Admission(); counted != 0 {
		t.Errorf("counted %d ids after admission, want 0", counted)
	}
	if err := tbl.UpdateIDs([]int64{7, 9}, []float32{1, 1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	if got, found := read(t, tbl, 7, 9); !reflect.DeepEqual(got[0], []float32{-0.5, -0.5}) || found[1] {
		t.Errorf("after an update: %v %v", got, found)
	}
	// Admission off: counts are dropped, every id is admitted.
	if err := tbl.SetAdmission(0); err != nil {
		t.Fatal(err)
	}
	lookup(t, tbl, 100)
	if tbl.Len() != 3 {
		t.Errorf("len %d, want 3", tbl.Len())
	}
}

// An id still being counted that gets a row another way (Write, Indices with insert, Import)
// stops being counted: a table saved with both a row and a count for one id did not load.
func TestAdmissionCountsEndWithARow(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}})
	if err := tbl.SetAdmission(5); err != nil {
		t.Fatal(err)
	}
	lookup(t, tbl, 1, 2, 3, 4)
	if err := tbl.WriteIDs([]int64{1}, []float32{1, 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.IndicesIDs([]int64{2}, true); err != nil {
		t.Fatal(err)
	}
	if err := tbl.ApplyDelta(&embedding.Delta{IDs: []int64{3}, Rows: []float32{3, 3}, Meta: []int64{0, 0, 0}}); err != nil {
		t.Fatal(err)
	}
	if _, counted, _ := tbl.Admission(); counted != 1 || tbl.Len() != 3 {
		t.Fatalf("counted %d ids, %d rows; want 1 (id 4) and 3", counted, tbl.Len())
	}
	dir := t.TempDir()
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	loaded, err := embedding.LoadRenamed(context.Background(), dir, func(s string) string { return s + "-loaded" })
	if err != nil {
		t.Fatalf("the table's checkpoint does not load: %v", err)
	}
	defer loaded[0].Close()
	sameDump(t, "loaded", dump(t, loaded[0]), dump(t, tbl))
}

// Frequency counts every occurrence of an id in a training lookup, whichever call made it
// (autograd lookups de-duplicate their ids and counted each once), and one per optimizer step.
// Admission counts the same occurrences.
func TestFrequencyCountsOccurrences(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, TrackAccess: true})
	freq := func() int64 {
		_, _, f, err := tbl.Metadata()
		if err != nil || len(f) != 1 {
			t.Fatalf("metadata: %v %v", f, err)
		}
		return f[0]
	}
	steps := []struct {
		name string
		run  func() error
		want int64
	}{
		{"LookupIDs [5 5 5]", func() error { _, err := tbl.LookupIDs([]int64{5, 5, 5}); return err }, 3},
		{"Forward [5 5 5]", func() error {
			_, err := tbl.Forward(ids64(t, []int64{5, 5, 5}), embedding.ForwardOptions{Train: true})
			return err
		}, 6},
		{"ForwardBag [5 5]", func() error {
			_, err := tbl.ForwardBag(ids64(t, []int64{5, 5}), ids64(t, []int64{0}), nil, embedding.Sum, embedding.ForwardOptions{Train: true})
			return err
		}, 8},
		{"UpdateIDs [5 5 5]", func() error { return tbl.UpdateIDs([]int64{5, 5, 5}, filled(6, 1)) }, 9},
		{"LookupInto [5 5]", func() error { return tbl.LookupInto(make([]float32, 4), []int64{5, 5}) }, 11},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatal(err)
		}
		if got := freq(); got != s.want {
			t.Fatalf("after %s: frequency %d, want %d", s.name, got, s.want)
		}
	}
	adm := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, Initializer: embedding.Constant{Value: 1}}, "admission")
	if err := adm.SetAdmission(3); err != nil {
		t.Fatal(err)
	}
	for i, ids := range [][]int64{{7, 7}, {7}} {
		if _, err := adm.Forward(ids64(t, ids), embedding.ForwardOptions{Train: true}); err != nil {
			t.Fatal(err)
		}
		if want := i; adm.Len() != want {
			t.Fatalf("after forward %d of id 7 (%d occurrences so far): %d rows, want %d", i+1, 2+i, adm.Len(), want)
		}
	}
}

// TestAdmissionForward: the autograd path respects admission too.
func TestAdmissionForward(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}, Initializer: embedding.Constant{Value: 1}, TrackAccess: true})
	if err := tbl.SetAdmission(2); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		sumStep(t, tbl, 3)
	}
	// Seen twice: admitted at the second lookup, then one step of lr 1 on gradient 1.
	if got, _ := read(t, tbl, 3); !reflect.DeepEqual(got, [][]float32{{0, 0}}) || tbl.Len() != 1 {
		t.Errorf("row %v, len %d", got, tbl.Len())
	}
}

func TestDeltasReproduceTheTable(t *testing.T) {
	for i, cfg := range []embedding.Config{
		{Dim: 3, Optimizer: embedding.SparseAdam{}, BlockRows: 8, TrackAccess: true},
		{Dim: 2, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.5}, BlockRows: 4, TrackAccess: true},
		{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}, BlockRows: 4, TrackAccess: true},
	} {
		src := newTable(t, cfg, "src", fmt.Sprint(i))
		dst := newTable(t, cfg, "dst", fmt.Sprint(i))
		r := rand.New(rand.NewPCG(2, 3))
		train(t, src, r, 10, 20, 100)
		for round := 0; round < 4; round++ {
			d, err := src.Delta(true)
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.ApplyDelta(d); err != nil {
				t.Fatal(err)
			}
			sameDump(t, "after a delta", dump(t, dst), dump(t, src))
			if round == 0 && len(d.IDs) != src.Len() {
				t.Errorf("the first delta has %d rows, the table %d", len(d.IDs), src.Len())
			}
			// Changes: training, deletions, an eviction, writes, compaction.
			train(t, src, r, 3, 10, 150)
			ids, _, _, _ := src.Metadata()
			src.DeleteIDs(ids[:5])
			ev, err := src.Evict(context.Background(), embedding.TTL(8), false)
			if err != nil {
				t.Fatal(err)
			}
			if err := src.WriteIDs([]int64{1 << 40, ids[len(ids)-1]}, make([]float32, 2*cfg.Dim)); err != nil {
				t.Fatal(err)
			}
			if err := src.Compact(); err != nil {
				t.Fatal(err)
			}
			d2, err := src.Delta(false)
			if err != nil {
				t.Fatal(err)
			}
			if len(d2.Deleted) < 5 || len(d2.IDs) >= src.Len() {
				t.Errorf("round %d: delta of %d rows (table %d), %d deleted (evicted %d)", round, len(d2.IDs), src.Len(), len(d2.Deleted), ev.N)
			}
		}
		// Nothing changed since the last mark: an empty delta.
		if _, err := src.Delta(true); err != nil {
			t.Fatal(err)
		}
		if d, _ := src.Delta(false); len(d.IDs) != 0 || len(d.Deleted) != 0 {
			t.Errorf("delta without changes: %d rows, %d deleted", len(d.IDs), len(d.Deleted))
		}
	}
}

// Delta tracking costs no memory before the first mark, when every row is in a delta. After
// it, a delta has the rows changed since: updated, written and new rows (also rows in blocks
// added after the mark), not rows only looked up.
func TestDeltaTrackingStartsAtTheFirstMark(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}, BlockRows: 8, TrackAccess: true})
	var ids []int64
	for id := int64(0); id < 20; id++ {
		ids = append(ids, id)
	}
	update(t, tbl, ids, ones(2*len(ids))...)
	stats := func() embedding.Stats {
		st, err := tbl.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	delta := func(mark bool) []int64 {
		d, err := tbl.Delta(mark)
		if err != nil {
			t.Fatal(err)
		}
		return d.IDs
	}
	before := stats()
	for i := 0; i < 2; i++ {
		if got := delta(false); !reflect.DeepEqual(got, ids) {
			t.Fatalf("delta before a mark: %v, want every id", got)
		}
	}
	if st := stats(); st.Bytes != before.Bytes {
		t.Errorf("deltas without a mark took %d bytes", st.Bytes-before.Bytes)
	}
	if got := delta(true); !reflect.DeepEqual(got, ids) {
		t.Fatalf("first marked delta: %v, want every id", got)
	}
	if st := stats(); st.Bytes < before.Bytes+4*int64(before.Capacity) || st.Capacity != before.Capacity {
		t.Errorf("the first mark took %d bytes for %d rows, want at least 4 a row", st.Bytes-before.Bytes, st.Capacity)
	}
	if got := delta(false); len(got) != 0 {
		t.Fatalf("delta right after a mark: %v", got)
	}
	update(t, tbl, []int64{3, 5}, ones(4)...)
	write(t, tbl, []int64{11}, 1, 2)
	lookup(t, tbl, 7, 200) // 7 is only looked up; 200 is new
	var fresh []int64
	for id := int64(100); id < 130; id++ {
		fresh = append(fresh, id)
	}
	update(t, tbl, fresh, ones(2*len(fresh))...)
	if st := stats(); st.Capacity <= before.Capacity {
		t.Fatalf("capacity %d: no block was added", st.Capacity)
	}
	want := append(append([]int64{3, 5, 11}, fresh...), 200)
	if got := delta(true); !reflect.DeepEqual(got, want) {
		t.Errorf("delta after the mark: %v, want %v", got, want)
	}
	if got := delta(false); len(got) != 0 {
		t.Errorf("delta right after the second mark: %v", got)
	}
}

func TestDeltaFile(t *testing.T) {
	src := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.RowWiseAdagrad{}, TrackAccess: true}, "src")
	dst := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.RowWiseAdagrad{}, TrackAccess: true}, "dst")
	r := rand.New(rand.NewPCG(1, 5))
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		train(t, src, r, 4, 10, 60)
		ids, _, _, _ := src.Metadata()
		src.DeleteIDs(ids[:3])
		d, err := src.Delta(true)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("delta-%d", i))
		if err := embedding.WriteDelta(path, d, 3); err != nil {
			t.Fatal(err)
		}
		back, dim, err := embedding.ReadDelta(path)
		if err != nil || dim != 3 || !reflect.DeepEqual(back, d) {
			t.Fatalf("ReadDelta: %v (dim %d)", err, dim)
		}
		if err := dst.ApplyDelta(back); err != nil {
			t.Fatal(err)
		}
		sameDump(t, "delta files", dump(t, dst), dump(t, src))
		b, _ := os.ReadFile(path)
		b[len(b)-1] ^= 0x10
		os.WriteFile(path, b, 0o644)
		if _, _, err := embedding.ReadDelta(path); !errors.Is(err, embedding.ErrCorrupt) {
			t.Errorf("a flipped bit: %v", err)
		}
	}
}

// Access metadata is opt-in: a table without TrackAccess keeps none (8 bytes a row less), and
// what needs it fails with ErrBadInput and changes nothing. Its checkpoints load into a tracked
// table as rows seen at the saved step, never counted; Load keeps the saved setting.
func TestAccessTrackingIsOptIn(t *testing.T) {
	cfg := embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{}, BlockRows: 64}
	plain := newTable(t, cfg, "plain")
	cfg.TrackAccess = true
	tracked := newTable(t, cfg, "tracked")
	for _, tbl := range []*embedding.Table{plain, tracked} {
		train(t, tbl, rand.New(rand.NewPCG(7, 8)), 12, 30, 500)
	}
	sp, err := plain.Stats()
	if err != nil {
		t.Fatal(err)
	}
	st, err := tracked.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if sp.Len != st.Len || st.Bytes-sp.Bytes < 8*int64(st.Len) {
		t.Errorf("bytes: %d rows without access metadata %d B, with %d B: want >= 8 B a row apart", st.Len, sp.Bytes, st.Bytes)
	}
	before := dump(t, plain)
	if _, _, _, err := plain.Metadata(); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("Metadata: %v, want ErrBadInput", err)
	}
	for _, p := range []embedding.EvictPolicy{embedding.TTL(1), embedding.KeepRecent(3), embedding.KeepFrequent(3), embedding.MemoryBudget(1 << 10)} {
		if _, err := plain.Evict(context.Background(), p, true); !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("Evict(%v): %v, want ErrBadInput", p, err)
		}
	}
	if _, err := plain.EvictIf(context.Background(), func(id, last, freq int64) bool { return true }); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("EvictIf: %v, want ErrBadInput", err)
	}
	sameDump(t, "after refused evictions", dump(t, plain), before)

	dir := t.TempDir()
	if err := embedding.Save(context.Background(), dir, plain); err != nil {
		t.Fatal(err)
	}
	loaded, err := embedding.LoadRenamed(context.Background(), dir, func(saved string) string { return saved + "-loaded" })
	if err != nil {
		t.Fatal(err)
	}
	defer loaded[0].Close()
	if loaded[0].Config().TrackAccess {
		t.Errorf("Load turned access tracking on")
	}
	sameDump(t, "loaded", dump(t, loaded[0]), before)
	// Into a table of that name that tracks access: every row seen at the saved step, never counted.
	name := plain.Name()
	plain.Close()
	into, err := embedding.NewNamed(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer into.Close()
	if err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{into}, nil); err != nil {
		t.Fatal(err)
	}
	ids, last, freq, err := into.Metadata()
	if err != nil || len(ids) != len(before.IDs) {
		t.Fatalf("Metadata after LoadInto: %d ids, %v; want %d", len(ids), err, len(before.IDs))
	}
	for i := range ids {
		if last[i] != before.Step || freq[i] != 0 {
			t.Fatalf("id %d: last %d freq %d, want %d and 0", ids[i], last[i], freq[i], before.Step)
		}
	}
}

// A refused delta changes nothing: not its deletions, not the step. Each case deletes ids 1 and
// 2 and moves the step from 3 to 9, but for one fault.
func TestApplyDeltaAllOrNothing(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}, TrackAccess: true})
	for i := 0; i < 3; i++ {
		update(t, tbl, []int64{1, 2, 3}, filled(6, 1)...)
	}
	if _, err := tbl.Delta(true); err != nil { // deletions are logged from the first mark on
		t.Fatal(err)
	}
	before := dump(t, tbl)
	good := func() *embedding.Delta {
		return &embedding.Delta{Deleted: []int64{1, 2}, IDs: []int64{5, 6}, Rows: filled(4, 0.5),
			States: [][]float32{filled(4, 0)}, Meta: []int64{9, 1, 9, 8, 2, 8}, Step: 9}
	}
	cases := map[string]func(d *embedding.Delta){
		"one meta value for 2 ids":      func(d *embedding.Delta) { d.Meta = d.Meta[:1] },
		"rows of the wrong length":      func(d *embedding.Delta) { d.Rows = d.Rows[:3] },
		"a NaN row":                     func(d *embedding.Delta) { d.Rows[3] = float32(math.NaN()) },
		"no momentum buffers":           func(d *embedding.Delta) { d.States = nil },
		"repeated ids":                  func(d *embedding.Delta) { d.IDs[1] = 5 },
		"a last step beyond its step":   func(d *embedding.Delta) { d.Meta[3] = 10 },
		"a negative frequency":          func(d *embedding.Delta) { d.Meta[4] = -1 },
		"older than the table (step 2)": func(d *embedding.Delta) { d.Step, d.Meta[0], d.Meta[2], d.Meta[3], d.Meta[5] = 2, 2, 2, 2, 2 },
	}
	for name, spoil := range cases {
		d := good()
		spoil(d)
		if err := tbl.ApplyDelta(d); !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("%s: %v, want ErrBadInput", name, err)
		}
		sameDump(t, name, dump(t, tbl), before)
		if log, err := tbl.Delta(false); err != nil || len(log.Deleted) != 0 {
			t.Fatalf("%s: the deletion log %v (%v), want none", name, log.Deleted, err)
		}
	}
	if err := tbl.ApplyDelta(good()); err != nil {
		t.Fatalf("the delta without a fault: %v", err)
	}
	if got := dump(t, tbl); !reflect.DeepEqual(got.IDs, []int64{3, 5, 6}) || got.Step != 9 {
		t.Fatalf("after the good delta: ids %v step %d, want [3 5 6] and 9", got.IDs, got.Step)
	}
	if err := tbl.ApplyDelta(good()); err != nil { // the same delta again: same step, allowed
		t.Fatalf("the same delta again: %v", err)
	}
}

// A table whose step counter reached 2^63 - 1 (through a delta or a checkpoint) refuses further
// steps: the counter would wrap to a negative step (SparseAdam's rows became NaN).
func TestStepCounterAtItsLimit(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SparseAdam{}, TrackAccess: true})
	d := &embedding.Delta{IDs: []int64{1}, Rows: []float32{1, 1}, States: [][]float32{{0, 0}, {0, 0}}, Meta: []int64{0, 0, 0}, Step: math.MaxInt64}
	if err := tbl.ApplyDelta(d); err != nil {
		t.Fatal(err)
	}
	before := dump(t, tbl)
	if err := tbl.UpdateIDs([]int64{1}, []float32{1, 1}); !errors.Is(err, embedding.ErrBadInput) {
		t.Fatalf("an update at step 2^63 - 1: %v, want ErrBadInput", err)
	}
	sameDump(t, "after the refused update", dump(t, tbl), before)
}

// An id in both Deleted and IDs (Delta lists an id deleted and written again since the mark as
// written only, but deltas merged by a caller may have both) ends with the written row.
func TestApplyDeltaDeletedThenWritten(t *testing.T) {
	src := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{LR: 0.1}, TrackAccess: true}, "src")
	dst := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{LR: 0.1}, TrackAccess: true}, "dst")
	update(t, src, []int64{1, 2}, 1, 1, 2, 2)
	d0, err := src.Delta(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.ApplyDelta(d0); err != nil {
		t.Fatal(err)
	}
	if _, err := src.DeleteIDs([]int64{1}); err != nil {
		t.Fatal(err)
	}
	update(t, src, []int64{1}, 3, 3)
	d1, err := src.Delta(true)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(d1.Deleted, 1) || !slices.Contains(d1.IDs, 1) {
		t.Fatalf("delta: deleted %v ids %v, want 1 written only", d1.Deleted, d1.IDs)
	}
	d1.Deleted = append(d1.Deleted, 1)
	if err := dst.ApplyDelta(d1); err != nil {
		t.Fatal(err)
	}
	sameDump(t, "the copy", dump(t, dst), dump(t, src))
}

// Errors of the lifecycle calls wrap the package's sentinels and name the call: a nil delta,
// Rows of a tensor that is not float32, EvictIf on a table without access tracking.
func TestLifecycleErrorsNameTheirCall(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2})
	if err := tbl.ApplyDelta(nil); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("ApplyDelta(nil): %v", err)
	}
	if err := embedding.WriteDelta(filepath.Join(t.TempDir(), "d"), nil, 2); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("WriteDelta(nil): %v", err)
	}
	x := cgotorch.MustFromSlice([]int64{1, 2, 3, 4}, 2, 2)
	if _, err := embedding.Rows(x); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("Rows of int64 [2, 2]: %v", err)
	}
	track := newTable(t, embedding.Config{Dim: 2, TrackAccess: true}, "track")
	lookup(t, track, 1, 2)
	update(t, track, []int64{3}, 1, 1) // step 1: rows 1 and 2 were last seen a step ago
	if _, err := track.Evict(context.Background(), embedding.EvictPolicy{}, false); !errors.Is(err, embedding.ErrBadInput) || track.Len() != 3 {
		t.Errorf("Evict(EvictPolicy{}): %v, %d rows left; want ErrBadInput and 3 (it was TTL(0): 1 left)", err, track.Len())
	}
	_, err := tbl.EvictIf(context.Background(), func(int64, int64, int64) bool { return true })
	var e *embedding.Error
	if !errors.As(err, &e) || e.Op != "evict" || !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("EvictIf without access tracking: %v, want op \"evict\" and ErrBadInput", err)
	}
}

// A delta names its table's optimizer, in memory and in its file: one of another optimizer whose
// states have the same shapes (SGD momentum and Adagrad: one [dim] state each) is refused with
// ErrIncompatible and changes nothing. It used to apply, momentum buffers read as Adagrad sums.
func TestApplyDeltaOfAnotherOptimizer(t *testing.T) {
	src := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}}, "sgd")
	dst := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}, "adagrad")
	update(t, src, []int64{1, 2}, 1, 2, 3, 4)
	update(t, dst, []int64{3}, 1, 1)
	d, err := src.Delta(true)
	if err != nil {
		t.Fatal(err)
	}
	if d.Optimizer != "sgd" {
		t.Fatalf("delta's optimizer %q; want sgd", d.Optimizer)
	}
	path := filepath.Join(t.TempDir(), "delta")
	if err := embedding.WriteDelta(path, d, 2); err != nil {
		t.Fatal(err)
	}
	back, _, err := embedding.ReadDelta(path)
	if err != nil || back.Optimizer != "sgd" {
		t.Fatalf("ReadDelta: optimizer %q, %v", back.Optimizer, err)
	}
	before := dump(t, dst)
	for _, dd := range []*embedding.Delta{d, back} {
		if err := dst.ApplyDelta(dd); !errors.Is(err, embedding.ErrIncompatible) {
			t.Errorf("a delta of SGD applied to Adagrad: %v; want ErrIncompatible", err)
		}
	}
	sameDump(t, "after the refused deltas", dump(t, dst), before)
	// A delta without the field (an older file, which has no chain either) is taken as before.
	d.Optimizer, d.Lineage = "", 0
	if err := dst.ApplyDelta(d); err != nil {
		t.Errorf("a delta without an optimizer: %v", err)
	}
	d.Optimizer = "adam"
	if err := embedding.WriteDelta(path, d, 2); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("WriteDelta of an unknown optimizer: %v; want ErrBadInput", err)
	}
}
