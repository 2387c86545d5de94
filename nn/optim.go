package nn

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gorec/gorec/cgotorch"
)

// ParamGroup is a set of parameters sharing a learning rate and a weight decay, as in PyTorch's
// param_groups. Change LR between steps (a schedule) directly or with Optimizer.SetLR. In
// AddParamGroup, a zero LR or WeightDecay means the optimizer's (those it was made with), as a
// torch param group without them takes the optimizer's defaults; Zero() asks for 0.
type ParamGroup struct {
	Params      []NamedParameter
	LR          float64
	WeightDecay float64
}

// Trainable is what an optimizer trains: its Parameters (the first parameter group) and, when
// it is a SparseModule, its Steppers (the hash embedding tables). Every Module is Trainable:
// pass the whole model. ParamList makes one of a bare list of parameters.
type Trainable interface {
	Parameters() []NamedParameter
}

// ParamList is a Trainable of dense parameters only, for an optimizer over a part of a model or
// over tensors of one's own. It has no tables: an optimizer made from
// ParamList(model.Parameters()) leaves the model's tables untrained, and their Forward panics
// once they pile up MaxLookupsWithoutStep lookups (see Embedding).
type ParamList []NamedParameter

// Parameters returns the list.
func (l ParamList) Parameters() []NamedParameter { return l }

// Optimizer updates parameter groups in place by one rule (SGD, Adam, AdamW, Adagrad), computed
// exactly as torch.optim of PyTorch 1.13 computes it (the single-tensor, non-foreach path), and
// then steps the Steppers of the model it was made from (the hash embedding tables, each with
// its own sparse rule). It is not safe for concurrent use.
//
// The per-parameter state (momentum buffers, moment estimates, accumulators) is allocated when
// the parameters are added, not at the first step, so a training loop may run every step in
// cgotorch.WithScope as long as the optimizer was created outside it.
type Optimizer struct {
	name     string
	lr, wd   float64 // the rates it was made with: the defaults of AddParamGroup
	rule     rule
	groups   []*ParamGroup
	state    map[*Tensor]*slot
	steppers []Stepper
	syncer   GradientSyncer // the model's, when it is one
}

// GradientSyncer is a Trainable whose dense gradients are combined with other processes'
// before every update: dist.DataParallel, which averages them over the ranks of a process
// group. An optimizer made from one calls SyncGradients at the start of Step, before it updates
// anything (an error fails the step, which then changes nothing), and ResetGradientSync once
// the step has used the gradients and in ZeroGrad: SyncGradients does its work once between
// two resets, so a caller who needs the combined gradients before Step (to clip them) calls it
// first and Step does not combine them again.
type GradientSyncer interface {
	Trainable
	SyncGradients() error
	ResetGradientSync()
}

// slot is the state of one parameter.
type slot struct {
	step    int64   // steps taken (with a gradient)
	a, b, c *Tensor // the rule's state tensors (cgotorch.OptimizerKind lists them)
}

type rule interface {
	newSlot(p *Tensor) *slot
	// options are the rule's hyperparameters for cgotorch.OptimizerStep, which computes the
	// update in one call with torch.optim's operations.
	options(lr, wd float64) cgotorch.OptimizerOptions
	// stateNames name the slot's a, b and c tensors in a saved state, as torch.optim names
	// them ("" where the rule has none).
	stateNames() [3]string
	// hyper is the rule's options but LR and WeightDecay (the groups' own) under torch.optim's
	// names, for SaveState.
	hyper() map[string]any
}

func zerosLike(p *Tensor, value float64) *Tensor {
	return cgotorch.Full(p.Shape(), value, cgotorch.WithDType(p.DType()), cgotorch.WithDevice(p.Device()))
}

