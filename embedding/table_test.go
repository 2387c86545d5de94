package embedding_test

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/ctable"
)

func TestContiguousIndicesAndReuse(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 4, BlockRows: 8})
	idx, err := tbl.IndicesIDs([]int64{1180210, 42, 655922, 42, -5, 328637}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 1, 2, 1, 3, 4}; !slices.Equal(idx, want) {
		t.Fatalf("indices %v, want %v", idx, want)
	}
	if n, err := tbl.DeleteIDs([]int64{655922, 31337}); err != nil || n != 1 {
		t.Fatalf("DeleteIDs: %d, %v", n, err)
	}
	idx, err = tbl.IndicesIDs([]int64{655922, 777, 42}, false)
	if err != nil || !slices.Equal(idx, []int64{-1, -1, 1}) {
		t.Fatalf("indices without insert: %v, %v", idx, err)
	}
	// The freed index 2 goes to the next new id, then the high-water mark continues.
	idx, err = tbl.IndicesIDs([]int64{777, 778}, true)
	if err != nil || !slices.Equal(idx, []int64{2, 5}) {
		t.Fatalf("indices after delete: %v, %v", idx, err)
	}
	if tbl.Len() != 6 {
		t.Fatalf("Len %d, want 6", tbl.Len())
	}
}

func TestDeleteResetsState(t *testing.T) {
	for i, opt := range []embedding.Optimizer{
		embedding.Adagrad{LR: 0.5, InitialAccumulator: 0.25},
		embedding.SparseAdam{LR: 0.1},
		embedding.SGD{LR: 0.1, Momentum: 0.9},
		embedding.FTRL{Alpha: 0.5, InitialAccumulator: 0.1},
		embedding.RowWiseAdagrad{LR: 0.5, InitialAccumulator: 0.5},
		embedding.AdamW{LR: 0.1, WeightDecay: 0.1},
	} {
		sfx := strconv.Itoa(i)
		tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: opt, Initializer: embedding.Uniform{Low: -1, High: 1}, Seed: 3}, "opt", sfx)
		ref := newTable(t, embedding.Config{Dim: 3, Optimizer: opt, Initializer: embedding.Uniform{Low: -1, High: 1}, Seed: 3}, "ref", sfx)
		initial := lookup(t, ref, 9)[0]
		fresh := export(t, ref)
		if !equalRows(lookup(t, tbl, 9)[0], initial) {
			t.Fatal("same seed and id, different initial rows")
		}
		update(t, tbl, []int64{9, 9}, 1, 2, 3, 1, 1, 1)
		update(t, tbl, []int64{10}, 1, 1, 1)
		if equalRows(lookup(t, tbl, 9)[0], initial) {
			t.Fatal("update did not change the row")
		}
		if _, err := tbl.DeleteIDs([]int64{9}); err != nil {
			t.Fatal(err)
		}
		// id 11 reuses 9's index: it must start from its own initial value and fresh state.
		idx, _ := tbl.IndicesIDs([]int64{11}, true)
		ri, _ := ref.IndicesIDs([]int64{11}, false)
		if idx[0] != 0 || ri[0] != -1 {
			t.Fatalf("index of 11: %v (ref %v)", idx, ri)
		}
		refRows, _ := read(t, refWithInitial(t, opt, sfx), 11, 9)
		e := export(t, tbl)
		if !equalRows(e.rows[11], refRows[0]) {
			t.Fatalf("%T: reused index kept old values: %v vs %v", opt, e.rows[11], refRows[0])
		}
		// id 9 comes back: its initial value again, fresh state
		if !equalRows(lookup(t, tbl, 9)[0], initial) {
			t.Fatalf("%T: deleted id came back with a stale row", opt)
		}
		e = export(t, tbl)
		for name, st := range fresh.states {
			if !equalRows(e.states[name][9], st[9]) || !equalRows(e.states[name][11], st[9]) {
				t.Fatalf("%T: state %s not reset: %v, %v, want %v", opt, name, e.states[name][9], e.states[name][11], st[9])
			}
		}
	}
}

