package dist

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
)

func init() { scenarios["fork"] = scenarioFork }

// A fork of a group (FileStore, and TCPStore served by rank 0's first group) runs collectives
// of its own, concurrently with the first group's: two goroutines all-reduce on the two groups
// at once, each group's sum right. A bad name is refused.
func TestGroupFork(t *testing.T) {
	for _, kind := range []string{"file", "tcp"} {
		t.Run(kind, func(t *testing.T) {
			res := launch(t, "fork", 2, store(t, kind), 30*time.Second, func(int) []string { return nil })
			requirePassed(t, res)
		})
	}
}

func scenarioFork(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	if _, err := g.Fork("a/b"); !errors.Is(err, ErrInvalidArgument) {
		return fmt.Errorf("fork named a/b: %v, want ErrInvalidArgument", err)
	}
	f, err := g.Fork("second")
	if err != nil {
		return err
	}
	defer f.Close()
	sum := func(gr *Group, v float32, out chan<- error) {
		for range 20 {
			s, err := gr.AllReduce(cgotorch.MustFromSlice([]float32{v + float32(gr.Rank())}), Sum)
			if err != nil {
				out <- err
				return
			}
			got, _ := s.Item()
			s.Close()
			if want := 2*v + 1; got != float64(want) {
				out <- fmt.Errorf("sum %v, want %v", got, want)
				return
			}
		}
		out <- nil
	}
	done := make(chan error, 2)
	go sum(g, 10, done)
	go sum(f, 100, done)
	return errors.Join(<-done, <-done)
}
