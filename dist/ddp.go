package dist

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// DefaultBucketBytes is the bucket size of a DataParallel whose options leave it zero: torch
// DDP's bucket_cap_mb default, 25 MiB.
const DefaultBucketBytes = 25 << 20

// DataParallelOptions say how a DataParallel synchronizes its model.
type DataParallelOptions struct {
	// BucketBytes caps the bytes of one bucket: the gradients of several parameters (of one
	// dtype) flattened into one tensor and all-reduced by one collective. A parameter larger
	// than the cap has a bucket of its own. Zero: DefaultBucketBytes.
	BucketBytes int64
	// LocalBuffers keeps each rank's buffers (BatchNorm1d's running statistics) its own. By
	// default, as torch DDP's broadcast_buffers=True, every synchronization copies rank 0's
	// buffers to the other ranks.
	LocalBuffers bool
	// SumGradients sums the gradients over the ranks instead of averaging them. A model with
	// a ShardedTable needs it: the table's owners sum the ranks' gradients, so each rank's
	// loss is summed over its slice and divided by the global batch size, and the dense
	// gradients must then be summed too (see the package doc, "Sharded tables and dense
	// layers together").
	SumGradients bool
}

// DataParallel replicates a model's dense layers on every rank of a group, as torch's
// DistributedDataParallel: NewDataParallel copies rank 0's parameters and buffers to every
// rank, and the optimizer made from the DataParallel averages the gradients of the ranks
// before each update (SyncGradients), so that the replicas stay equal. Its Parameters,
// Buffers and Steppers are the model's (the state names carry no prefix); the embedding
// tables (Steppers, not Parameters) are not averaged: each rank steps its own, or its shard.
//
// Every rank runs the same training loop, each on its slice of the global batch:
//
//	ddp, err := dist.NewDataParallel(group, model, dist.DataParallelOptions{})
//	opt, err := nn.NewAdam(ddp, nn.DefaultAdamOptions()) // from ddp, not from model
//	for each batch {
//		opt.ZeroGrad()
//		loss := lossFn(model.Forward(x), y) // a mean over this rank's slice
//		loss.Backward()
//		err := opt.Step() // averages the gradients, then updates
//	}
//
// With a mean-reduced loss and slices of equal size, the averaged gradient is the gradient of
// the global batch's mean loss (a model with a ShardedTable needs SumGradients instead, see
// DataParallelOptions). A caller who needs the averaged gradients before the step
// (nn.ClipGradNorm) calls SyncGradients after the last Backward; Step then uses them as they
// are. A DataParallel is safe for use by one training goroutine.
type DataParallel struct {
	g       *Group
	m       nn.Module
	grads   []bucket // the parameters' buckets
	buffers []bucket // the buffers', empty under LocalBuffers
	sum     bool     // SumGradients (tests set it after NewDataParallel too)
	claim   *nn.Claim

	mu     sync.Mutex
	synced bool // the gradients were synchronized since the last reset
}

// bucket is a run of tensors of one dtype moved by one collective.
type bucket struct {
	dtype   cgotorch.DType
	members []nn.NamedParameter
	numels  []int64
}

