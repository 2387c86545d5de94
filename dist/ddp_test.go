package dist

// DataParallel's multi-process tests: the scenarios run as ranks (ranks_test.go), each rank
// training on its slice of the same global batches.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

func init() {
	scenarios["ddp-train"] = scenarioDDPTrain
	scenarios["ddp-killed"] = scenarioDDPKilled
	scenarios["ddp-buffers"] = scenarioDDPBuffers
	scenarios["ddp-unused"] = scenarioDDPUnused
	scenarios["ddp-mismatch"] = scenarioDDPMismatch
	scenarios["ddp-once"] = scenarioDDPOnce
}

const (
	ddpSeed  = 7  // rank 0's model seed; rank r seeds ddpSeed+r
	ddpBatch = 24 // the global batch: slices of 12 or 8 rows on 2 or 3 ranks
	ddpSteps = 20
	// ddpTol bounds |w_ddp - w_single| after 20 steps: the averaged gradient equals the
	// global batch's up to float32 reassociation (sums over slices, then across ranks).
	// Measured: at most 6e-8 with Adam and SGD on 2 and 3 ranks (weights of magnitude ~0.5);
	// a sum instead of the average is off by ~0.2.
	ddpTol = 1e-6
)

// env is the rank's setting of a test.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Training on 2 and 3 ranks ends with the same weights on every rank, equal to one process's
// on the whole batch; ranks seeded differently start from rank 0's weights; a tiny bucket cap
// gives several buckets.
func TestDataParallelEquivalence(t *testing.T) {
	for _, c := range []struct {
		world  int
		optim  string
		bucket string
	}{{2, "adam", "0"}, {3, "adam", "0"}, {2, "sgd", "0"}, {3, "sgd", "256"}, {2, "adam", "256"}} {
		t.Run(fmt.Sprintf("%d/%s/bucket%s", c.world, c.optim, c.bucket), func(t *testing.T) {
			res := launch(t, "ddp-train", c.world, store(t, "file"), 30*time.Second, func(int) []string {
				return []string{"GOREC_DDP_OPTIM=" + c.optim, "GOREC_DDP_BUCKET=" + c.bucket}
			})
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

// The equivalence check catches a sum instead of an average, and a training loop whose
// optimizer skips the synchronization (made from the model before the DataParallel).
func TestDataParallelCatchesBrokenSync(t *testing.T) {
	for _, variant := range []string{"sum", "nosync"} {
		for _, optim := range []string{"adam", "sgd"} {
			t.Run(variant+"/"+optim, func(t *testing.T) {
				res := launch(t, "ddp-train", 2, store(t, "file"), 30*time.Second, func(int) []string {
					return []string{"GOREC_DDP_VARIANT=" + variant, "GOREC_DDP_OPTIM=" + optim}
				})
				requirePassed(t, res)
				t.Log(res[0].output)
			})
		}
	}
}

// A rank killed mid-training: the others' Step returns an error within the timeout and
// changes no weight.
func TestDataParallelKilledRank(t *testing.T) {
	res := launch(t, "ddp-killed", 3, store(t, "tcp"), 5*time.Second, nil)
	for _, r := range res {
		if r.rank == 2 {
			if !killedBySignal(r.err, syscall.SIGKILL) {
				t.Errorf("rank 2 was not killed: %v\n%s", r.err, r.output)
			}
			continue
		}
		requirePassed(t, []rankResult{r})
	}
	t.Log(res[0].output)
}

// BatchNorm1d's running statistics are rank 0's on every rank after each step, and stay
// each rank's own with LocalBuffers.
func TestDataParallelBuffers(t *testing.T) {
	requirePassed(t, launch(t, "ddp-buffers", 3, store(t, "file"), 30*time.Second, nil))
}

// A parameter with a gradient on some ranks only gets the average (zeros elsewhere) on every
// rank; one with a gradient on none keeps none.
func TestDataParallelUnusedParameters(t *testing.T) {
	requirePassed(t, launch(t, "ddp-unused", 3, store(t, "file"), 30*time.Second, nil))
}

// SyncGradients runs once between two resets: a caller's sync before Step (to clip) is not
// repeated by Step, and ZeroGrad or Step make the next one sync again.
func TestDataParallelSyncsOncePerStep(t *testing.T) {
	requirePassed(t, launch(t, "ddp-once", 2, store(t, "file"), 30*time.Second, nil))
}

// Ranks whose models differ get ErrMismatch at NewDataParallel, on every rank.
func TestDataParallelMismatch(t *testing.T) {
	res := launch(t, "ddp-mismatch", 2, store(t, "file"), 30*time.Second, nil)
	requirePassed(t, res)
	t.Log(res[0].output)
}

// mlp is the dense test model, initialised from seed.
func mlp(seed uint64, hidden int) *nn.Sequential {
	cgotorch.ManualSeed(seed)
	return nn.NewSequential(nn.NewLinear(8, hidden, true), &nn.ReLU{}, nn.NewLinear(hidden, hidden, true),
		&nn.ReLU{}, nn.NewLinear(hidden, 1, true))
}

// batch is global batch step: [ddpBatch, 8] inputs and [ddpBatch, 1] targets, the same on
// every rank.
func batch(step int) (x, y *cgotorch.Tensor) {
	cgotorch.ManualSeed(uint64(1000 + step))
	x = cgotorch.Randn([]int64{ddpBatch, 8})
	y = x.SumDim([]int64{1}, true).Tanh().Add(cgotorch.Randn([]int64{ddpBatch, 1}).MulScalar(0.1))
	return x, y
}

// slice is rank's rows of t.
func slice(t *cgotorch.Tensor, rank, world int) *cgotorch.Tensor {
	n := t.Size(0) / int64(world)
	return t.Narrow(0, int64(rank)*n, n)
}

// newOptim makes the test's optimizer ("adam": with L2 weight decay, so that the gradients'
// scale matters; "sgd": with momentum).
func newOptim(kind string, m nn.Trainable) (*nn.Optimizer, error) {
	if kind == "sgd" {
		return nn.NewSGD(m, nn.SGDOptions{LR: 0.05, Momentum: 0.9})
	}
	return nn.NewAdam(m, nn.AdamOptions{LR: 0.01, WeightDecay: 0.1})
}

// trainStep is one step of the training loop on x, y.
func trainStep(m nn.Layer, opt *nn.Optimizer, x, y *cgotorch.Tensor) error {
	return cgotorch.TryWithScope(func() error {
		opt.ZeroGrad()
		nn.MSE(nn.ReduceMean)(m.Forward(x), y).Backward()
		return opt.Step()
	})
}

// float64s are t's values as float64s.
func float64s(t *cgotorch.Tensor) []float64 {
	d, err := t.Detach().To(cgotorch.CPU, cgotorch.Float64)
	if err != nil {
		panic(err)
	}
	v, err := cgotorch.ToSlice[float64](d.Contiguous())
	if err != nil {
		panic(err)
	}
	return v
}

// flat is the concatenation of ps's values, as float64s.
func flat(ps []nn.NamedParameter) []float64 {
	var out []float64
	for _, p := range ps {
		out = append(out, float64s(p.Tensor)...)
	}
	return out
}

// errNotEquivalent: the equivalence check failed.
var errNotEquivalent = errors.New("not equivalent")

// maxDiff is max |a - b|.
func maxDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// sameOnEveryRank fails unless every rank's v is this rank's, bit for bit.
func sameOnEveryRank(g *Group, what string, v []float64) error {
	mine, err := cgotorch.FromSlice(v, 1, int64(len(v)))
	if err != nil {
		return err
	}
	all, err := g.AllGather(mine)
	if err != nil {
		return err
	}
	got := float64s(all)
	for r := 0; r < g.WorldSize(); r++ {
		if d := maxDiff(got[r*len(v):(r+1)*len(v)], v); d != 0 {
			return fmt.Errorf("%w: %s: rank %d's differ from rank %d's by up to %g", errNotEquivalent, what, r, g.Rank(), d)
		}
	}
	return nil
}

// checkTrained is the equivalence check: the ranks' weights are equal, and within ddpTol of
// the single-process run's.
func checkTrained(g *Group, model, single nn.Module) error {
	w := flat(model.Parameters())
	if err := sameOnEveryRank(g, "the weights", w); err != nil {
		return err
	}
	d := maxDiff(w, flat(single.Parameters()))
	fmt.Printf("rank %d: max |w_ddp - w_single| = %.3g\n", g.Rank(), d)
	if d > ddpTol {
		return fmt.Errorf("%w: the weights differ from the single-process run's by %g > %g", errNotEquivalent, d, ddpTol)
	}
	return nil
}

// scenarioDDPTrain trains mlp for ddpSteps on slices of the global batches, with the
// optimizer $GOREC_DDP_OPTIM and bucket cap $GOREC_DDP_BUCKET, and checks the weights against
// one process's run on the whole batches. Variants ($GOREC_DDP_VARIANT): "avg", the
// DataParallel; "sum", the gradients summed instead of averaged; "nosync", the optimizer made
// from the model (before NewDataParallel, which would make it refuse them after): the broken
// variants must fail the check.
func scenarioDDPTrain(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	r, w := g.Rank(), g.WorldSize()
	variant, kind := env("GOREC_DDP_VARIANT", "avg"), env("GOREC_DDP_OPTIM", "adam")
	capBytes, err := strconv.ParseInt(env("GOREC_DDP_BUCKET", "0"), 10, 64)
	if err != nil {
		return err
	}
	model, single := mlp(ddpSeed+uint64(r), 16), mlp(ddpSeed, 16)
	if r != 0 && maxDiff(flat(model.Parameters()), flat(single.Parameters())) == 0 {
		return fmt.Errorf("rank %d's model starts as rank 0's: the test shows nothing", r)
	}
	var opt *nn.Optimizer
	if variant == "nosync" { // made before the DataParallel claims the parameters
		if opt, err = newOptim(kind, model); err != nil {
			return err
		}
	}
	ddp, err := NewDataParallel(g, model, DataParallelOptions{BucketBytes: capBytes})
	if err != nil {
		return err
	}
	if d := maxDiff(flat(model.Parameters()), flat(single.Parameters())); d != 0 {
		return fmt.Errorf("after NewDataParallel the weights differ from rank 0's initial ones by %g", d)
	}
	if capBytes > 0 && len(ddp.grads) < 3 {
		return fmt.Errorf("bucket cap %d: %d buckets, want several", capBytes, len(ddp.grads))
	}
	ddp.sum = variant == "sum"
	if opt == nil {
		if opt, err = newOptim(kind, ddp); err != nil {
			return err
		}
	}
	sopt, err := newOptim(kind, single)
	if err != nil {
		return err
	}
	for step := range ddpSteps {
		x, y := batch(step)
		if err := trainStep(model, opt, slice(x, r, w), slice(y, r, w)); err != nil {
			return err
		}
		if err := trainStep(single, sopt, x, y); err != nil {
			return err
		}
	}
	err = checkTrained(g, model, single)
	if variant == "avg" {
		return err
	}
	if !errors.Is(err, errNotEquivalent) {
		return fmt.Errorf("variant %q: got %v, want the equivalence check to fail", variant, err)
	}
	fmt.Printf("rank %d: variant %q fails the check as it must: %v\n", r, variant, err)
	return nil
}

// scenarioDDPKilled: the last rank kills itself before its 6th step; the others' Step
// returns ErrPeer or ErrTimeout within the timeout, and leaves the weights as they were.
func scenarioDDPKilled(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	r, w := g.Rank(), g.WorldSize()
	model := mlp(ddpSeed, 16)
	ddp, err := NewDataParallel(g, model, DataParallelOptions{})
	if err != nil {
		return err
	}
	opt, err := newOptim("adam", ddp)
	if err != nil {
		return err
	}
	for step := range ddpSteps {
		if step == 5 && r == w-1 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		x, y := batch(step)
		before := flat(model.Parameters())
		start := time.Now()
		err := trainStep(model, opt, slice(x, r, w), slice(y, r, w))
		if err == nil {
			continue
		}
		if step != 5 {
			return fmt.Errorf("step %d: %w", step, err)
		}
		kind := ErrPeer
		if errors.Is(err, ErrTimeout) {
			kind = ErrTimeout
		}
		if d := maxDiff(before, flat(model.Parameters())); d != 0 {
			return fmt.Errorf("the failed step changed the weights by %g", d)
		}
		return failsWithin("a step with a killed rank", err, kind, start, o)
	}
	return fmt.Errorf("no step failed")
}

// scenarioDDPBuffers trains Linear, BatchNorm1d, Linear for 5 steps: with the default options
// every rank's running statistics are rank 0's after each step (and have moved); with
// LocalBuffers they differ across ranks.
func scenarioDDPBuffers(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	r, w := g.Rank(), g.WorldSize()
	for _, local := range []bool{false, true} {
		cgotorch.ManualSeed(ddpSeed + uint64(r))
		model := nn.NewSequential(nn.NewLinear(8, 6, true), nn.NewBatchNorm1d(6), nn.NewLinear(6, 1, true))
		initial := flat(nn.Buffers(model))
		ddp, err := NewDataParallel(g, model, DataParallelOptions{LocalBuffers: local})
		if err != nil {
			return err
		}
		opt, err := newOptim("adam", ddp)
		if err != nil {
			return err
		}
		for step := range 5 {
			x, y := batch(step)
			if err := trainStep(model, opt, slice(x, r, w), slice(y, r, w)); err != nil {
				return err
			}
			buffers := flat(nn.Buffers(model))
			if maxDiff(buffers, initial) == 0 {
				return fmt.Errorf("the running statistics did not move")
			}
			err = sameOnEveryRank(g, "the buffers", buffers)
			switch {
			case !local && err != nil:
				return err
			case local && err == nil:
				return fmt.Errorf("with LocalBuffers the buffers are equal on every rank")
			}
			if err := sameOnEveryRank(g, "the weights", flat(model.Parameters())); err != nil {
				return err
			}
		}
	}
	return nil
}

// heads is a model whose second head only rank 0 uses and whose third head no rank uses.
type heads struct {
	nn.Container
	trunk, a, b, c *nn.Linear
}

func newHeads() *heads {
	cgotorch.ManualSeed(ddpSeed)
	h := &heads{trunk: nn.NewLinear(8, 4, true), a: nn.NewLinear(4, 1, true), b: nn.NewLinear(4, 1, true), c: nn.NewLinear(4, 1, true)}
	for _, ch := range []struct {
		name string
		m    *nn.Linear
	}{{"trunk", h.trunk}, {"a", h.a}, {"b", h.b}, {"c", h.c}} {
		h.Add(ch.name, ch.m)
	}
	return h
}

// scenarioDDPUnused: head b has a gradient on rank 0 only, head c on no rank. After
// SyncGradients b's gradient is rank 0's divided by the world size on every rank, c has none
// on any rank, and after the step the weights are equal everywhere and c's unchanged.
func scenarioDDPUnused(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	r, w := g.Rank(), g.WorldSize()
	h := newHeads()
	ddp, err := NewDataParallel(g, h, DataParallelOptions{BucketBytes: 32})
	if err != nil {
		return err
	}
	opt, err := newOptim("sgd", ddp)
	if err != nil {
		return err
	}
	c := flat(h.c.Parameters())
	x, y := batch(0)
	x, y = slice(x, r, w), slice(y, r, w)
	z := h.trunk.Forward(x)
	out := h.a.Forward(z)
	if r == 0 {
		out = out.Add(h.b.Forward(z))
	}
	nn.MSE(nn.ReduceMean)(out, y).Backward()
	var local []float64
	if r == 0 {
		local = flat([]nn.NamedParameter{{Tensor: h.b.Weight.Grad()}})
	}
	if err := ddp.SyncGradients(); err != nil {
		return err
	}
	if h.c.Weight.Grad() != nil || h.c.Bias.Grad() != nil {
		return fmt.Errorf("head c, unused on every rank, has a gradient after the sync")
	}
	gb := flat([]nn.NamedParameter{{Tensor: h.b.Weight.Grad()}})
	if err := sameOnEveryRank(g, "head b's gradient", gb); err != nil {
		return err
	}
	if r == 0 {
		for i := range local {
			local[i] /= float64(w)
		}
		if d := maxDiff(gb, local); d > 1e-7 {
			return fmt.Errorf("head b's gradient is not rank 0's / %d: off by %g", w, d)
		}
	}
	if err := opt.Step(); err != nil {
		return err
	}
	if err := sameOnEveryRank(g, "the weights", flat(h.Parameters())); err != nil {
		return err
	}
	if maxDiff(c, flat(h.c.Parameters())) != 0 {
		return fmt.Errorf("head c changed without a gradient")
	}
	return nil
}

// scenarioDDPMismatch: the last rank's model has another hidden size, then the last rank
// alone sums the gradients: NewDataParallel fails with ErrMismatch on every rank. Then the
// last rank asks for a negative bucket size: it gets ErrConfig, and the others ErrMismatch at
// once, not after the group's timeout.
func scenarioDDPMismatch(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	last := g.Rank() == g.WorldSize()-1
	hidden := 16
	if last {
		hidden = 17
	}
	_, err = NewDataParallel(g, mlp(ddpSeed, hidden), DataParallelOptions{})
	if !errors.Is(err, ErrMismatch) {
		return fmt.Errorf("got %v, want %v", err, ErrMismatch)
	}
	fmt.Printf("rank %d: %v\n", g.Rank(), err)
	_, err = NewDataParallel(g, mlp(ddpSeed, 16), DataParallelOptions{SumGradients: last})
	if !errors.Is(err, ErrMismatch) {
		return fmt.Errorf("SumGradients on one rank: got %v, want %v", err, ErrMismatch)
	}
	opts, want := DataParallelOptions{}, ErrMismatch
	if last {
		opts.BucketBytes, want = -1, ErrConfig
	}
	start := time.Now()
	_, err = NewDataParallel(g, mlp(ddpSeed, 16), opts)
	if !errors.Is(err, want) || time.Since(start) > o.Timeout/2 {
		return fmt.Errorf("one rank's bad options: got %v after %v, want %v at once", err, time.Since(start), want)
	}
	fmt.Printf("rank %d: %v\n", g.Rank(), err)
	return nil
}

// scenarioDDPOnce: after SyncGradients each rank scales its gradients by its rank + 1: a
// second SyncGradients leaves them so (they differ across ranks; the Step that follows uses
// them as they are), and after ResetGradientSync, the optimizer's ZeroGrad or its Step, the
// next sync makes them equal again.
func scenarioDDPOnce(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	r, w := g.Rank(), g.WorldSize()
	model := mlp(ddpSeed, 4)
	ddp, err := NewDataParallel(g, model, DataParallelOptions{})
	if err != nil {
		return err
	}
	opt, err := newOptim("sgd", ddp)
	if err != nil {
		return err
	}
	grads := func() []float64 {
		var out []float64
		for _, p := range model.Parameters() {
			out = append(out, float64s(p.Tensor.Grad())...)
		}
		return out
	}
	x, y := batch(0)
	backward := func() { nn.MSE(nn.ReduceMean)(model.Forward(slice(x, r, w)), slice(y, r, w)).Backward() }
	backward()
	for _, reset := range []struct {
		name string
		f    func() error
	}{
		{"ResetGradientSync", func() error { ddp.ResetGradientSync(); return nil }},
		{"the optimizer's ZeroGrad", func() error { opt.ZeroGrad(); backward(); return nil }},
		{"the optimizer's Step", func() error { return opt.Step() }},
	} {
		if err := ddp.SyncGradients(); err != nil {
			return err
		}
		if err := sameOnEveryRank(g, "the synced gradients", grads()); err != nil {
			return err
		}
		for _, p := range model.Parameters() {
			p.Tensor.Grad().MulScalarInPlace(float64(r + 1))
		}
		if err := ddp.SyncGradients(); err != nil {
			return err
		}
		if err := sameOnEveryRank(g, "the gradients", grads()); err == nil {
			return fmt.Errorf("before %s: a second SyncGradients synced again", reset.name)
		}
		if err := reset.f(); err != nil {
			return err
		}
	}
	if err := ddp.SyncGradients(); err != nil {
		return err
	}
	return sameOnEveryRank(g, "the gradients synced after a step", grads())
}
