package embedding_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// busyPrefetches starts two long reads, which keep the prefetch pool's two workers busy so that
// a prefetch started after them stays pending for a while; the caller waits for them.
func busyPrefetches(t *testing.T, tbl *embedding.Table) (big []int64, wait func()) {
	big = make([]int64, 4_000_000)
	for i := range big {
		big[i] = int64(i)
	}
	var bs []*embedding.Prefetch
	for i := 0; i < 2; i++ {
		b, err := tbl.PrefetchIDs(big)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	return big, func() {
		for _, b := range bs {
			r, err := b.Wait(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
		}
	}
}

// noAwait returns once no goroutine waits for a prefetch on the C side any more (fails after 5 s).
func noAwait(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "prefetchState).await") {
			return
		}
	}
	t.Fatal("a goroutine still waits for a prefetch that was discarded")
}

// Wait does not poll: while the rows are being read it is parked on a channel (select), not
// sleeping between timed waits on the C side as it did (every 10 ms).
func TestPrefetchWaitDoesNotPoll(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 1})
	big, wait := busyPrefetches(t, tbl)
	defer wait()
	p, err := tbl.PrefetchIDs(big)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Discard()
	go p.Wait(context.Background())
	waitBlocked(t, "embedding.(*Prefetch).Wait", "select")
}

// A Wait stopped by its context leaves the prefetch pending: a later Wait gets the rows, and
// Discard after a stopped Wait releases everything (the C side holds the prefetch no more, no
// goroutine waits for it).
func TestPrefetchWaitCancelled(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 1, Initializer: embedding.Constant{Value: 2}})
	lookup(t, tbl, 1)
	big, wait := busyPrefetches(t, tbl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	p, err := tbl.PrefetchIDs([]int64{1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v, want context.DeadlineExceeded", err)
	}
	q, err := tbl.PrefetchIDs(big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v", err)
	}
	wait()
	r, err := p.Wait(context.Background())
	if err != nil {
		t.Fatalf("Wait after a stopped Wait: %v", err)
	}
	if got := floats(t, r); len(got) != 1 || got[0] != 2 {
		t.Errorf("rows %v, want [2]", got)
	}
	r.Close()
	if err := q.Discard(); err != nil {
		t.Fatal(err)
	}
	noAwait(t)
	rows, _, _, err := cgoTable(t, tbl).PrefetchWait(q.ID(), 0)
	rows.Close()
	if !errors.Is(err, cgotorch.ErrUnknownPrefetch) {
		t.Errorf("the C side still holds the discarded prefetch: %v", err)
	}
}
