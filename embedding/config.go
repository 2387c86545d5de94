package embedding

import (
	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// Config describes a new table. Only Dim is required.
type Config struct {
	// Dim is the width of a row (> 0).
	Dim int
	// Initializer gives new rows their value; default Normal{Mean: 0, Std: 1}, the
	// initialisation of torch.nn.Embedding. A row's initial value depends only on (Seed, id)
	// (the seed in use: see Seed):
	// not on insertion order, batch composition or thread count.
	Initializer Initializer
	// Optimizer is what Update applies; default SGD{LR: 0.01}. NoOptimizer{} makes Update an
	// error (a table for inference or for Write only).
	Optimizer Optimizer
	// BlockRows is the number of rows per storage block; default 4096 (65536 for a table on a
	// GPU: there storage grows in chunks of whole blocks, each chunk a batch touches costs
	// kernel launches, and a table grown from nothing has about log2(rows / BlockRows) chunks;
	// one given its Capacity up front has one).
	BlockRows int
	// Capacity is how many ids to make room for up front; the table grows beyond it as needed.
	// At most 2^40; New refuses at once (ErrBadInput) a capacity whose rows and states (4
	// bytes a float) and id map (32 bytes an id) exceed the machine's physical memory.
	Capacity int
	// Seed keys the initializer's generator: a row's initial value is f(seed, id). Zero (the
	// default) derives the seed of a named table from its name, so that two tables do not
	// start alike (user 42 and movie 42 get different rows) while a table of that name starts
	// the same in every run, process and world size: seed = splitmix64's finaliser of the
	// 64-bit FNV-1a hash of the name's bytes (cgotorch.h, CT_TABLE_SEED_FROM_NAME; the Python
	// package does the same). An unnamed table (New) uses 0 as is. A nonzero Seed is used as
	// is, whatever the name. Table.Config reports the seed in use, and a Config with it starts
	// the same rows under any name.
	Seed uint64
	// Device is where the rows live; default the CPU. A CUDA table needs a libtorch with CUDA.
	Device cgotorch.Device
	// Layout places optimizer states in block arrays of their own (Separate, the default) or
	// beside the embedding in one block row (Interleaved). BenchmarkLayout compares them: where
	// gorec was measured, Separate made lookups 1.17x faster and Interleaved SparseAdam updates
	// 1.14x faster, so a training step is about even and lookup-only serving favours Separate.
	Layout Layout
	// ReadDefault is the row Read and Prefetch give for ids not in the table: ReadZeros (the
	// default) or ReadInitial (the initializer's value, what Lookup would insert).
	ReadDefault ReadDefault
	// TrackAccess keeps each row's last step and frequency: 8 bytes a row, and one more cache
	// line written per row a training lookup or update touches. Metadata, EvictIf and Evict
	// (every policy: TTL, KeepRecent, KeepFrequent, MemoryBudget) need it and fail with
	// ErrBadInput without it. Off by default: a table that never evicts (a fixed id
	// space, a serving replica) should not pay for it.
	TrackAccess bool
}

// Layout places optimizer states relative to the embedding.
type Layout int

// The layouts.
const (
	Separate Layout = iota
	Interleaved
)

// ReadDefault is the row Read and Prefetch give for ids not in the table.
type ReadDefault int

// The read defaults.
const (
	ReadZeros ReadDefault = iota
	ReadInitial
)

// ---- initializers ---------------------------------------------------------------------------

// Initializer gives new rows their values. The implementations are the types of this package:
// Zeros, Constant, Uniform, Normal, TruncatedNormal, XavierUniform, XavierNormal.
type Initializer interface {
	initializer(dim int) (ctable.Init, [4]float64)
}

// Zeros initialises rows to 0.
type Zeros struct{}

// Constant initialises every element to Value.
type Constant struct{ Value float64 }

// Uniform draws elements from [Low, High).
type Uniform struct{ Low, High float64 }

// Normal draws elements from N(Mean, Std²).
type Normal struct{ Mean, Std float64 }

// TruncatedNormal draws from N(Mean, Std²) and redraws samples outside [Low, High]; Low and
// High both zero mean Mean ± 2 Std (as tf.truncated_normal; torch's trunc_normal_ takes
// absolute bounds, as Low and High do).
type TruncatedNormal struct{ Mean, Std, Low, High float64 }

// XavierUniform draws from U(-b, b), b = Gain * sqrt(6 / (FanIn + FanOut)). Gain 0 means 1; FanIn
// and FanOut 0 mean the table's dim (a dynamic table has no fixed number of rows to use for the
// fan-out torch would take from the weight's first dimension).
type XavierUniform struct {
	Gain          float64
	FanIn, FanOut int
}

// XavierNormal draws from N(0, s²), s = Gain * sqrt(2 / (FanIn + FanOut)); defaults as
// XavierUniform.
type XavierNormal struct {
	Gain          float64
	FanIn, FanOut int
}

func (Zeros) initializer(int) (ctable.Init, [4]float64) {
	return ctable.InitZeros, [4]float64{}
}
func (c Constant) initializer(int) (ctable.Init, [4]float64) {
	return ctable.InitConstant, [4]float64{c.Value}
}
func (u Uniform) initializer(int) (ctable.Init, [4]float64) {
	return ctable.InitUniform, [4]float64{u.Low, u.High}
}
func (n Normal) initializer(int) (ctable.Init, [4]float64) {
	return ctable.InitNormal, [4]float64{n.Mean, n.Std}
}
func (n TruncatedNormal) initializer(int) (ctable.Init, [4]float64) {
	lo, hi := n.Low, n.High
	if lo == 0 && hi == 0 {
		lo, hi = n.Mean-2*n.Std, n.Mean+2*n.Std
	}
	return ctable.InitTruncatedNormal, [4]float64{n.Mean, n.Std, lo, hi}
}
func (x XavierUniform) initializer(int) (ctable.Init, [4]float64) {
	return ctable.InitXavierUniform, xavier(x.Gain, x.FanIn, x.FanOut)
}
func (x XavierNormal) initializer(int) (ctable.Init, [4]float64) {
	return ctable.InitXavierNormal, xavier(x.Gain, x.FanIn, x.FanOut)
}

func xavier(gain float64, in, out int) [4]float64 {
	if gain == 0 {
		gain = 1
	}
	return [4]float64{gain, float64(in), float64(out)}
}

// ---- optimizers -----------------------------------------------------------------------------

// Optimizer is the update rule a table applies to the rows of an Update, keeping its per-row
// state next to the rows. The implementations are the types of this package: SGD, Adagrad,
// RowWiseAdagrad, SparseAdam, AdamW, FTRL and NoOptimizer. Zero fields mean the documented
// defaults where a field says so.
//
// Every rule sums the gradients of repeated ids first and (except SGD with momentum) changes
// only the rows present in the update. The table counts steps once per Update call: the bias
// corrections of Adam and the lr decay of Adagrad use that table-wide counter, as PyTorch does
// for an nn.Embedding(sparse=True).
type Optimizer interface {
	optimizer() (ctable.Optimizer, [8]float64)
	// StateNames are the names of the per-row states, in Export's order.
	StateNames() []string
}

// NoOptimizer makes Update an error.
type NoOptimizer struct{}

// SGD is PyTorch's SGD on a sparse gradient: w -= LR * g. With Momentum m (and Dampening d,
// Nesterov): buf = g at the table's first step, then buf = m*buf + (1-d)*g; w -= LR * buf (or
// LR * (g + m*buf) with Nesterov). As in PyTorch, rows absent from a step keep moving with
// their decaying momentum; the table applies those moves lazily in closed form when a row is
// next read, written, exported or updated, so the numbers match PyTorch (to float rounding)
// without touching every row at every step. LR 0 means 0.01. Nesterov needs a Momentum and zero
// Dampening.
type SGD struct {
	LR, Momentum, Dampening float64
	Nesterov                bool
}

// Adagrad is PyTorch's Adagrad on a sparse gradient: clr = LR / (1 + (t-1) * LRDecay);
// sum += g²; w -= clr * g / (sqrt(sum) + Eps). LR 0 means 0.01, Eps 0 means 1e-10; new rows'
// sum starts at InitialAccumulator.
type Adagrad struct{ LR, LRDecay, InitialAccumulator, Eps float64 }

// RowWiseAdagrad keeps one accumulator per row (TorchRec, FBGEMM): sum += mean_j(g_j²);
// w -= clr * g / (sqrt(sum) + Eps), clr as Adagrad. Defaults as Adagrad.
type RowWiseAdagrad struct{ LR, LRDecay, InitialAccumulator, Eps float64 }

// SparseAdam is PyTorch's SparseAdam: for the rows present, m += (1-b1)(g-m);
// v += (1-b2)(g²-v); w -= LR * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + Eps), t the table's step.
// Defaults: LR 1e-3, Beta1 0.9, Beta2 0.999, Eps 1e-8.
type SparseAdam struct{ LR, Beta1, Beta2, Eps float64 }

// AdamW is PyTorch's AdamW applied lazily to the rows present: w *= 1 - LR*WeightDecay;
// m = b1*m + (1-b1)g; v = b2*v + (1-b2)g²; w -= LR/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + Eps).
// Defaults as SparseAdam; WeightDecay is used as given (PyTorch's default is 0.01).
type AdamW struct{ LR, Beta1, Beta2, Eps, WeightDecay float64 }

// FTRL is FTRL-Proximal (McMahan et al., 2013), per coordinate, with the current weight in the
// linear term as in TensorFlow's ApplyFtrl (so rows may start from any initializer):
// n' = n + g²; sigma = (sqrt(n') - sqrt(n)) / Alpha; z += g - sigma*w; n = n';
// w = 0 if |z| <= L1, else -(z - sign(z)*L1) / ((Beta + sqrt(n))/Alpha + L2).
// Alpha 0 means 0.05; new rows' n starts at InitialAccumulator. L2 is McMahan's lambda2:
// TensorFlow's ApplyFtrl adds 2*l2 to the denominator, so its l2 of x is L2 = 2x here (lr_power is
// -0.5, with no l2_shrinkage).
type FTRL struct{ Alpha, Beta, L1, L2, InitialAccumulator float64 }

func or(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

func (NoOptimizer) optimizer() (ctable.Optimizer, [8]float64) {
	return ctable.OptNone, [8]float64{}
}

func (o SGD) optimizer() (ctable.Optimizer, [8]float64) {
	nesterov := 0.0
	if o.Nesterov {
		nesterov = 1
	}
	return ctable.OptSGD, [8]float64{or(o.LR, 0.01), o.Momentum, o.Dampening, nesterov}
}

func (o Adagrad) optimizer() (ctable.Optimizer, [8]float64) {
	return ctable.OptAdagrad, [8]float64{or(o.LR, 0.01), o.LRDecay, o.InitialAccumulator, or(o.Eps, 1e-10)}
}

func (o RowWiseAdagrad) optimizer() (ctable.Optimizer, [8]float64) {
	return ctable.OptRowWiseAdagrad, [8]float64{or(o.LR, 0.01), o.LRDecay, o.InitialAccumulator, or(o.Eps, 1e-10)}
}

func (o SparseAdam) optimizer() (ctable.Optimizer, [8]float64) {
	return ctable.OptSparseAdam, [8]float64{or(o.LR, 1e-3), or(o.Beta1, 0.9), or(o.Beta2, 0.999), or(o.Eps, 1e-8)}
}

func (o AdamW) optimizer() (ctable.Optimizer, [8]float64) {
	return ctable.OptAdamW, [8]float64{or(o.LR, 1e-3), or(o.Beta1, 0.9), or(o.Beta2, 0.999), or(o.Eps, 1e-8), o.WeightDecay}
}

func (o FTRL) optimizer() (ctable.Optimizer, [8]float64) {
	return ctable.OptFTRL, [8]float64{or(o.Alpha, 0.05), o.Beta, o.L1, o.L2, o.InitialAccumulator}
}

func stateNames(o Optimizer) []string {
	kind, p := o.optimizer()
	n := 0
	switch kind {
	case ctable.OptSGD:
		if p[1] != 0 {
			n = 1
		}
	case ctable.OptAdagrad, ctable.OptRowWiseAdagrad:
		n = 1
	case ctable.OptSparseAdam, ctable.OptAdamW, ctable.OptFTRL:
		n = 2
	}
	names := make([]string, n)
	for i := range names {
		names[i] = ctable.StateName(kind, i)
	}
	return names
}

// StateNames: none.
func (o NoOptimizer) StateNames() []string { return stateNames(o) }

// StateNames: "momentum_buffer" with a momentum, else none.
func (o SGD) StateNames() []string { return stateNames(o) }

// StateNames: "sum" ([N, dim]).
func (o Adagrad) StateNames() []string { return stateNames(o) }

// StateNames: "sum" ([N, 1]).
func (o RowWiseAdagrad) StateNames() []string { return stateNames(o) }

// StateNames: "exp_avg", "exp_avg_sq".
func (o SparseAdam) StateNames() []string { return stateNames(o) }

// StateNames: "exp_avg", "exp_avg_sq".
func (o AdamW) StateNames() []string { return stateNames(o) }

// StateNames: "z", "n".
func (o FTRL) StateNames() []string { return stateNames(o) }

// resolve fills in the defaults and converts cfg for the binding (ctable.Config).
func (cfg Config) resolve(name string) (Config, ctable.Config, error) {
	const op = "new"
	if cfg.Dim <= 0 {
		return cfg, ctable.Config{}, badInput(op, name, "Dim must be positive, got %d", cfg.Dim)
	}
	if cfg.BlockRows < 0 || cfg.Capacity < 0 {
		return cfg, ctable.Config{}, badInput(op, name, "BlockRows and Capacity must not be negative")
	}
	if cfg.Layout != Interleaved && cfg.Layout != Separate {
		return cfg, ctable.Config{}, badInput(op, name, "unknown Layout %d", cfg.Layout)
	}
	if cfg.ReadDefault != ReadZeros && cfg.ReadDefault != ReadInitial {
		return cfg, ctable.Config{}, badInput(op, name, "unknown ReadDefault %d", cfg.ReadDefault)
	}
	if cfg.Initializer == nil {
		cfg.Initializer = Normal{Mean: 0, Std: 1}
	}
	if cfg.Optimizer == nil {
		cfg.Optimizer = SGD{LR: 0.01}
	}
	if cfg.BlockRows == 0 {
		cfg.BlockRows = 4096
		if cfg.Device.Type == cgotorch.DeviceCUDA {
			cfg.BlockRows = 65536 // fewer chunks as the table grows (see BlockRows)
		}
	}
	if cfg.Device.Type == cgotorch.DeviceCPU {
		cfg.Device = cgotorch.CPU
	}
	ik, ip := cfg.Initializer.initializer(cfg.Dim)
	ok, Op := cfg.Optimizer.optimizer()
	layout := ctable.LayoutInterleaved
	if cfg.Layout == Separate {
		layout = ctable.LayoutSeparate
	}
	return cfg, ctable.Config{
		Dim: int64(cfg.Dim), Capacity: int64(cfg.Capacity), BlockRows: int64(cfg.BlockRows),
		Init: ik, InitParams: ip, Optimizer: ok, OptParams: Op,
		Device: cfg.Device, Seed: cfg.Seed, Layout: layout, TrackAccess: cfg.TrackAccess,
		SeedFromName: cfg.Seed == 0,
	}, nil
}

func (r ReadDefault) c() ctable.ReadDefault {
	if r == ReadInitial {
		return ctable.ReadInitial
	}
	return ctable.ReadZeros
}
