package nn_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// scheduleOf builds the case's schedule from torch's parameter names.
func scheduleOf(t *testing.T, c *refCase) nn.Schedule {
	t.Helper()
	switch c.Config["scheduler"] {
	case "StepLR":
		return nn.StepLR{StepSize: int64(cfgFloat(c, "step_size", 0)), Gamma: cfgFloat(c, "gamma", 0)}
	case "ExponentialLR":
		return nn.ExponentialLR{Gamma: cfgFloat(c, "gamma", 0)}
	case "CosineAnnealingLR":
		return nn.CosineAnnealingLR{TMax: int64(cfgFloat(c, "T_max", 0)), EtaMin: cfgFloat(c, "eta_min", 0)}
	case "LinearLR":
		return nn.LinearLR{StartFactor: cfgFloat(c, "start_factor", 0), EndFactor: cfgFloat(c, "end_factor", 0),
			TotalIters: int64(cfgFloat(c, "total_iters", 0))}
	}
	t.Fatalf("scheduler %v", c.Config["scheduler"])
	return nil
}

// The schedules give torch.optim.lr_scheduler's rates after every step, for two parameter groups
// and an embedding table (torch's third group), within 1e-12 relative.
func TestSchedulersMatchPyTorch(t *testing.T) {
	for _, name := range []string{"sched_step", "sched_exponential", "sched_cosine", "sched_linear"} {
		t.Run(name, func(t *testing.T) {
			c := refCaseNamed(t, name)
			tab, err := embedding.NewNamed("sched-"+name, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{LR: 0.05}})
			if err != nil {
				t.Fatal(err)
			}
			defer tab.Close()
			a, b := nn.NewLinear(1, 1, false), nn.NewLinear(1, 1, false)
			opt, err := nn.NewSGD(nn.NewSequential(a, nn.NewEmbedding(tab, nn.EmbeddingOptions{})), nn.SGDOptions{LR: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			if err := opt.AddParamGroup(nn.ParamGroup{Params: b.Parameters(), LR: 0.03}); err != nil {
				t.Fatal(err)
			}
			sc, err := nn.NewScheduler(opt, scheduleOf(t, c))
			if err != nil {
				t.Fatal(err)
			}
			for step, want := range c.Config["lrs"].([]any) {
				if step > 0 {
					if err := sc.Step(); err != nil {
						t.Fatal(err)
					}
				}
				got := []float64{opt.Groups()[0].LR, opt.Groups()[1].LR, tab.LR()}
				for i, w := range want.([]any) {
					if w := w.(float64); math.Abs(got[i]-w) > 1e-12*math.Abs(w) {
						t.Fatalf("step %d: rates %v, torch %v", step, got, want)
					}
				}
			}
			if sc.LastStep() != 12 {
				t.Errorf("LastStep %d", sc.LastStep())
			}
		})
	}
}

// A scheduler's state goes through a training checkpoint as a file of the caller's: the resumed
// schedule goes on from the saved step and bases.
func TestSchedulerResumes(t *testing.T) {
	c := newDropoutModel(t, "sched-resume")
	sc, err := nn.NewScheduler(c.opt, nn.StepLR{StepSize: 2, Gamma: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c.step(t, 1, 2, 3)
		if err := sc.Step(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := nn.SaveTrainingCheckpoint(context.Background(), dir, c.model, c.opt, embedding.SaveOptions{
		Files: map[string]func(w io.Writer) error{"scheduler": sc.SaveState}}); err != nil {
		t.Fatal(err)
	}
	run := func(sc *nn.Scheduler) []float64 {
		var lrs []float64
		for i := 0; i < 3; i++ {
			c.step(t, 1, 2, 3)
			if err := sc.Step(); err != nil {
				t.Fatal(err)
			}
			lrs = append(lrs, c.opt.LR(), c.table.LR())
		}
		return lrs
	}
	want, wantState := run(sc), c.state(t)

	fresh, err := nn.NewScheduler(c.opt, nn.StepLR{StepSize: 2, Gamma: 0.5}) // bases are now wrong
	if err != nil {
		t.Fatal(err)
	}
	if err := nn.LoadTrainingCheckpoint(context.Background(), dir, c.model, c.opt, map[string]func(io.Reader) error{"scheduler": fresh.LoadState}); err != nil {
		t.Fatal(err)
	}
	if fresh.LastStep() != 3 {
		t.Fatalf("LastStep after loading: %d", fresh.LastStep())
	}
	if got := run(fresh); !slices.Equal(got, want) || c.state(t) != wantState {
		t.Errorf("resumed rates %v, want %v", got, want)
	}
	var bad bytes.Buffer
	bad.WriteString(`{"last_epoch": 1, "base_lrs": [0.1]}`)
	if err := fresh.LoadState(&bad); !errors.Is(err, cgotorch.ErrInvalidArgument) || fresh.LastStep() != 6 {
		t.Errorf("a state of one rate for two: %v, step %d", err, fresh.LastStep())
	}
}

func TestSchedulerBadSchedules(t *testing.T) {
	for _, s := range []nn.Schedule{nil, nn.StepLR{}, nn.CosineAnnealingLR{}, nn.LinearLR{StartFactor: 0, EndFactor: 1, TotalIters: 3},
		nn.LinearLR{StartFactor: 0.5, EndFactor: 2, TotalIters: 3}, nn.ExponentialLR{Gamma: math.NaN()}} {
		if _, err := nn.NewScheduler(&nn.Optimizer{}, s); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%#v: %v", s, err)
		}
	}
}