// refWithInitial is an empty table whose Read gives every id its initial value.
func refWithInitial(t *testing.T, opt embedding.Optimizer, sfx string) *embedding.Table {
	return newTable(t, embedding.Config{Dim: 3, Optimizer: opt, Initializer: embedding.Uniform{Low: -1, High: 1},
		Seed: 3, ReadDefault: embedding.ReadInitial}, "initial", sfx)
}

func TestIdenticalIDsMakeOneRow(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1}, Optimizer: embedding.SGD{LR: 0.001}})
	ids := make([]int64, 1024)
	grads := make([]float32, 2048)
	for i := range ids {
		ids[i] = 5
		grads[2*i] = 1
	}
	rows := lookup(t, tbl, ids...)
	if tbl.Len() != 1 || len(rows) != 1024 {
		t.Fatalf("Len %d, rows %d", tbl.Len(), len(rows))
	}
	update(t, tbl, ids, grads...)
	e := export(t, tbl)
	if len(e.ids) != 1 || !near(float64(e.rows[5][0]), 1-1.024, 1e-5) || e.rows[5][1] != 1 {
		t.Fatalf("export %v", e.rows)
	}
}

func TestReadDoesNotInsert(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 7}})
	lookup(t, tbl, 1)
	rows, found := read(t, tbl, 1, 2, 3)
	if !slices.Equal(found, []bool{true, false, false}) || rows[0][0] != 7 || rows[1][0] != 0 || rows[2][1] != 0 {
		t.Fatalf("read: %v %v", rows, found)
	}
	if tbl.Len() != 1 {
		t.Fatalf("read inserted: Len %d", tbl.Len())
	}
	idx, _ := tbl.IndicesIDs([]int64{2}, false)
	if idx[0] != -1 {
		t.Fatal("Indices without insert inserted")
	}
	ini := newTable(t, embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 7}, ReadDefault: embedding.ReadInitial}, "initial")
	rows, found = read(t, ini, 4)
	if found[0] || rows[0][0] != 7 || ini.Len() != 0 {
		t.Fatalf("ReadInitial: %v %v, Len %d", rows, found, ini.Len())
	}
}

func TestLenMatchesExportAndValuesSurviveGrowth(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 3, BlockRows: 4, Capacity: 2})
	write(t, tbl, []int64{100, 200}, 1, 2, 3, 4, 5, 6)
	st0, _ := tbl.Stats()
	var ids []int64
	for i := int64(0); i < 500; i++ {
		ids = append(ids, 1000+i*7919)
	}
	lookup(t, tbl, ids...)
	st, err := tbl.Stats()
	if err != nil || st.Capacity <= st0.Capacity || st.Capacity%4 != 0 || st.Len != 502 || st.Bytes <= 0 {
		t.Fatalf("stats %+v (before %+v): %v", st, st0, err)
	}
	e := export(t, tbl)
	if len(e.ids) != tbl.Len() || len(e.ids) != 502 {
		t.Fatalf("export has %d ids, Len %d", len(e.ids), tbl.Len())
	}
	if !equalRows(e.rows[100], []float32{1, 2, 3}) || !equalRows(e.rows[200], []float32{4, 5, 6}) {
		t.Fatalf("rows moved during growth: %v %v", e.rows[100], e.rows[200])
	}
	// every row read back equals its exported copy
	rows := lookup(t, tbl, ids...)
	for i, id := range ids {
		if !equalRows(rows[i], e.rows[id]) {
			t.Fatalf("id %d: lookup %v, export %v", id, rows[i], e.rows[id])
		}
	}
	if err := tbl.Clear(); err != nil || tbl.Len() != 0 {
		t.Fatalf("Clear: %v, Len %d", err, tbl.Len())
	}
	if e := export(t, tbl); len(e.ids) != 0 {
		t.Fatalf("export after Clear: %d ids", len(e.ids))
	}
}

