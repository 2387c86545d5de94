package dist

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
)

func init() { scenarios["bytes-sent"] = scenarioBytesSent }

// BytesSent counts each collective's payload as its doc says, on both ranks.
func TestBytesSent(t *testing.T) {
	requirePassed(t, launch(t, "bytes-sent", 2, store(t, "file"), 30*time.Second, nil))
}

// scenarioBytesSent runs one collective of each kind and checks BytesSent after each.
func scenarioBytesSent(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	r := int64(g.Rank())
	f := cgotorch.Ones([]int64{10}) // 40 bytes
	defer f.Close()
	ids := cgotorch.MustFromSlice([]int64{1, 2, 3, 4, 5}) // 8 bytes a row
	defer ids.Close()
	steps := []struct {
		what string
		run  func() (*cgotorch.Tensor, error)
		want int64 // bytes this step adds on this rank
	}{
		{"all-reduce", func() (*cgotorch.Tensor, error) { return g.AllReduce(f, Sum) }, 40},
		{"broadcast", func() (*cgotorch.Tensor, error) { return g.Broadcast(f, 1) }, 40 * r}, // rank 1 is the root
		{"all-gather", func() (*cgotorch.Tensor, error) { return g.AllGather(ids) }, 40},
		// rank 0 keeps 2 rows and sends 3; rank 1 sends 1 and keeps 4
		{"all-to-all", func() (*cgotorch.Tensor, error) {
			out, _, err := g.AllToAll(ids, [][]int64{{2, 3}, {1, 4}}[r])
			return out, err
		}, [2]int64{24, 8}[r]},
		{"barrier", func() (*cgotorch.Tensor, error) { return nil, g.Barrier() }, 0},
	}
	total := int64(0)
	for _, s := range steps {
		out, err := s.run()
		if err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		out.Close()
		total += s.want
		if got := g.BytesSent(); got != total {
			return fmt.Errorf("after the %s: BytesSent %d, want %d", s.what, got, total)
		}
	}
	return nil
}