// NewDataParallel makes m data-parallel over g: it checks that every rank's model has the same
// parameters and buffers (names, shapes, dtypes) and options (ErrMismatch on every rank
// otherwise), then copies rank 0's parameters and buffers to every rank, so ranks whose models
// were initialised differently start from rank 0's. Every rank calls it, with the model on the
// CPU (after nn.To) and before making the optimizer, from the DataParallel: the DataParallel
// claims the model's parameters (nn.ClaimParameters), so that an optimizer made afterwards
// from the model, which would not sync them, is refused. A rank whose arguments are invalid gets
// ErrInvalidArgument or ErrConfig, and the others ErrMismatch, at once. Parameters listed
// twice (a module shared under two names) are synchronized once.
func NewDataParallel(g *Group, m nn.Module, opts DataParallelOptions) (*DataParallel, error) {
	if g == nil {
		return nil, &Error{Op: "data parallel", Kind: ErrInvalidArgument, Err: fmt.Errorf("nil group")}
	}
	if opts.BucketBytes == 0 {
		opts.BucketBytes = DefaultBucketBytes
	}
	// A rank with bad arguments still takes part in the agreement, with a fingerprint no
	// good rank has, so that the others fail at once (ErrMismatch) rather than time out.
	bad := check(m, opts)
	fingerprint := int64(0)
	var params, buffers []nn.NamedParameter
	if bad == nil {
		params, buffers = unique(m.Parameters()), unique(nn.Buffers(m))
		fingerprint = layout(params, buffers, opts)
	}
	d := &DataParallel{g: g, m: m, grads: buckets(params, opts.BucketBytes), sum: opts.SumGradients}
	if err := d.agree(fingerprint); bad != nil || err != nil {
		return nil, cmp.Or(bad, err)
	}
	if !opts.LocalBuffers {
		d.buffers = buckets(buffers, opts.BucketBytes)
	}
	if err := d.broadcast(append(buckets(params, opts.BucketBytes), buckets(buffers, opts.BucketBytes)...)); err != nil {
		return nil, err
	}
	d.claim = nn.ClaimParameters(d)
	return d, nil
}

// check is NewDataParallel's arguments' error, if any.
func check(m nn.Module, opts DataParallelOptions) error {
	const op = "data parallel"
	if m == nil {
		return &Error{Op: op, Kind: ErrInvalidArgument, Err: fmt.Errorf("nil model")}
	}
	if opts.BucketBytes < 0 {
		return &Error{Op: op, Kind: ErrConfig, Err: fmt.Errorf("negative bucket size %d", opts.BucketBytes)}
	}
	for _, p := range m.Parameters() {
		if p.Tensor.Closed() || !p.Tensor.DType().IsFloat() || p.Tensor.Device() != cgotorch.CPU {
			return &Error{Op: op, Kind: ErrInvalidArgument, Err: fmt.Errorf("parameter %q is closed, not floating-point or not on the CPU", p.Name)}
		}
	}
	for _, b := range nn.Buffers(m) {
		if b.Tensor.Closed() || b.Tensor.Device() != cgotorch.CPU {
			return &Error{Op: op, Kind: ErrInvalidArgument, Err: fmt.Errorf("buffer %q is closed or not on the CPU", b.Name)}
		}
	}
	return nil
}

// unique is ps with each tensor once, under its first name.
func unique(ps []nn.NamedParameter) []nn.NamedParameter {
	seen := map[*cgotorch.Tensor]bool{}
	var out []nn.NamedParameter
	for _, p := range ps {
		if !seen[p.Tensor] {
			seen[p.Tensor] = true
			out = append(out, p)
		}
	}
	return out
}

// buckets splits ps into buckets of one dtype and at most capBytes each (a tensor larger than
// capBytes alone), in the order of ps; the dtypes' buckets follow each other in the order the
// dtypes first appear.
func buckets(ps []nn.NamedParameter, capBytes int64) []bucket {
	var order []cgotorch.DType
	byDType := map[cgotorch.DType][]bucket{}
	fill := map[cgotorch.DType]int64{} // the bytes in the dtype's last bucket
	for _, p := range ps {
		dt, n := p.Tensor.DType(), p.Tensor.Numel()
		size := n * int64(dt.Size())
		bs, ok := byDType[dt]
		if !ok {
			order = append(order, dt)
		}
		if len(bs) == 0 || fill[dt]+size > capBytes {
			bs = append(bs, bucket{dtype: dt})
			fill[dt] = 0
		}
		b := &bs[len(bs)-1]
		b.members = append(b.members, p)
		b.numels = append(b.numels, n)
		fill[dt] += size
		byDType[dt] = bs
	}
	var out []bucket
	for _, dt := range order {
		out = append(out, byDType[dt]...)
	}
	return out
}