// A row's value stays f(seed, id) under heavy insert/delete churn: the initializer is counter
// based, so neither the order of insertion, the batch, the index reused nor the thread count
// changes it.
func TestChurnKeepsRowsAFunctionOfID(t *testing.T) {
	for i, init := range []embedding.Initializer{
		embedding.Normal{Mean: 0.5, Std: 2}, embedding.Uniform{Low: -3, High: 3},
		embedding.TruncatedNormal{Std: 1}, embedding.XavierUniform{}, embedding.XavierNormal{Gain: 2},
	} {
		cfg := embedding.Config{Dim: 5, BlockRows: 16, Initializer: init, Seed: 99, ReadDefault: embedding.ReadInitial}
		tbl := newTable(t, cfg, "churn", strconv.Itoa(i))
		ref := newTable(t, cfg, "ref", strconv.Itoa(i))
		rng := rand.New(rand.NewSource(1))
		for round := 0; round < 60; round++ {
			batch := make([]int64, 1+rng.Intn(64))
			for i := range batch {
				batch[i] = rng.Int63n(300) - 150
			}
			if round%3 == 2 {
				if _, err := tbl.DeleteIDs(batch); err != nil {
					t.Fatal(err)
				}
				continue
			}
			lookup(t, tbl, batch...)
			if err := tbl.Check(); err != nil {
				t.Fatal(err)
			}
		}
		e := export(t, tbl)
		if len(e.ids) == 0 {
			t.Fatal("churn left nothing")
		}
		want, found := read(t, ref, e.ids...)
		for i, id := range e.ids {
			if found[i] || !equalRows(e.rows[id], want[i]) {
				t.Fatalf("%T: id %d: row %v, f(id) %v", init, id, e.rows[id], want[i])
			}
		}
	}
}

func TestThreadCountDoesNotChangeValues(t *testing.T) {
	prev := cgotorch.NumThreads()
	defer cgotorch.SetNumThreads(prev)
	ids := make([]int64, 6000)
	grads := make([]float32, 6000*8)
	for i := range ids {
		ids[i] = int64(i*i) % 5003
	}
	for i := range grads {
		grads[i] = float32(math.Sin(float64(i)))
	}
	var got [2]exported
	for k, threads := range []int{1, 2} {
		if err := cgotorch.SetNumThreads(threads); err != nil {
			t.Fatal(err)
		}
		tbl := newTable(t, embedding.Config{Dim: 8, Seed: 5, Optimizer: embedding.SparseAdam{LR: 0.1}}, string(rune('a'+k)))
		lookup(t, tbl, ids...)
		update(t, tbl, ids, grads...)
		got[k] = export(t, tbl)
	}
	if !slices.Equal(got[0].ids, got[1].ids) {
		t.Fatal("ids differ")
	}
	for _, id := range got[0].ids {
		if !equalRows(got[0].rows[id], got[1].rows[id]) {
			t.Fatalf("id %d: %v with 1 thread, %v with 2", id, got[0].rows[id], got[1].rows[id])
		}
	}
}

