package embedding_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// A table being closed (its operations fail with ErrClosed already, Close waits for one in
// flight) is not open: Names does not list it, Get gives no handle to it and New may take its
// name. Close used to drop the name only after the operations in flight had finished.
func TestClosingTableFreesItsName(t *testing.T) {
	name := t.Name()
	x, err := embedding.NewNamed(name, embedding.Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	lookup(t, x, 1)
	other, ok := embedding.Get(name)
	if !ok {
		t.Fatal("Get of an open table failed")
	}
	releaseOnce, exported := holdInExport(x)
	defer releaseOnce()
	closed := make(chan error, 1)
	go func() { closed <- other.Close() }()
	// Wait (without sleeping) until Close has marked the table closed: a prefetch checks that
	// before it takes any lock.
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := x.PrefetchIDs([]int64{1})
		if err == nil {
			p.Discard()
		} else if errors.Is(err, embedding.ErrClosed) {
			break
		} else {
			t.Fatalf("Prefetch: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("Close never marked the table closed")
		}
	}
	if slices.Contains(embedding.Names(), name) {
		t.Errorf("Names lists %q, whose operations fail with ErrClosed", name)
	}
	if h, ok := embedding.Get(name); ok {
		t.Errorf("Get gave a handle to the table being closed")
		if _, err := h.Stats(); !errors.Is(err, embedding.ErrClosed) {
			t.Errorf("Stats of that handle: %v", err)
		}
	}
	n, err := embedding.NewNamed(name, embedding.Config{Dim: 3})
	if err != nil {
		t.Errorf("New with the name of a table being closed: %v", err)
	} else {
		lookup(t, n, 1)
	}
	releaseOnce()
	if err := <-exported; err != nil {
		t.Fatalf("ExportEach: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n != nil {
		// The new table is unaffected by the old one's close and is what Get finds.
		if !slices.Contains(embedding.Names(), name) {
			t.Errorf("Names misses the new table %q", name)
		}
		g, ok := embedding.Get(name)
		if !ok || g.Dim() != 3 {
			t.Errorf("Get after the old table's close: ok %v", ok)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// LoadInto is all or nothing also when a table it loads into is closed after the checks (here
// by the reader of an extra file, which runs between the checks and the swaps): the tables
// before it in the list keep their contents.
func TestLoadIntoTableClosedMeanwhile(t *testing.T) {
	dir := t.TempDir()
	a := newTable(t, embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{}}, "a")
	b := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}, "b")
	r := rand.New(rand.NewPCG(7, 1))
	train(t, a, r, 3, 10, 40)
	train(t, b, r, 3, 10, 40)
	files := map[string]func(io.Writer) error{"extra": func(w io.Writer) error { _, err := w.Write([]byte("x")); return err }}
	if err := embedding.SaveWith(context.Background(), dir, []*embedding.Table{a, b}, files); err != nil {
		t.Fatal(err)
	}
	train(t, a, r, 2, 10, 40) // so that a swap of a shows
	before := dump(t, a)
	err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{a, b}, map[string]func(io.Reader) error{
		"extra": func(io.Reader) error { return b.Close() },
	})
	if !errors.Is(err, embedding.ErrClosed) {
		t.Errorf("LoadInto into a table closed meanwhile: %v, want ErrClosed", err)
	}
	sameDump(t, "first table after a load that failed on the second", dump(t, a), before)
}

// holdInExport starts an ExportEach of x whose function blocks, and returns once it is inside
// it: the export holds the table's lock shared (a Close waits for it) until release is called;
// exported then gets its result. release may be called more than once.
func holdInExport(x *embedding.Table) (release func(), exported <-chan error) {
	inFn, held := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- x.ExportEach(context.Background(), 1, func(*embedding.ExportChunk) error {
			close(inFn)
			<-held
			return nil
		})
	}()
	<-inFn
	return sync.OnceFunc(func() { close(held) }), done
}

// waitBlocked returns once a goroutine whose stack holds fn is blocked in one of states (as
// runtime.Stack names them, e.g. "sync.RWMutex.Lock"); it fails the test after 5 s.
func waitBlocked(t *testing.T, fn string, states ...string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			for _, s := range states {
				if strings.Contains(g, "["+s) && strings.Contains(g, fn) {
					return
				}
			}
		}
		runtime.Gosched()
	}
	t.Fatalf("no goroutine in %s blocked in %v", fn, states)
}

// Wait honours a cancelled context also while a Close of its table's handle waits for a long
// operation on it (here an export): it used to wait for the handle's lock, behind the Close,
// until the export ended, whatever its context said.
func TestPrefetchWaitCancelledWhileClosePending(t *testing.T) {
	x, err := embedding.NewNamed(t.Name(), embedding.Config{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	lookup(t, x, 1)
	p, err := x.PrefetchIDs([]int64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	releaseOnce, exported := holdInExport(x)
	defer releaseOnce()
	closed := make(chan error, 1)
	go func() { closed <- x.Close() }()
	waitBlocked(t, "ctable.(*Table).Close", "sync.RWMutex.Lock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		rows *cgotorch.Tensor
		err  error
	}
	waited := make(chan result, 1)
	go func() {
		r, err := p.Wait(ctx)
		waited <- result{r, err}
	}()
	// Wait is past its first look at ctx, waiting for the result or ctx.
	waitBlocked(t, "embedding.(*Prefetch).Wait", "select")
	cancel()
	pending := true
	select {
	case r := <-waited:
		pending = false
		if r.err == nil {
			r.rows.Close()
			t.Errorf("Wait with a cancelled context returned rows")
		} else if !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, embedding.ErrClosed) {
			t.Errorf("Wait: %v, want context.Canceled or ErrClosed", r.err)
		}
	case <-time.After(3 * time.Second):
		t.Errorf("Wait ignored its cancelled context while a Close of the table waited")
	}
	releaseOnce()
	if err := <-exported; err != nil {
		t.Fatalf("ExportEach: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if pending {
		if r := <-waited; r.err == nil {
			r.rows.Close()
		}
	}
}

// LoadInto does not hold the registry while its swap waits for an operation in flight on the
// table (here an export, whose function creates a table): it did, and New inside the export
// waited for the registry, held by LoadInto, which waited for the export.
func TestLoadIntoDoesNotHoldTheRegistry(t *testing.T) {
	dir := t.TempDir()
	x, err := embedding.NewNamed(t.Name(), embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}})
	if err != nil {
		t.Fatal(err)
	}
	// Closed only if nothing deadlocked (a Close would wait for the stuck export for ever).
	train(t, x, rand.New(rand.NewPCG(8, 1)), 2, 8, 20)
	if err := embedding.Save(context.Background(), dir, x); err != nil {
		t.Fatal(err)
	}
	inFn, proceed := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		first := true
		done <- x.ExportEach(context.Background(), 1, func(*embedding.ExportChunk) error {
			if !first {
				return nil
			}
			first = false
			close(inFn)
			<-proceed // LoadInto is waiting for this export by now
			o, err := embedding.NewNamed(t.Name()+"/other", embedding.Config{Dim: 2})
			if err == nil {
				err = o.Close()
			}
			return err
		})
	}()
	<-inFn
	loaded := make(chan error, 1)
	go func() { loaded <- embedding.LoadInto(context.Background(), dir, []*embedding.Table{x}, nil) }()
	waitBlocked(t, "ctable.(*Table).Swap", "syscall")
	close(proceed)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("deadlock: New inside ExportEach waits for the registry, held by LoadInto, which waits for ExportEach")
	}
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
}