// layout is a fingerprint of what the ranks must agree on: the parameters' and buffers' names,
// shapes and dtypes, and the options that shape the collectives.
func layout(params, buffers []nn.NamedParameter, o DataParallelOptions) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "bucket %d, local buffers %v, sum %v\n", o.BucketBytes, o.LocalBuffers, o.SumGradients)
	for i, ps := range [][]nn.NamedParameter{params, buffers} {
		for _, p := range ps {
			fmt.Fprintf(h, "%d %q %v %v\n", i, p.Name, p.Tensor.Shape(), p.Tensor.DType())
		}
	}
	return int64(h.Sum64())
}

// agree fails on every rank unless every rank's fingerprint is this rank's.
func (d *DataParallel) agree(fingerprint int64) error {
	mine, err := cgotorch.FromSlice([]int64{fingerprint})
	if err != nil {
		return err
	}
	defer mine.Close()
	all, err := d.g.AllGather(mine)
	if err != nil {
		return err
	}
	defer all.Close()
	fps, err := cgotorch.ToSlice[int64](all)
	if err != nil {
		return err
	}
	for r, fp := range fps {
		if fp != fingerprint {
			return &Error{Op: "data parallel", Kind: ErrMismatch, Err: fmt.Errorf(
				"rank %d's model or options differ from rank %d's (parameter or buffer names, shapes, dtypes, bucket size, LocalBuffers, SumGradients), or are invalid", r, d.g.Rank())}
		}
	}
	return nil
}

// broadcast copies rank 0's tensors of bs to every rank, one collective per bucket; it changes
// nothing unless every collective succeeded.
func (d *DataParallel) broadcast(bs []bucket) error {
	flatten := func(b bucket) *cgotorch.Tensor {
		pieces := make([]*cgotorch.Tensor, len(b.members))
		for j, p := range b.members {
			pieces[j] = p.Tensor.Detach().Reshape(-1)
		}
		return cgotorch.Cat(pieces, 0)
	}
	root := func(t *cgotorch.Tensor) (*cgotorch.Tensor, error) { return d.g.Broadcast(t, 0) }
	return d.exchange("data parallel broadcast", bs, flatten, root, func(outs []*cgotorch.Tensor) error {
		cgotorch.NoGrad(func() {
			for i, b := range bs {
				var off int64
				for j, p := range b.members {
					p.Tensor.CopyFrom(outs[i].Narrow(0, off, b.numels[j]).View(p.Tensor.Shape()...))
					off += b.numels[j]
				}
			}
		})
		return nil
	})
}

// exchange runs one collective per bucket of bs on its flattened tensors, all flattened
// before the first collective (a local failure sends nothing), and hands the results to apply
// once every collective succeeded. Errors of the group come back as they are; any other (a
// tensor operation's) wraps ErrInvalidArgument.
func (d *DataParallel) exchange(op string, bs []bucket, flatten func(bucket) *cgotorch.Tensor,
	collective func(*cgotorch.Tensor) (*cgotorch.Tensor, error), apply func([]*cgotorch.Tensor) error) error {
	err := cgotorch.TryWithScope(func() error {
		ins := make([]*cgotorch.Tensor, len(bs))
		for i, b := range bs {
			ins[i] = flatten(b)
		}
		outs := make([]*cgotorch.Tensor, len(bs))
		for i, in := range ins {
			var err error
			if outs[i], err = collective(in); err != nil {
				return err
			}
		}
		return apply(outs)
	})
	var e *Error
	if err != nil && !errors.As(err, &e) {
		return &Error{Op: op, Kind: ErrInvalidArgument, Err: err}
	}
	return err
}

// SyncGradients averages (SumGradients: sums) the gradients of the model's parameters over
// the ranks, one all-reduce per bucket, and (unless LocalBuffers) copies rank 0's buffers to
// every rank. A parameter without a gradient on a rank counts as zeros there; one without a
// gradient on every rank keeps none (the optimizer skips it on every rank). Every rank must call it, after
// the last Backward of the step: the optimizer made from the DataParallel calls it at the
// start of Step. It does its work once until the gradients are used (Step) or zeroed
// (ZeroGrad): calling it again meanwhile does nothing. On an error (a dead peer, a timeout) no
// gradient or buffer changed, and the group is broken (ErrBroken).
func (d *DataParallel) SyncGradients() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.synced {
		return nil
	}
	if err := d.allReduce(); err != nil {
		return err
	}
	if err := d.broadcast(d.buffers); err != nil {
		return err
	}
	d.synced = true
	return nil
}