func newOptimizer(name string, r rule, m Trainable, lr, wd float64) (*Optimizer, error) {
	if m == nil {
		return nil, invalid("%s: nil model", name)
	}
	o := &Optimizer{name: name, rule: r, state: map[*Tensor]*slot{}, lr: lr, wd: wd}
	o.syncer, _ = m.(GradientSyncer)
	if err := o.AddParamGroup(ParamGroup{Params: m.Parameters(), LR: lr, WeightDecay: wd}); err != nil {
		return nil, err
	}
	seen := map[Stepper]bool{}
	for _, s := range Steppers(m) {
		if !seen[s] { // a module listed twice (shared under two names) steps once
			seen[s] = true
			o.steppers = append(o.steppers, s)
		}
	}
	return o, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", cgotorch.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// AddParamGroup adds a group of parameters (with its own LR and WeightDecay, zero meaning the
// optimizer's) and allocates their state. A parameter may belong to one group only; a tensor listed more than once in g (a module
// shared under two names) is kept once, under its first name, and stepped once per step, as in
// torch's parameters().
func (o *Optimizer) AddParamGroup(g ParamGroup) error {
	g.LR, g.WeightDecay = orDefault(g.LR, o.lr), orDefault(g.WeightDecay, o.wd)
	if !(g.LR >= 0) || !(g.WeightDecay >= 0) {
		return invalid("%s: learning rate %v and weight decay %v must be >= 0", o.name, g.LR, g.WeightDecay)
	}
	seen := map[*Tensor]bool{}
	var params []NamedParameter
	for _, p := range g.Params {
		if p.Tensor == nil || p.Tensor.Closed() {
			return invalid("%s: parameter %q is nil or closed", o.name, p.Name)
		}
		if o.state[p.Tensor] != nil {
			return invalid("%s: parameter %q appears in more than one group", o.name, p.Name)
		}
		if s := claimant(p.Tensor); s != nil && s != o.syncer {
			return invalid("%s: parameter %q is synchronized by a %T: make the optimizer from it, not from the model", o.name, p.Name, s)
		}
		if !p.Tensor.DType().IsFloat() {
			return invalid("%s: parameter %q is %v, not a float tensor", o.name, p.Name, p.Tensor.DType())
		}
		if !seen[p.Tensor] {
			seen[p.Tensor] = true
			params = append(params, p)
		}
	}
	for _, p := range params {
		o.state[p.Tensor] = o.rule.newSlot(p.Tensor)
	}
	g.Params = params
	o.groups = append(o.groups, &g)
	return nil
}

// Groups returns the parameter groups; changing a group's LR or WeightDecay takes effect at the
// next step.
func (o *Optimizer) Groups() []*ParamGroup { return o.groups }

// SetLR sets the learning rate of every parameter group and of every Stepper (the tables). A
// negative or NaN rate is an error wrapping cgotorch.ErrInvalidArgument, and changes nothing;
// the Steppers' own errors are joined.
func (o *Optimizer) SetLR(lr float64) error {
	if !(lr >= 0) || math.IsInf(lr, 0) {
		return invalid("%s: learning rate %v must be finite and >= 0", o.name, lr)
	}
	for _, g := range o.groups {
		g.LR = lr
	}
	var errs []error
	for _, s := range o.steppers {
		errs = append(errs, s.SetLR(lr))
	}
	return errors.Join(errs...)
}

// Steppers returns the Steppers the optimizer steps (the tables of the model it was made from).
func (o *Optimizer) Steppers() []Stepper { return append([]Stepper(nil), o.steppers...) }

// LR returns the learning rate of the first group.
func (o *Optimizer) LR() float64 {
	if len(o.groups) == 0 {
		return 0
	}
	return o.groups[0].LR
}

// Step updates every parameter that has a gradient (parameters without one are skipped, as in
// PyTorch), with gradient recording off, then calls Step of each Stepper (one StepTables for
// the JointTables of a StepGroup: see JointTable). A failing tensor operation (a closed
// parameter, say) is returned as an error, as are the Steppers' errors. When the model is a
// GradientSyncer, its gradients are synchronized first; if that fails, Step returns the error
// and updates nothing.
func (o *Optimizer) Step() error {
	if o.syncer != nil {
		if err := o.syncer.SyncGradients(); err != nil {
			return fmt.Errorf("nn: %s step: %w", o.name, err)
		}
		defer o.syncer.ResetGradientSync()
	}
	if err := o.stepOwn(); err != nil {
		return err
	}
	return o.stepSteppers()
}

// stepSteppers calls Step of each Stepper, in order, but StepTables once for the JointTables
// of a StepGroup (each table once), at the place of the group's first Stepper.
func (o *Optimizer) stepSteppers() error {
	var groups map[any][]EmbeddingTable // by StepGroup, made at the first JointTable
	for _, s := range o.steppers {
		if j, ts := jointTables(s); j != nil {
			if groups == nil {
				groups = map[any][]EmbeddingTable{}
			}
			g := groups[j.StepGroup()]
			for _, t := range ts {
				if !slices.Contains(g, t) {
					g = append(g, t)
				}
			}
			groups[j.StepGroup()] = g
		}
	}
	var errs []error
	for _, s := range o.steppers {
		step := s.Step
		if j, _ := jointTables(s); j != nil {
			g, first := groups[j.StepGroup()]
			if !first { // stepped with its group already
				continue
			}
			delete(groups, j.StepGroup())
			step = func() error { return j.StepTables(g) }
		}
		if err := step(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// jointTables returns the tables of an Embedding, EmbeddingBag or collection, and the first one,
// when they are JointTables (a collection's are all of one StepGroup).
func jointTables(s Stepper) (JointTable, []EmbeddingTable) {
	if c := collectionOf(s); c != nil {
		if c.joint == nil {
			return nil, nil
		}
		return c.joint, c.tables
	}
	if j, ok := lookupTable(s).(JointTable); ok {
		return j, []EmbeddingTable{j}
	}
	return nil, nil
}

// stepOwn updates the parameter groups (not the Steppers) from the parameters' own gradients,
// in one call per group (cgotorch.OptimizerStepParams) instead of three per parameter (a
// gradient handle, its step, its Close).
func (o *Optimizer) stepOwn() error {
	err := cgotorch.Try(func() {
		for _, g := range o.groups {
			ps := make([]cgotorch.OptimizerParam, len(g.Params))
			for i, p := range g.Params {
				s := o.state[p.Tensor]
				ps[i] = cgotorch.OptimizerParam{Param: p.Tensor, States: [3]*Tensor{s.a, s.b, s.c}, Step: s.step + 1}
			}
			stepped := make([]bool, len(ps))
			cgotorch.OptimizerStepParams(o.rule.options(g.LR, g.WeightDecay), ps, stepped)
			for i, p := range g.Params {
				if stepped[i] {
					o.state[p.Tensor].step++
				}
			}
		}
	})
	if err != nil {
		return fmt.Errorf("nn: %s step: %w", o.name, err)
	}
	return nil
}

// ZeroGrad zeroes the gradients of every parameter (in place, as PyTorch 1.13's default
// zero_grad(set_to_none=False)) and calls ZeroGrad of each Stepper (and ResetGradientSync of a
// GradientSyncer model).
func (o *Optimizer) ZeroGrad() {
	if o.syncer != nil {
		o.syncer.ResetGradientSync()
	}
	for _, g := range o.groups {
		ZeroGradParams(g.Params)
	}
	for _, s := range o.steppers {
		s.ZeroGrad()
	}
}

// SGDOptions are the hyperparameters of torch.optim.SGD. A zero field means the default: LR
// 0.01 (embedding.SGD's: torch has none), 0 for the others; Zero() asks for an LR of 0.
type SGDOptions struct {
	LR          float64
	Momentum    float64
	Dampening   float64
	WeightDecay float64
	Nesterov    bool
}

type sgdRule struct{ SGDOptions }

// NewSGD returns stochastic gradient descent with optional momentum, dampening, Nesterov
// momentum and (L2) weight decay over m (a whole model: its parameters and its tables):
//
//	d = grad + weight_decay * p
//	buf = d (first step) or momentum * buf + (1 - dampening) * d
//	d = d + momentum * buf (Nesterov) or buf
//	p -= lr * d
//
// It returns an error wrapping cgotorch.ErrInvalidArgument for negative values, or Nesterov
// without momentum or with dampening.
func NewSGD(m Trainable, o SGDOptions) (*Optimizer, error) {
	o = o.resolved()
	if !(o.Momentum >= 0) || !(o.Dampening >= 0) {
		return nil, invalid("SGD: momentum %v and dampening %v must be >= 0", o.Momentum, o.Dampening)
	}
	if o.Nesterov && (o.Momentum <= 0 || o.Dampening != 0) {
		return nil, invalid("SGD: Nesterov momentum requires a momentum and zero dampening")
	}
	return newOptimizer("SGD", sgdRule{o}, m, o.LR, o.WeightDecay)
}

func (r sgdRule) newSlot(p *Tensor) *slot {
	s := &slot{}
	if r.Momentum != 0 {
		s.a = zerosLike(p, 0)
	}
	return s
}

func (sgdRule) stateNames() [3]string { return [3]string{"momentum_buffer"} }

func (r sgdRule) hyper() map[string]any {
	return map[string]any{"momentum": r.Momentum, "dampening": r.Dampening, "nesterov": r.Nesterov}
}

func (r sgdRule) options(lr, wd float64) cgotorch.OptimizerOptions {
	return cgotorch.OptimizerOptions{Kind: cgotorch.OptimSGD, LR: lr, WeightDecay: wd,
		Momentum: r.Momentum, Dampening: r.Dampening, Nesterov: r.Nesterov}
}

// AdamOptions are the hyperparameters of torch.optim.Adam and AdamW. A zero field means
// PyTorch's default: LR 1e-3, Beta1 0.9, Beta2 0.999, Eps 1e-8, no weight decay (for AdamW too,
// as embedding.AdamW: DefaultAdamWOptions has torch's 1e-2). Zero() asks for 0 (an Eps of 0, a
// Beta1 of 0: RMSprop-like).
type AdamOptions struct {
	LR          float64
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64
	AMSGrad     bool
}

// DefaultAdamOptions are PyTorch's defaults for Adam: LR 1e-3, betas (0.9, 0.999), Eps 1e-8,
// no weight decay.
func DefaultAdamOptions() AdamOptions {
	return AdamOptions{LR: defaultAdamLR, Beta1: defaultAdamBeta1, Beta2: defaultAdamBeta2, Eps: defaultAdamEps}
}

// DefaultAdamWOptions are PyTorch's defaults for AdamW: Adam's, with WeightDecay 1e-2.
func DefaultAdamWOptions() AdamOptions {
	o := DefaultAdamOptions()
	o.WeightDecay = 1e-2
	return o
}

type adamRule struct {
	AdamOptions
	decoupled bool // AdamW
}

// NewAdam returns Adam (with L2 weight decay added to the gradient, and optionally AMSGrad):
//
//	g = grad + weight_decay * p
//	m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g²
//	p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// with v replaced by its running maximum under AMSGrad. It returns an error wrapping
// cgotorch.ErrInvalidArgument for betas outside [0, 1) or negative values.
func NewAdam(m Trainable, o AdamOptions) (*Optimizer, error) {
	return newAdam("Adam", m, o, false)
}

// NewAdamW returns AdamW: Adam with decoupled weight decay, p *= 1 - lr * weight_decay before
// the Adam update (which then sees the plain gradient).
func NewAdamW(m Trainable, o AdamOptions) (*Optimizer, error) {
	return newAdam("AdamW", m, o, true)
}

func newAdam(name string, m Trainable, o AdamOptions, decoupled bool) (*Optimizer, error) {
	o = o.resolved()
	if !(o.Beta1 >= 0 && o.Beta1 < 1) || !(o.Beta2 >= 0 && o.Beta2 < 1) || !(o.Eps >= 0) {
		return nil, invalid("%s: betas (%v, %v) must be in [0, 1) and eps %v >= 0", name, o.Beta1, o.Beta2, o.Eps)
	}
	return newOptimizer(name, adamRule{o, decoupled}, m, o.LR, o.WeightDecay)
}

func (r adamRule) newSlot(p *Tensor) *slot {
	s := &slot{a: zerosLike(p, 0), b: zerosLike(p, 0)}
	if r.AMSGrad {
		s.c = zerosLike(p, 0)
	}
	return s
}

func (adamRule) stateNames() [3]string { return [3]string{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"} }

func (r adamRule) hyper() map[string]any {
	return map[string]any{"betas": []float64{r.Beta1, r.Beta2}, "eps": r.Eps, "amsgrad": r.AMSGrad}
}

func (r adamRule) options(lr, wd float64) cgotorch.OptimizerOptions {
	kind := cgotorch.OptimAdam
	if r.decoupled {
		kind = cgotorch.OptimAdamW
	}
	return cgotorch.OptimizerOptions{Kind: kind, LR: lr, WeightDecay: wd,
		Beta1: r.Beta1, Beta2: r.Beta2, Eps: r.Eps, AMSGrad: r.AMSGrad}
}

// AdagradOptions are the hyperparameters of torch.optim.Adagrad. A zero field means PyTorch's
// default: LR 1e-2, Eps 1e-10, 0 for the others; Zero() asks for 0.
type AdagradOptions struct {
	LR                      float64
	LRDecay                 float64
	WeightDecay             float64
	InitialAccumulatorValue float64
	Eps                     float64
}

// DefaultAdagradOptions are PyTorch's defaults for Adagrad: LR 1e-2, Eps 1e-10, the rest 0.
func DefaultAdagradOptions() AdagradOptions {
	return AdagradOptions{LR: defaultAdagradLR, Eps: defaultAdagradEps}
}

type adagradRule struct{ AdagradOptions }

// NewAdagrad returns Adagrad:
//
//	g = grad + weight_decay * p
//	sum += g²  (sum starts at InitialAccumulatorValue)
//	p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)
//
// It returns an error wrapping cgotorch.ErrInvalidArgument for negative values.
func NewAdagrad(m Trainable, o AdagradOptions) (*Optimizer, error) {
	o = o.resolved()
	if !(o.LRDecay >= 0) || !(o.InitialAccumulatorValue >= 0) || !(o.Eps >= 0) {
		return nil, invalid("Adagrad: lr decay %v, initial accumulator value %v and eps %v must be >= 0",
			o.LRDecay, o.InitialAccumulatorValue, o.Eps)
	}
	return newOptimizer("Adagrad", adagradRule{o}, m, o.LR, o.WeightDecay)
}

func (r adagradRule) newSlot(p *Tensor) *slot {
	return &slot{a: zerosLike(p, r.InitialAccumulatorValue)}
}

func (adagradRule) stateNames() [3]string { return [3]string{"sum"} }

func (r adagradRule) hyper() map[string]any {
	return map[string]any{"lr_decay": r.LRDecay, "eps": r.Eps, "initial_accumulator_value": r.InitialAccumulatorValue}
}

func (r adagradRule) options(lr, wd float64) cgotorch.OptimizerOptions {
	return cgotorch.OptimizerOptions{Kind: cgotorch.OptimAdagrad, LR: lr, WeightDecay: wd, LRDecay: r.LRDecay, Eps: r.Eps}
}
