package dist

import (
	"fmt"
	"syscall"
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

// A rank killed mid-job: the others get an error within the timeout and live on.
func TestKilledRank(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			res := launch(t, "killed", world, store(t, "tcp"), 5*time.Second, nil)
			if last := res[world-1]; !killedBySignal(last.err, syscall.SIGKILL) {
				t.Errorf("the last rank was not killed: %v\n%s", last.err, last.output)
			}
			requirePassed(t, res[:world-1])
			t.Log(res[0].output)
		})
	}
}

// A rank that skips a collective: the others time out.
func TestSkippedCollective(t *testing.T) {
	res := launch(t, "skip", 2, store(t, "file"), 2*time.Second, nil)
	requirePassed(t, res)
	t.Log(res[0].output)
}

// A rank of another job or world size is refused on every rank.
func TestRefusedRanks(t *testing.T) {
	for _, scenario := range []string{"other-job", "other-world"} {
		for _, kind := range []string{"file", "tcp"} {
			t.Run(scenario+"/"+kind, func(t *testing.T) {
				res := launch(t, scenario, 2, store(t, kind), 10*time.Second, nil)
				requirePassed(t, res)
				t.Log(res[0].output, res[1].output)
			})
		}
	}
}

// Calls that do not match across ranks fail on every rank, and the group stays usable.
func TestDisagreeingCalls(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			res := launch(t, "disagree", world, store(t, "file"), 10*time.Second, nil)
			requirePassed(t, res)
			if world == 2 {
				t.Log(res[0].output)
			}
		})
	}
}