// ResetGradientSync marks the gradients as not synchronized: the next SyncGradients averages
// them again. The optimizer calls it after Step and in ZeroGrad (nn.GradientSyncer).
func (d *DataParallel) ResetGradientSync() {
	d.mu.Lock()
	d.synced = false
	d.mu.Unlock()
}

// allReduce averages the gradients, bucket by bucket. Each bucket holds the flattened
// gradients of its parameters (zeros for those without one) followed by one flag per
// parameter, 1 where it has a gradient: after the average a flag is 0 only where no rank had a
// gradient. The gradients change only once every bucket is reduced.
func (d *DataParallel) allReduce() error {
	op := Avg
	if d.sum {
		op = Sum
	}
	flatten := func(b bucket) *cgotorch.Tensor {
		pieces := make([]*cgotorch.Tensor, 0, 2*len(b.members))
		flags := make([]*cgotorch.Tensor, len(b.members))
		for j, p := range b.members {
			g := p.Tensor.Grad()
			has := 1.0
			if g == nil {
				g, has = cgotorch.Zeros([]int64{b.numels[j]}, cgotorch.WithDType(b.dtype)), 0
			}
			pieces = append(pieces, g.Reshape(-1))
			flags[j] = cgotorch.Full([]int64{1}, has, cgotorch.WithDType(b.dtype))
		}
		return cgotorch.Cat(append(pieces, flags...), 0)
	}
	reduce := func(t *cgotorch.Tensor) (*cgotorch.Tensor, error) { return d.g.AllReduce(t, op) }
	return d.exchange("data parallel sync", d.grads, flatten, reduce, func(outs []*cgotorch.Tensor) error {
		for i, b := range d.grads {
			k := int64(len(b.members))
			flags, err := outs[i].Narrow(0, outs[i].Numel()-k, k).To(cgotorch.CPU, cgotorch.Float64)
			if err != nil {
				return err
			}
			used, err := cgotorch.ToSlice[float64](flags)
			if err != nil {
				return err
			}
			var off int64
			for j, p := range b.members {
				if used[j] != 0 {
					grad(p.Tensor).CopyFrom(outs[i].Narrow(0, off, b.numels[j]).View(p.Tensor.Shape()...))
				}
				off += b.numels[j]
			}
		}
		return nil
	})
}

// grad returns p's gradient, giving p a zero one first when it has none (a parameter that
// another rank's batch reached but this rank's did not).
func grad(p *cgotorch.Tensor) *cgotorch.Tensor {
	if g := p.Grad(); g != nil {
		return g
	}
	cgotorch.EnableGrad(func() { p.Sum().MulScalar(0).Backward() })
	return p.Grad()
}

// Module is the model the DataParallel synchronizes.
func (d *DataParallel) Module() nn.Module { return d.m }

// Group is the process group the DataParallel synchronizes over.
func (d *DataParallel) Group() *Group { return d.g }

// Parameters returns the model's parameters.
func (d *DataParallel) Parameters() []nn.NamedParameter { return d.m.Parameters() }

// Buffers returns the model's buffers.
func (d *DataParallel) Buffers() []nn.NamedParameter { return nn.Buffers(d.m) }

// Steppers returns the model's Steppers (its embedding tables): an optimizer made from the
// DataParallel steps them as one made from the model would, without averaging them.
func (d *DataParallel) Steppers() []nn.Stepper { return nn.Steppers(d.m) }

// Train sets the model's mode.
func (d *DataParallel) Train(on bool) { d.m.Train(on) }

// ZeroGrad zeroes the model's gradients (ResetGradientSync too).
func (d *DataParallel) ZeroGrad() {
	d.ResetGradientSync()
	d.m.ZeroGrad()
}

var (
	_ nn.Module         = (*DataParallel)(nil)
	_ nn.BufferModule   = (*DataParallel)(nil)
	_ nn.SparseModule   = (*DataParallel)(nil)
	_ nn.GradientSyncer = (*DataParallel)(nil)
)
