package nn

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunSharedRunsSideBySide: with one helper, two calls run at the same time (each waits for
// the other to start), and each index runs once.
func TestRunSharedRunsSideBySide(t *testing.T) {
	var started sync.WaitGroup
	started.Add(2)
	both := make(chan struct{})
	go func() { started.Wait(); close(both) }()
	var runs [2]atomic.Int32
	timedOut := atomic.Bool{}
	runShared(2, 1, func(i int) {
		runs[i].Add(1)
		started.Done()
		select {
		case <-both:
		case <-time.After(10 * time.Second):
			timedOut.Store(true)
		}
	})
	if timedOut.Load() || runs[0].Load() != 1 || runs[1].Load() != 1 {
		t.Fatalf("side by side: timed out %v, runs %d %d", timedOut.Load(), runs[0].Load(), runs[1].Load())
	}
}

// TestRunSharedPanicsOnCaller: a helper's panic is raised on the calling goroutine.
func TestRunSharedPanicsOnCaller(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	var once atomic.Bool
	runShared(4, 3, func(i int) {
		if once.CompareAndSwap(false, true) {
			panic("boom")
		}
		time.Sleep(time.Millisecond)
	})
}
