package cdist

import (
	"runtime"
	"sync/atomic"
	"time"
)

// A collective blocks in one cgo call for the whole exchange (hundreds of microseconds between
// local ranks). The Go scheduler lets a goroutine keep its P through such calls while another
// P is idle, but once the goroutine has run for 10 ms without passing through the scheduler
// (schedtick unchanged: a cgo call returns to its P without rescheduling) sysmon takes the P of
// every call it finds blocked: a handoff to a new M, that M's spin and park, a wake-up to get a
// P back on the return, about four context switches per collective, on the CPUs the peers'
// Gloo threads need. Passing through the scheduler every few milliseconds (runtime.Gosched,
// about two switches each time) keeps the goroutine's time slice fresh. docs/performance.md
// has the figures.

// yieldEvery is how often the goroutines that run collectives pass through the scheduler: well
// under sysmon's 10 ms limit.
const yieldEvery = 2 * time.Millisecond

// yielder says when the next pass through the scheduler is due; one per process, since the
// limit is per P and the collectives of several groups may run on one goroutine.
type yielder struct{ last atomic.Int64 } // the time of the last pass, in ns since epoch

var (
	epoch       = time.Now()
	collectives yielder
)

// due reports whether a pass is due at now (ns since epoch), and if so records it, once
// among callers racing on the same interval.
func (y *yielder) due(now int64) bool {
	last := y.last.Load()
	return now-last >= int64(yieldEvery) && y.last.CompareAndSwap(last, now)
}

// beforeBlocking runs before every blocking collective call.
func beforeBlocking() {
	if collectives.due(int64(time.Since(epoch))) {
		runtime.Gosched()
	}
}
