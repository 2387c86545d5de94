package dist

import (
	"fmt"
	"testing"
	"time"
)

// Every collective's results on 2 and 3 ranks, over a FileStore and a TCPStore.
func TestCollectives(t *testing.T) {
	for _, kind := range []string{"file", "tcp"} {
		for _, world := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/%d", kind, world), func(t *testing.T) {
				requirePassed(t, launch(t, "collectives", world, store(t, kind), 30*time.Second, nil))
			})
		}
	}
}

// Collectives called from several goroutines at once on every rank.
func TestConcurrentCallers(t *testing.T) {
	requirePassed(t, launch(t, "concurrent", 2, store(t, "tcp"), 30*time.Second, nil))
}
