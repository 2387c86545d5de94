package embedding_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// newTable creates a table named after the test and closes it when the test ends.
func newTable(t testing.TB, cfg embedding.Config, suffix ...string) *embedding.Table {
	t.Helper()
	name := strings.Join(append([]string{t.Name()}, suffix...), "/")
	tbl, err := embedding.NewNamed(name, cfg)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	t.Cleanup(func() { tbl.Close() })
	return tbl
}

// sumStep is a training step through autograd: a training Forward of ids, a backward pass of
// the sum of the rows (gradients of 1), and Step.
func sumStep(t testing.TB, tbl *embedding.Table, ids ...int64) {
	t.Helper()
	out, err := tbl.Forward(ids64(t, ids), embedding.ForwardOptions{Train: true})
	if err != nil {
		t.Fatal(err)
	}
	out.Sum().Backward()
	if err := tbl.Step(); err != nil {
		t.Fatal(err)
	}
}

func ids64(t testing.TB, ids []int64) *cgotorch.Tensor {
	t.Helper()
	k, err := cgotorch.FromSlice(ids)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func floats(t testing.TB, x *cgotorch.Tensor) []float32 {
	t.Helper()
	v, err := cgotorch.ToSlice[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func lookup(t testing.TB, tbl *embedding.Table, ids ...int64) [][]float32 {
	t.Helper()
	r, err := tbl.LookupIDs(ids)
	if err != nil {
		t.Fatalf("LookupIDs(%v): %v", ids, err)
	}
	defer r.Close()
	rows, err := embedding.Rows(r)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func read(t testing.TB, tbl *embedding.Table, ids ...int64) ([][]float32, []bool) {
	t.Helper()
	r, found, err := tbl.ReadIDs(ids)
	if err != nil {
		t.Fatalf("ReadIDs(%v): %v", ids, err)
	}
	defer r.Close()
	rows, err := embedding.Rows(r)
	if err != nil {
		t.Fatal(err)
	}
	return rows, found
}

func update(t testing.TB, tbl *embedding.Table, ids []int64, grads ...float32) {
	t.Helper()
	if err := tbl.UpdateIDs(ids, grads); err != nil {
		t.Fatalf("UpdateIDs(%v): %v", ids, err)
	}
}

func write(t testing.TB, tbl *embedding.Table, ids []int64, values ...float32) {
	t.Helper()
	if err := tbl.WriteIDs(ids, values); err != nil {
		t.Fatalf("WriteIDs(%v): %v", ids, err)
	}
}

// exported is a table's Export as Go values.
type exported struct {
	ids    []int64
	rows   map[int64][]float32
	states map[string]map[int64][]float32
	step   int64
}

// snapshot exports tbl and reads the snapshot's ids; the caller closes the snapshot.
func snapshot(t testing.TB, tbl *embedding.Table) (*embedding.Snapshot, []int64) {
	t.Helper()
	s, err := tbl.Export()
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	ids, err := cgotorch.ToSlice[int64](s.IDs)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s, ids
}

func export(t testing.TB, tbl *embedding.Table) exported {
	t.Helper()
	s, ids := snapshot(t, tbl)
	defer s.Close()
	e := exported{ids: ids, rows: map[int64][]float32{}, states: map[string]map[int64][]float32{}, step: s.Step}
	rows, err := embedding.Rows(s.Rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(ids) {
		t.Fatalf("export: %d ids, %d rows", len(ids), len(rows))
	}
	for i, id := range ids {
		if i > 0 && ids[i-1] >= id {
			t.Fatalf("export: ids not strictly ascending at %d: %d, %d", i, ids[i-1], id)
		}
		e.rows[id] = rows[i]
	}
	for _, st := range s.States {
		v, err := embedding.Rows(st.Values)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64][]float32{}
		for i, id := range ids {
			m[id] = v[i]
		}
		e.states[st.Name] = m
	}
	return e
}

func near(a, b float64, tol float64) bool {
	return math.Abs(a-b) <= tol*(1+math.Abs(b))
}

func rowsNear(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(float64(a[i]), float64(b[i]), tol) {
			return false
		}
	}
	return true
}

func equalRows(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func isClosed(err error) bool { return errors.Is(err, embedding.ErrClosed) }

// filled returns n copies of v.
func filled(n int, v float32) []float32 {
	g := make([]float32, n)
	for i := range g {
		g[i] = v
	}
	return g
}

// firstErr keeps the first error that goroutines report (report drops later ones).
type firstErr chan error

func newFirstErr() firstErr { return make(firstErr, 1) }

func (f firstErr) report(err error) {
	select {
	case f <- err:
	default:
	}
}

// check fails t with the error reported, if any (call it once the goroutines are done).
func (f firstErr) check(t testing.TB) {
	t.Helper()
	select {
	case err := <-f:
		t.Fatal(err)
	default:
	}
}

// startWorkers starts n goroutines, each calling f with its number w (0..n-1) and a random
// source seeded with w+1, and returns a channel closed once all have returned.
func startWorkers(n int, f func(w int, rng *rand.Rand)) <-chan struct{} {
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w, rand.New(rand.NewSource(int64(w+1))))
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}
