package nn_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/gorec/gorec/nn"
)

// TestHogwildReservesAProc checks that Train runs with GOMAXPROCS above its worker count and
// puts the caller's setting back when it returns, and leaves a higher setting alone.
func TestHogwildReservesAProc(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct{ set, workers, during int }{{1, 2, 3}, {2, 2, 3}, {8, 2, 8}} {
		runtime.GOMAXPROCS(c.set)
		user, item := newHWTables(t)
		m := newHWModel(user, item)
		opt, err := nn.NewAdam(m, nn.AdamOptions{LR: 1e-2})
		if err != nil {
			t.Fatal(err)
		}
		var seen atomic.Int64
		h, err := nn.NewHogwild(m, opt, c.workers, func() (*hwModel, error) { return newHWModel(user, item), nil },
			func(r *hwModel, b hwBatch) *nn.Tensor {
				seen.Store(int64(runtime.GOMAXPROCS(0)))
				return r.loss(b)
			})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Train(context.Background(), feed(hwBatches(4, 8, 1))); err != nil {
			t.Fatal(err)
		}
		if got := seen.Load(); got != int64(c.during) {
			t.Errorf("GOMAXPROCS %d, %d workers: %d during Train, want %d", c.set, c.workers, got, c.during)
		}
		if got := runtime.GOMAXPROCS(0); got != c.set {
			t.Errorf("GOMAXPROCS %d after Train, want %d back", got, c.set)
		}
	}
}