func TestInitializerStatistics(t *testing.T) {
	const n, dim = 4000, 8
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i) * 1000003
	}
	stats := func(init embedding.Initializer) (mean, std, lo, hi float64) {
		tbl := newTable(t, embedding.Config{Dim: dim, Initializer: init, Seed: 11}, "stats")
		r, err := tbl.LookupIDs(ids)
		if err != nil {
			t.Fatal(err)
		}
		v := floats(t, r)
		r.Close()
		tbl.Close()
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, x := range v {
			mean += float64(x)
			lo, hi = math.Min(lo, float64(x)), math.Max(hi, float64(x))
		}
		mean /= float64(len(v))
		for _, x := range v {
			std += (float64(x) - mean) * (float64(x) - mean)
		}
		return mean, math.Sqrt(std / float64(len(v))), lo, hi
	}
	check := func(name string, got, want, tol float64) {
		if math.Abs(got-want) > tol {
			t.Errorf("%s: %v, want %v ± %v", name, got, want, tol)
		}
	}
	m, s, lo, hi := stats(embedding.Uniform{Low: -2, High: 4})
	check("uniform mean", m, 1, 0.06)
	check("uniform std", s, 6/math.Sqrt(12), 0.05)
	if lo < -2 || hi >= 4 {
		t.Errorf("uniform range [%v, %v]", lo, hi)
	}
	m, s, _, _ = stats(embedding.Normal{Mean: 1, Std: 0.5})
	check("normal mean", m, 1, 0.02)
	check("normal std", s, 0.5, 0.02)
	m, s, lo, hi = stats(embedding.TruncatedNormal{Mean: 0, Std: 1})
	check("truncated mean", m, 0, 0.04)
	check("truncated std", s, 0.8796, 0.03) // std of N(0,1) truncated to ±2
	if lo < -2 || hi > 2 {
		t.Errorf("truncated range [%v, %v]", lo, hi)
	}
	b := math.Sqrt(6.0 / (dim + dim))
	m, s, lo, hi = stats(embedding.XavierUniform{})
	check("xavier uniform mean", m, 0, 0.03)
	check("xavier uniform std", s, b/math.Sqrt(3), 0.02)
	if lo < -b || hi > b {
		t.Errorf("xavier uniform range [%v, %v], bound %v", lo, hi, b)
	}
	_, s, _, _ = stats(embedding.XavierNormal{Gain: 2, FanIn: 10, FanOut: 30})
	check("xavier normal std", s, 2*math.Sqrt(2.0/40), 0.02)
	m, s, _, _ = stats(embedding.Constant{Value: -3})
	check("constant", m, -3, 0)
	check("constant std", s, 0, 0)
	m, _, _, _ = stats(embedding.Zeros{})
	check("zeros", m, 0, 0)

	// The seed matters.
	a := newTable(t, embedding.Config{Dim: 4, Seed: 1}, "seed1")
	c := newTable(t, embedding.Config{Dim: 4, Seed: 2}, "seed2")
	if equalRows(lookup(t, a, 1)[0], lookup(t, c, 1)[0]) {
		t.Error("seeds 1 and 2 give the same row")
	}
}

