package cgotorch

import (
	"errors"
	"sync"
	"testing"
)

func TestScopeReleasesTemporaries(t *testing.T) {
	bytes := LiveBytes()
	var kept, dropped *Tensor
	WithScope(func(s *Scope) {
		dropped = Ones([]int64{1024})
		kept = Ones([]int64{1024})
		closedEarly := Ones([]int64{8})
		closedEarly.Close()
		s.Keep(kept)
		if LiveBytes() != bytes+2*4096 {
			t.Fatalf("inside: %d bytes, want %d", LiveBytes(), bytes+2*4096)
		}
	})
	if LiveBytes() != bytes+4096 {
		t.Fatalf("after the scope: %d bytes, want %d", LiveBytes(), bytes+4096)
	}
	if err := Try(func() { dropped.Numel() }); !errors.Is(err, ErrClosed) {
		t.Fatalf("released tensor: %v", err)
	}
	if _, err := ToSlice[float32](dropped); !errors.Is(err, ErrClosed) {
		t.Fatalf("released tensor to slice: %v", err)
	}
	if kept.Numel() != 1024 {
		t.Fatal("kept tensor lost")
	}
	dropped.Close() // closing a released tensor is fine
	kept.Close()
	if LiveBytes() != bytes {
		t.Fatalf("end: %d bytes, want %d", LiveBytes(), bytes)
	}
}

func TestNestedScopesKeepMovesOutward(t *testing.T) {
	var x *Tensor
	WithScope(func(outer *Scope) {
		WithScope(func(inner *Scope) {
			x = Ones([]int64{4})
			inner.Keep(x)
		})
		if x.Numel() != 4 {
			t.Fatal("kept tensor released by the inner scope")
		}
	})
	if err := Try(func() { x.Numel() }); !errors.Is(err, ErrClosed) {
		t.Fatalf("outer scope did not release the tensor kept by the inner one: %v", err)
	}
}

func TestScopeEndsOnPanic(t *testing.T) {
	bytes := LiveBytes()
	err := Try(func() {
		WithScope(func(s *Scope) {
			Ones([]int64{256})
			Zeros([]int64{-1})
		})
	})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
	if LiveBytes() != bytes {
		t.Fatalf("scope left %d bytes behind", LiveBytes()-bytes)
	}
}

// Scopes belong to one goroutine: tensors made by others at the same time are not taken.
func TestScopesArePerGoroutine(t *testing.T) {
	var wg sync.WaitGroup
	outside := make(chan *Tensor, 100)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				outside <- Ones([]int64{2})
			}
			if len(outside) == cap(outside) {
				return
			}
		}
	}()
	WithScope(func(s *Scope) {
		for i := 0; i < 50; i++ {
			Ones([]int64{2})
		}
	})
	close(stop)
	wg.Wait()
	close(outside)
	for x := range outside {
		if x.Numel() != 2 {
			t.Fatal("another goroutine's tensor was released")
		}
	}
}

func TestKeepAfterEnd(t *testing.T) {
	var saved *Scope
	WithScope(func(s *Scope) { saved = s })
	if err := Try(func() { saved.Keep(Ones([]int64{1})) }); !errors.Is(err, ErrClosed) {
		t.Fatalf("keep after end: %v", err)
	}
}

// TestOuterKeepInsideInnerScope: Keep on a scope takes a tensor out of it even while a scope
// opened inside it holds the tensor (Keep on the outer scope, called inside the inner one, once
// did nothing, and the inner scope released the tensor). The kept tensor outlives both scopes,
// is freed normally afterwards, and Keep leaves a tensor created outside the scope alone.
func TestOuterKeepInsideInnerScope(t *testing.T) {
	handles, bytes := LiveTensors(), LiveBytes()
	before := Ones([]int64{8})
	var x, y, inOuter *Tensor
	WithScope(func(outer *Scope) {
		WithScope(func(mid *Scope) {
			WithScope(func(inner *Scope) {
				x = Ones([]int64{256})
				y = Ones([]int64{256})
				outer.Keep(x)
				mid.Keep(y) // y moves to outer, which releases it
				outer.Keep(before)
			})
			if x.Numel() != 256 || y.Numel() != 256 {
				t.Fatal("kept tensor released by the inner scope")
			}
		})
		inOuter = Ones([]int64{2})
	})
	if err := Try(func() { x.Numel() }); err != nil {
		t.Fatalf("tensor passed to the outer scope's Keep was released: %v", err)
	}
	if err := Try(func() { y.Numel() }); !errors.Is(err, ErrClosed) {
		t.Fatalf("tensor kept by the middle scope outlived the outer one: %v", err)
	}
	if err := Try(func() { inOuter.Numel() }); !errors.Is(err, ErrClosed) {
		t.Fatalf("outer scope did not release its own tensor: %v", err)
	}
	if before.Numel() != 8 {
		t.Fatal("tensor created outside the scopes changed")
	}
	// The same from the outermost scope: the tensor leaves every scope.
	var z *Tensor
	WithScope(func(outer *Scope) {
		WithScope(func(inner *Scope) {
			z = Ones([]int64{4})
			outer.Keep(z)
		})
	})
	if z.Numel() != 4 {
		t.Fatal("kept tensor lost")
	}
	for _, v := range []*Tensor{before, x, y, inOuter, z} {
		v.Close()
	}
	waitForCounters(t, handles, bytes)
}

func TestTryWithScope(t *testing.T) {
	want := errors.New("f failed")
	if err := TryWithScope(func() error { return want }); err != want {
		t.Errorf("got %v, want f's error", err)
	}
	err := TryWithScope(func() error {
		Zeros([]int64{2, 3}).MM(Zeros([]int64{2, 3})) // shapes do not fit
		return nil
	})
	var te *Error
	if !errors.As(err, &te) {
		t.Errorf("got %v, want the *Error of the panic", err)
	}
	var kept *Tensor
	if err := TryWithScope(func() error { kept = Ones([]int64{1}); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Item(); !errors.Is(err, ErrClosed) {
		t.Errorf("a tensor created in TryWithScope is usable afterwards: %v", err)
	}
}
