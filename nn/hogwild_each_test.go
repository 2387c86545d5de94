package nn_test

import (
	"context"
	"errors"
	"iter"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

func TestHogwildTrainEachOneWorkerEqualsSynchronous(t *testing.T) {
	bs := hwBatches(30, 32, 6)
	ref, opt, _ := newHW(t, 1)
	trainSync(t, opt, bs, ref.loss)
	hw, _, h := newHW(t, 1)
	for _, part := range [][]hwBatch{bs[:10], bs[10:]} { // a second call resumes
		if err := h.TrainEach(context.Background(), func(int) iter.Seq[hwBatch] { return slices.Values(part) }); err != nil {
			t.Fatal(err)
		}
	}
	sameBits(t, hw.state(t), ref.state(t))
}

// tagged is a batch that names its worker and its place in that worker's sequence.
type tagged struct {
	worker, k int
	hwBatch
}

// hwEach is a Hogwild trainer of hwModel on tagged batches that records, per worker, the
// tags of the batches each replica trained on, in order.
type hwEach struct {
	m        *hwModel
	h        *nn.Hogwild[*hwModel, tagged]
	replicas []*hwModel // replica w: worker w's
	mu       sync.Mutex
	seen     map[*hwModel][][2]int
}

func newHWEach(t *testing.T, workers int) *hwEach {
	user, item := newHWTables(t)
	cgotorch.ManualSeed(0)
	e := &hwEach{m: newHWModel(user, item), seen: map[*hwModel][][2]int{}}
	opt, err := nn.NewAdam(e.m, nn.AdamOptions{LR: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	e.h, err = nn.NewHogwild(e.m, opt, workers,
		func() (*hwModel, error) {
			r := newHWModel(user, item)
			e.replicas = append(e.replicas, r)
			return r, nil
		},
		func(r *hwModel, b tagged) *nn.Tensor {
			e.mu.Lock()
			e.seen[r] = append(e.seen[r], [2]int{b.worker, b.k})
			e.mu.Unlock()
			return r.loss(b.hwBatch)
		})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// taggedSeq yields worker w's batches bs, tagged (w, 0), (w, 1), ...; before batch k it calls
// before(k) if before is not nil.
func taggedSeq(w int, bs []hwBatch, before func(k int)) iter.Seq[tagged] {
	return func(yield func(tagged) bool) {
		for k, b := range bs {
			if before != nil {
				before(k)
			}
			if !yield(tagged{w, k, b}) {
				return
			}
		}
	}
}

// forever yields worker w's batch b, tagged (w, 0), (w, 1), ..., until the worker stops it.
func forever(w int, b hwBatch) iter.Seq[tagged] {
	return func(yield func(tagged) bool) {
		for k := 0; yield(tagged{w, k, b}); k++ {
		}
	}
}

// tags are (w, 0), ..., (w, n-1).
func tags(w, n int) [][2]int {
	out := make([][2]int, n)
	for k := range out {
		out[k] = [2]int{w, k}
	}
	return out
}

// The sequences' lengths differ (worker 2's is nil, worker 1's ends early): each worker trains
// exactly its own sequence's batches, in order, and the others keep on when one ends.
func TestHogwildTrainEachOwnBatches(t *testing.T) {
	e := newHWEach(t, 3)
	lens := []int{12, 3, 0}
	if raceEnabled {
		lens[0] = 6
	}
	bs := hwBatches(lens[0], 16, 7)
	base := runtime.NumGoroutine()
	err := e.h.TrainEach(context.Background(), func(w int) iter.Seq[tagged] {
		if lens[w] == 0 {
			return nil
		}
		return taggedSeq(w, bs[:lens[w]], nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, base)
	for w, r := range e.replicas {
		if got, want := e.seen[r], tags(w, lens[w]); !slices.Equal(got, want) {
			t.Errorf("replica %d trained %v, want %v", w, got, want)
		}
	}
	if st, _ := e.m.user.Table.Stats(); st.Step != int64(lens[0]+lens[1]) {
		t.Fatalf("user table took %d steps, want %d", st.Step, lens[0]+lens[1])
	}
}

// Cancelled by worker 0's sequence before its batch 3: TrainEach returns the context's error,
// worker 0 trained batches 0-2 only, and worker 1's endless sequence was stopped.
func TestHogwildTrainEachCancel(t *testing.T) {
	e := newHWEach(t, 2)
	bs := hwBatches(6, 8, 8)
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := e.h.TrainEach(ctx, func(w int) iter.Seq[tagged] {
		if w == 1 {
			return forever(1, bs[0])
		}
		return taggedSeq(0, bs, func(k int) {
			if k == 3 {
				cancel()
			}
		})
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("TrainEach after cancel: %v, want context.Canceled", err)
	}
	waitGoroutines(t, base)
	if got := e.seen[e.replicas[0]]; !slices.Equal(got, tags(0, 3)) {
		t.Fatalf("worker 0 trained %v, want %v", got, tags(0, 3))
	}
	// A cancelled context stops a call before any batch.
	n := len(e.seen[e.replicas[1]])
	if err := e.h.TrainEach(ctx, func(w int) iter.Seq[tagged] { return forever(w, bs[0]) }); !errors.Is(err, context.Canceled) {
		t.Fatalf("TrainEach on a cancelled context: %v, want context.Canceled", err)
	}
	if len(e.seen[e.replicas[0]]) != 3 || len(e.seen[e.replicas[1]]) != n {
		t.Fatal("TrainEach on a cancelled context trained batches")
	}
}

// A failing step in worker 0, or a tensor operation panicking in its sequence, stops worker 1's
// endless sequence and comes back as the error.
func TestHogwildTrainEachFailure(t *testing.T) {
	bs := hwBatches(4, 8, 9)
	bad := slices.Clone(bs)
	bad[2].user = cgotorch.MustFromSlice([]float32{1, 2}) // float ids: the lookup panics
	panicking := func(yield func(tagged) bool) {
		if yield(tagged{0, 0, bs[0]}) {
			cgotorch.Cat([]*nn.Tensor{bs[0].user, bs[0].item}, 0) // [8] and [8, 2]: panics
		}
	}
	for name, seq0 := range map[string]iter.Seq[tagged]{"step": taggedSeq(0, bad, nil), "sequence": panicking} {
		e := newHWEach(t, 2)
		base := runtime.NumGoroutine()
		err := e.h.TrainEach(context.Background(), func(w int) iter.Seq[tagged] {
			if w == 1 {
				return forever(1, bs[0])
			}
			return seq0
		})
		var te *cgotorch.Error
		if !errors.As(err, &te) {
			t.Fatalf("%s: TrainEach: %v, want a *cgotorch.Error", name, err)
		}
		waitGoroutines(t, base)
	}
	e := newHWEach(t, 1)
	if err := e.h.TrainEach(context.Background(), nil); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("TrainEach(nil): %v, want ErrInvalidArgument", err)
	}
}

// Train and TrainEach run one at a time: a Train call waits while a TrainEach call runs.
func TestHogwildTrainEachOneCallAtATime(t *testing.T) {
	e := newHWEach(t, 2)
	bs := hwBatches(1, 8, 10)
	started, release := make(chan struct{}), make(chan struct{})
	each := make(chan error)
	go func() {
		each <- e.h.TrainEach(context.Background(), func(w int) iter.Seq[tagged] {
			if w == 1 {
				return nil
			}
			return taggedSeq(0, bs, func(int) {
				close(started)
				<-release
			})
		})
	}()
	<-started
	train := make(chan error)
	go func() { train <- e.h.Train(context.Background(), feed([]tagged{})) }()
	select {
	case err := <-train:
		t.Fatalf("Train returned (%v) while TrainEach ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-each; err != nil {
		t.Fatal(err)
	}
	if err := <-train; err != nil {
		t.Fatal(err)
	}
}
