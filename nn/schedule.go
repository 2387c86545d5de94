package nn

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/gorec/gorec/embedding"
)

// A Schedule is a learning-rate schedule in closed form: the rate after step scheduler steps of
// a group (or table) whose rate was base when the Scheduler was made. StepLR, ExponentialLR,
// CosineAnnealingLR and LinearLR are torch.optim.lr_scheduler's, with its parameter names.
type Schedule interface {
	LR(base float64, step int64) float64
}

// StepLR multiplies the rate by Gamma every StepSize steps: base * Gamma^(step / StepSize).
type StepLR struct {
	StepSize int64
	Gamma    float64
}

// LR implements Schedule.
func (s StepLR) LR(base float64, step int64) float64 {
	return base * math.Pow(s.Gamma, float64(step/s.StepSize))
}

// ExponentialLR multiplies the rate by Gamma every step: base * Gamma^step.
type ExponentialLR struct{ Gamma float64 }

// LR implements Schedule.
func (s ExponentialLR) LR(base float64, step int64) float64 {
	return base * math.Pow(s.Gamma, float64(step))
}

// CosineAnnealingLR anneals the rate from base to EtaMin over TMax steps along a half cosine
// (and on, periodically, as torch's does): EtaMin + (base - EtaMin) * (1 + cos(pi * step / TMax)) / 2.
type CosineAnnealingLR struct {
	TMax   int64
	EtaMin float64
}

// LR implements Schedule.
func (s CosineAnnealingLR) LR(base float64, step int64) float64 {
	return s.EtaMin + (base-s.EtaMin)*(1+math.Cos(math.Pi*float64(step)/float64(s.TMax)))/2
}

// LinearLR scales the rate by a factor going linearly from StartFactor to EndFactor over
// TotalIters steps, then staying there (a warm-up, with EndFactor 1).
type LinearLR struct {
	StartFactor, EndFactor float64
	TotalIters             int64
}

// LR implements Schedule.
func (s LinearLR) LR(base float64, step int64) float64 {
	t := min(step, s.TotalIters)
	return base * (s.StartFactor + (s.EndFactor-s.StartFactor)*float64(t)/float64(s.TotalIters))
}

// checkSchedule refuses what torch refuses, and what would divide by zero.
func checkSchedule(s Schedule) error {
	var ok bool
	switch x := s.(type) {
	case StepLR:
		ok = x.StepSize > 0 && !math.IsNaN(x.Gamma)
	case ExponentialLR:
		ok = !math.IsNaN(x.Gamma)
	case CosineAnnealingLR:
		ok = x.TMax > 0 && !math.IsNaN(x.EtaMin)
	case LinearLR:
		ok = x.StartFactor > 0 && x.StartFactor <= 1 && x.EndFactor >= 0 && x.EndFactor <= 1 && x.TotalIters > 0
	default:
		ok = s != nil
	}
	if !ok {
		return invalid("scheduler: bad schedule %#v", s)
	}
	return nil
}

// Scheduler applies a Schedule to an optimizer's parameter groups and to embedding tables (whose
// rates are their own: embedding.Table.SetLR), as torch.optim.lr_scheduler applies one to its
// optimizer's param_groups: making it sets the rates of step 0, and each Step (once per epoch
// or per training step, after Optimizer.Step) those of the next step. Rates follow the closed
// form from the bases (the rates when it was made), so they do not drift with rounding; they
// are torch's within 1e-12 relative (its schedulers multiply step by step). It is not safe for
// concurrent use. A table with SGD momentum pays a pass over its rows for every rate change
// (embedding.Table.SetLR): on a large one, step its schedule per epoch, not per batch.
type Scheduler struct {
	opt    *Optimizer
	tables []*embedding.Table
	s      Schedule
	groups int       // opt's groups when the scheduler was made (groups added later are not its)
	bases  []float64 // the groups', then the tables'
	step   int64
}

// NewScheduler makes a Scheduler over opt's groups (nil: none) and the tables, from their
// present rates, and sets the rates of step 0.
func NewScheduler(opt *Optimizer, s Schedule, tables ...*embedding.Table) (*Scheduler, error) {
	if err := checkSchedule(s); err != nil {
		return nil, err
	}
	for i, t := range tables {
		if t == nil {
			return nil, invalid("scheduler: table %d is nil", i)
		}
	}
	sc := &Scheduler{opt: opt, tables: tables, s: s}
	if opt != nil {
		sc.groups = len(opt.groups)
		for _, g := range opt.groups {
			sc.bases = append(sc.bases, g.LR)
		}
	}
	for _, t := range tables {
		sc.bases = append(sc.bases, t.LR())
	}
	return sc, sc.apply()
}

// Step advances the schedule by one step and sets the rates.
func (sc *Scheduler) Step() error {
	sc.step++
	return sc.apply()
}

// LastStep is the number of Steps taken (torch's last_epoch).
func (sc *Scheduler) LastStep() int64 { return sc.step }

// LRs are the rates the schedule gives now: the groups', then the tables'.
func (sc *Scheduler) LRs() []float64 {
	out := make([]float64, len(sc.bases))
	for i, b := range sc.bases {
		out[i] = sc.s.LR(b, sc.step)
	}
	return out
}

func (sc *Scheduler) apply() error {
	lrs := sc.LRs()
	for i := 0; i < sc.groups; i++ {
		sc.opt.groups[i].LR = lrs[i]
	}
	var errs []error
	for i, t := range sc.tables {
		errs = append(errs, t.SetLR(lrs[sc.groups+i]))
	}
	return errors.Join(errs...)
}

type schedulerState struct {
	Step  int64     `json:"last_epoch"`
	Bases []float64 `json:"base_lrs"`
}

// SaveState writes the scheduler's state (its step and bases, as JSON under torch's names
// last_epoch and base_lrs), for a training checkpoint: pass it as a file of the caller's to
// SaveTrainingCheckpoint, and LoadState to LoadTrainingCheckpoint (the optimizer's and the
// tables' rates come back with their own states).
func (sc *Scheduler) SaveState(w io.Writer) error {
	return json.NewEncoder(w).Encode(schedulerState{sc.step, sc.bases})
}

// LoadState reads a state of SaveState: the step and bases, for as many groups and tables as
// this scheduler has (else an error wrapping cgotorch.ErrInvalidArgument, and nothing changes).
// It sets no rate (torch's load_state_dict neither): the next Step does.
func (sc *Scheduler) LoadState(r io.Reader) error {
	var st schedulerState
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return fmt.Errorf("%w: scheduler state: %w", ErrFormat, err)
	}
	if len(st.Bases) != len(sc.bases) || st.Step < 0 {
		return invalid("scheduler state: step %d and %d rates, for %d groups and tables", st.Step, len(st.Bases), len(sc.bases))
	}
	sc.step, sc.bases = st.Step, st.Bases
	return nil
}