func TestNamesAndLifecycle(t *testing.T) {
	name := t.Name()
	tbl, err := embedding.NewNamed(name, embedding.Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := embedding.NewNamed(name, embedding.Config{Dim: 2}); !errors.Is(err, embedding.ErrNameTaken) {
		t.Fatalf("duplicate name: %v", err)
	}
	if !slices.Contains(embedding.Names(), name) {
		t.Fatalf("Names %v lacks %q", embedding.Names(), name)
	}
	other, ok := embedding.Get(name)
	if !ok || other.Dim() != 2 || other.Name() != name {
		t.Fatalf("Get: %v %v", other, ok)
	}
	if _, ok := embedding.Get(name + "/nope"); ok {
		t.Fatal("Get of an unknown name")
	}
	lookup(t, other, 1, 2)
	if tbl.Len() != 2 {
		t.Fatal("handles do not share the table")
	}
	k := ids64(t, []int64{1})
	g, _ := cgotorch.FromSlice([]float32{1, 1}, 1, 2)
	defer g.Close()
	if err := embedding.UpdateByName(name, k, g); err != nil {
		t.Fatal(err)
	}
	if st, _ := tbl.Stats(); st.Step != 1 {
		t.Fatalf("step %d after UpdateByName", st.Step)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Close(); err != nil { // closing twice (through another handle) is fine
		t.Fatal(err)
	}
	for _, err := range []error{
		func() error { _, err := tbl.LookupIDs([]int64{1}); return err }(),
		func() error { _, err := other.LookupIDs([]int64{1}); return err }(),
		func() error { _, err := tbl.Export(); return err }(),
		func() error { _, err := tbl.Stats(); return err }(),
		tbl.Clear(),
		embedding.UpdateByName(name, k, g),
	} {
		if !errors.Is(err, embedding.ErrClosed) && !errors.Is(err, embedding.ErrNotFound) {
			t.Fatalf("after Close: %v", err)
		}
	}
	if err := embedding.UpdateByName(name, k, g); !errors.Is(err, embedding.ErrNotFound) {
		t.Fatalf("UpdateByName after Close: %v", err)
	}
	if slices.Contains(embedding.Names(), name) {
		t.Fatal("the name is still registered")
	}
	again, err := embedding.NewNamed(name, embedding.Config{Dim: 3})
	if err != nil {
		t.Fatalf("name not freed: %v", err)
	}
	if again.Len() != 0 || again.Dim() != 3 {
		t.Fatal("new table under a reused name is not new")
	}
	again.Close()
}

func TestPrefetch(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 3, Seed: 4})
	want := lookup(t, tbl, 10, 11, 10)
	p, err := tbl.PrefetchIDs([]int64{10, 11, 10, 12})
	if err != nil {
		t.Fatal(err)
	}
	// A cancelled context: the prefetch stays pending.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context: %v", err)
	}
	r, err := p.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := embedding.Rows(r)
	r.Close()
	if !equalRows(rows[0], want[0]) || !equalRows(rows[1], want[1]) || !equalRows(rows[2], want[2]) ||
		!equalRows(rows[3], []float32{0, 0, 0}) {
		t.Fatalf("prefetched %v, want %v and zeros", rows, want)
	}
	if tbl.Len() != 2 {
		t.Fatal("prefetch inserted")
	}
	if _, err := p.Wait(context.Background()); !errors.Is(err, embedding.ErrUnknownPrefetch) {
		t.Fatalf("waiting twice: %v", err)
	}
	q, _ := tbl.PrefetchIDs([]int64{1})
	if err := q.Discard(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Wait(context.Background()); !errors.Is(err, embedding.ErrUnknownPrefetch) {
		t.Fatalf("Wait after Discard: %v", err)
	}
	// Unknown prefetch ids at the binding (internal/ctable).
	if _, _, _, err := cgoTable(t, tbl).PrefetchWait(987654, 0); !errors.Is(err, cgotorch.ErrUnknownPrefetch) {
		t.Fatalf("unknown id: %v", err)
	}
	// Many in flight, waited in reverse order.
	var ps []*embedding.Prefetch
	for i := 0; i < 20; i++ {
		p, err := tbl.PrefetchIDs([]int64{10, int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for i := len(ps) - 1; i >= 0; i-- {
		r, err := ps[i].Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if v := floats(t, r); !equalRows(v[:3], want[0]) {
			t.Fatalf("prefetch %d: %v", i, v)
		}
		r.Close()
	}
	// A pending prefetch on a table that gets closed.
	last, _ := tbl.PrefetchIDs([]int64{10})
	tbl.Close()
	if _, err := last.Wait(context.Background()); !errors.Is(err, embedding.ErrClosed) {
		t.Fatalf("Wait on a closed table: %v", err)
	}
	if _, err := tbl.PrefetchIDs([]int64{10}); !errors.Is(err, embedding.ErrClosed) {
		t.Fatalf("Prefetch on a closed table: %v", err)
	}
}

// Discard while another goroutine Waits forgets the prefetch: Discard returns nil, the Wait
// returns at once with ErrUnknownPrefetch, and the C side holds the prefetch no more. (The C
// side used to refuse to discard a prefetch that a wait held, which Wait's polling nearly always
// does: Discard failed, and the prefetch stayed pending until the table closed, out of reach.)
func TestPrefetchDiscardDuringWait(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 1})
	big, waitBusy := busyPrefetches(t, tbl) // so that p stays pending for a while
	p, err := tbl.PrefetchIDs(big)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	waited := make(chan error, 1)
	go func() {
		close(started)
		r, err := p.Wait(context.Background())
		r.Close()
		waited <- err
	}()
	<-started
	time.Sleep(30 * time.Millisecond) // the waiter is inside a wait on the C side by now
	if err := p.Discard(); err != nil {
		t.Fatalf("Discard during Wait: %v", err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, embedding.ErrUnknownPrefetch) {
			t.Fatalf("Wait during which the prefetch was discarded: %v, want ErrUnknownPrefetch", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Wait did not return after the prefetch was discarded")
	}
	if err := p.Discard(); err != nil {
		t.Fatalf("second Discard: %v", err)
	}
	if _, err := p.Wait(context.Background()); !errors.Is(err, embedding.ErrUnknownPrefetch) {
		t.Fatalf("Wait after Discard: %v", err)
	}
	rows, _, ready, err := cgoTable(t, tbl).PrefetchWait(p.ID(), 0)
	if rows != nil {
		rows.Close()
	}
	if !errors.Is(err, cgotorch.ErrUnknownPrefetch) {
		t.Fatalf("the C side still holds the discarded prefetch: ready %v, err %v", ready, err)
	}
	waitBusy()
}

// cgoTable opens the binding's handle (internal/ctable) of an embedding table.
func cgoTable(t *testing.T, tbl *embedding.Table) *ctable.Table {
	c, err := ctable.Open(tbl.Name())
	if err != nil {
		t.Fatal(err)
	}
	return c // its handle is released by its cleanup; closing it would close the table
}

func TestEmptyBatches(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 4, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.5}})
	r, err := tbl.LookupIDs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Shape(); len(s) != 2 || s[0] != 0 || s[1] != 4 {
		t.Fatalf("empty lookup shape %v", s)
	}
	r.Close()
	rows, found, err := tbl.ReadIDs([]int64{})
	if err != nil || len(found) != 0 || rows.Shape()[0] != 0 {
		t.Fatalf("empty read: %v", err)
	}
	rows.Close()
	if err := tbl.UpdateIDs(nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := tbl.WriteIDs(nil, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := tbl.DeleteIDs(nil); err != nil || n != 0 {
		t.Fatal(err)
	}
	if st, _ := tbl.Stats(); st.Step != 1 || st.Len != 0 {
		t.Fatalf("stats after empty ops %+v", st)
	}
}

// The libtorch pitfall of optimizers.md: a single id of a dim-1 table (a bias term) must move.
func TestSingleIDDim1Update(t *testing.T) {
	for _, opt := range []embedding.Optimizer{embedding.SGD{LR: 0.5}, embedding.Adagrad{LR: 0.5}, embedding.SparseAdam{LR: 0.5}} {
		tbl := newTable(t, embedding.Config{Dim: 1, Initializer: embedding.Constant{Value: 1}, Optimizer: opt}, "bias")
		update(t, tbl, []int64{7}, 1)
		if v := lookup(t, tbl, 7)[0][0]; !near(float64(v), 0.5, 1e-6) {
			t.Fatalf("%T: bias %v after one step, want 0.5", opt, v)
		}
		tbl.Close()
	}
}

// A table on a GPU defaults to blocks of 65536 rows (each block a batch touches costs kernel
// launches), one on the CPU to 4096; no GPU is needed to resolve the configuration.
func TestDefaultBlockRowsByDevice(t *testing.T) {
	for _, c := range []struct {
		dev  cgotorch.Device
		want int
	}{{cgotorch.CPU, 4096}, {cgotorch.CUDA(0), 65536}} {
		if got, err := embedding.DefaultBlockRows(c.dev); err != nil || got != c.want {
			t.Errorf("%v: BlockRows %d (%v), want %d", c.dev, got, err, c.want)
		}
	}
}

func TestCUDATable(t *testing.T) {
	if !cgotorch.CUDAAvailable() {
		t.Skip("no CUDA device")
	}
	for _, layout := range []embedding.Layout{embedding.Interleaved, embedding.Separate} {
		cfg := embedding.Config{Dim: 4, Seed: 8, Optimizer: embedding.SparseAdam{LR: 0.1}, Layout: layout, BlockRows: 8}
		cpu := newTable(t, cfg, "cpu", strconv.Itoa(int(layout)))
		cfg.Device = cgotorch.CUDA(0)
		gpu := newTable(t, cfg, "gpu", strconv.Itoa(int(layout)))
		ids := []int64{1, 2, 3, 2, 50, 1000}
		grads := make([]float32, len(ids)*4)
		for i := range grads {
			grads[i] = float32(i%7) - 3
		}
		for step := 0; step < 3; step++ {
			update(t, cpu, ids, grads...)
			k := ids64(t, ids)
			kg, err := k.To(cgotorch.CUDA(0), cgotorch.KeepDType)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := cgotorch.FromSlice(grads, int64(len(ids)), 4)
			gg, _ := g.To(cgotorch.CUDA(0), cgotorch.KeepDType)
			if err := gpu.Update(kg, gg); err != nil {
				t.Fatal(err)
			}
			r, err := gpu.Lookup(kg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Device().Type != cgotorch.DeviceCUDA {
				t.Fatalf("rows on %v, want the keys' device", r.Device())
			}
			want := lookup(t, cpu, ids...)
			got, _ := embedding.Rows(r)
			// a CPU table given keys on the GPU: the id map works on a host copy, the rows
			// come back on the keys' device
			rc, err := cpu.Lookup(kg)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Device().Type != cgotorch.DeviceCUDA {
				t.Fatalf("CPU table, CUDA keys: rows on %v, want the keys' device", rc.Device())
			}
			gotc, _ := embedding.Rows(rc)
			for i := range want {
				if !rowsNear(got[i], want[i], 1e-5) {
					t.Fatalf("step %d id %d: gpu %v cpu %v", step, ids[i], got[i], want[i])
				}
				if !rowsNear(gotc[i], want[i], 0) {
					t.Fatalf("step %d id %d: CPU table with CUDA keys %v, with CPU keys %v", step, ids[i], gotc[i], want[i])
				}
			}
		}
	}
}

// Config has the optimizer's defaults filled in, and the learning rate SetLR set, also once the
// table is closed.
func TestConfigFillsOptimizerDefaults(t *testing.T) {
	tbl, err := embedding.NewNamed(t.Name(), embedding.Config{Dim: 2, Optimizer: embedding.SparseAdam{}})
	if err != nil {
		t.Fatal(err)
	}
	want := embedding.SparseAdam{LR: 0.001, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	if got := tbl.Config().Optimizer; got != want {
		t.Fatalf("Config().Optimizer = %+v, want %+v", got, want)
	}
	if err := tbl.SetLR(0.5); err != nil {
		t.Fatal(err)
	}
	want.LR = 0.5
	h, _ := embedding.Get(t.Name())
	for name, x := range map[string]*embedding.Table{"the handle": tbl, "another handle": h} {
		if got := x.Config().Optimizer; got != want {
			t.Errorf("%s after SetLR: %+v, want %+v", name, got, want)
		}
	}
	tbl.Close()
	if got := tbl.Config().Optimizer; got != want || tbl.LR() != 0.5 {
		t.Errorf("after Close: %+v, LR %v; want %+v", got, tbl.LR(), want)
	}
}

// Close waits for the table's operations in flight without holding the package's registry:
// an ExportEach whose function creates another table while the table is being closed
// deadlocked (Close held the registry's lock, New waited for it). On a regression this test
// fails after 10 s and leaves the registry locked, so later tests of the package hang too.
func TestCloseDoesNotHoldTheRegistry(t *testing.T) {
	x, err := embedding.NewNamed(t.Name(), embedding.Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	lookup(t, x, 1)
	inFn := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- x.ExportEach(context.Background(), 1, func(*embedding.ExportChunk) error {
			close(inFn)
			time.Sleep(100 * time.Millisecond) // Close is waiting for the export by now
			o, err := embedding.NewNamed(t.Name()+"/other", embedding.Config{Dim: 2})
			if err == nil {
				err = o.Close()
			}
			return err
		})
	}()
	<-inFn
	closed := make(chan error, 1)
	go func() { closed <- x.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: New inside ExportEach waits for the registry, held by Close, which waits for ExportEach")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
