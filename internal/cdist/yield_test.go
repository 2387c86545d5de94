package cdist

import (
	"sync"
	"testing"
)

// A pass through the scheduler is due once per yieldEvery, and once only among racing callers.
func TestYielderDue(t *testing.T) {
	var y yielder
	step := int64(yieldEvery)
	for _, c := range []struct {
		now  int64
		want bool
	}{
		{step, true}, {step + 1, false}, {2*step - 1, false}, {2 * step, true}, {2 * step, false}, {5 * step, true},
	} {
		if got := y.due(c.now); got != c.want {
			t.Errorf("due(%d) = %v, want %v", c.now, got, c.want)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	passes := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if y.due(10 * step) {
				mu.Lock()
				passes++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if passes != 1 {
		t.Errorf("%d racing callers were told to pass, want 1", passes)
	}
}
