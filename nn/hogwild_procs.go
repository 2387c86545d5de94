package nn

import (
	"runtime"
	"sync"
)

// Go's scheduler and Hogwild workers. A worker spends most of its step in cgo calls of tens of
// microseconds. When every P is held by a goroutine in such a call, sysmon retakes the Ps
// (after 20 us) and the returning worker has to take an idle P under the scheduler's lock, or
// park its thread until one frees: with GOMAXPROCS equal to the number of workers, two workers
// on 2 cores used 20-30% more CPU per sample than one and gained 1.35x where two processes
// gain 1.85x (docs/performance.md, "CTR step on 2 cores"). One P beyond the workers is never
// retaken this way (sysmon leaves a P in a call alone while another is idle). So Train and
// TrainEach raise GOMAXPROCS to workers+1 while they run, if it is lower, and put the old value
// back when the last running call returns. The extra P runs Go code only when there is some (the
// feeder of Train's channel, the collector); the OS then shares the cores among the threads.
var hogwildProcs struct {
	sync.Mutex
	running int // Train and TrainEach calls running
	prev    int // GOMAXPROCS before the first of them raised it; 0 when none did
}

// reserveProcs makes GOMAXPROCS at least workers+1 until the returned release is called.
func reserveProcs(workers int) (release func()) {
	p := &hogwildProcs
	p.Lock()
	defer p.Unlock()
	p.running++
	if cur := runtime.GOMAXPROCS(0); cur < workers+1 {
		if p.prev == 0 {
			p.prev = cur
		}
		runtime.GOMAXPROCS(workers + 1)
	}
	return func() {
		p.Lock()
		defer p.Unlock()
		p.running--
		if p.running == 0 && p.prev != 0 {
			runtime.GOMAXPROCS(p.prev)
			p.prev = 0
		}
	}
}
