package outside

import (
	"fmt"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/dist"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// TrainPipeline is documented as exact: "its training equals the plain loop's bit for bit",
// with SetAdmission(2) too. There the fetch of batch i+1 counts id 1's second lookup and admits
// it before batch i's Step, which must still drop batch i's gradient of id 1 (taken against a
// zero row), as a plain loop does; it once applied it to the admitted row.
//
// Plain loop: batch 0 looks id 1 up once (not admitted: its gradient is dropped), batches 1 and
// 2 train it (2 Adagrad steps); the pipeline must too (it once took 3).
func TestPipelineAdmissionEqualsPlainLoop(t *testing.T) {
	batches := [][]int64{{1}, {1}, {1}}
	run := func(pipelined bool) []float32 {
		g := oneRank(t)
		users, err := dist.NewShardedTable(g, "users", embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{LR: 0.1}})
		if err != nil {
			t.Fatal(err)
		}
		defer users.Close()
		if err := users.SetAdmission(2); err != nil {
			t.Fatal(err)
		}
		m := nn.NewEmbedding(users, nn.EmbeddingOptions{})
		opt, err := nn.NewAdam(m, nn.AdamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]*cgotorch.Tensor, len(batches))
		for i, b := range batches {
			ids[i] = cgotorch.MustFromSlice(b)
		}
		loss := func(i int) (*cgotorch.Tensor, error) { return m.Forward(ids[i]).Sum(), nil }
		if pipelined {
			p, err := dist.NewTrainPipeline(opt, func(i int) []dist.Prefetch { return []dist.Prefetch{{Table: users, IDs: ids[i]}} }, loss, dist.TrainPipelineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for i := range batches {
				if _, _, err := p.Progress(i); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := p.Flush(); err != nil {
				t.Fatal(err)
			}
		} else {
			for i := range batches {
				if err := cgotorch.TryWithScope(func() error {
					opt.ZeroGrad()
					l, _ := loss(i)
					l.Backward()
					return opt.Step()
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
		rows, _, err := users.Read(cgotorch.MustFromSlice([]int64{1}))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := cgotorch.ToSlice[float32](rows)
		return v
	}
	plain, piped := run(false), run(true)
	if fmt.Sprint(plain) != fmt.Sprint(piped) {
		t.Errorf("under SetAdmission(2), id 1's row: plain loop %v, pipeline %v", plain, piped)
	}
}
