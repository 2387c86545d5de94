package dist

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/cdist"
)

// ReduceOp is a reduction of AllReduce.
type ReduceOp int32

// The reductions: Sum, Avg (the sum divided by the world size, floating-point tensors only)
// and Max.
const (
	Sum = ReduceOp(cdist.Sum)
	Avg = ReduceOp(cdist.Avg)
	Max = ReduceOp(cdist.Max)
)

// Group is a process group: this process's rank among WorldSize processes running the same
// collectives in the same order. Its methods are safe from any goroutine: the collectives of a
// group run one at a time, in the order they are called; every rank must call them in the
// same order (goroutines that race to call different collectives break that).
type Group struct {
	mu     sync.Mutex
	g      *cdist.Group // nil once closed
	broken error        // the failure that broke the group
	opts   Options
	sent   atomic.Int64 // BytesSent
	calls  atomic.Int64 // Collectives
}

// New starts a group: it meets the other ranks through the store, checks that they belong to
// the same job and world size (ErrRefused otherwise, before any data moves), and connects
// Gloo, and NCCL with that backend. It blocks until every rank has joined, at most the timeout
// (ErrTimeout).
//
// With NCCL it sets TORCH_NCCL_BLOCKING_WAIT=1 and TORCH_NCCL_ASYNC_ERROR_HANDLING=0 in the
// process's environment: without them NCCL's watchdog ends the process on a timeout, and a
// wait does not return the error.
func New(opts Options) (*Group, error) {
	o, err := opts.config()
	if err != nil {
		return nil, err
	}
	catchSIGPIPE()
	cfg := cdist.Config{
		Rank: o.Rank, WorldSize: o.WorldSize, Timeout: o.Timeout,
		StorePath: o.Store.path, StoreHost: o.Store.host, StorePort: o.Store.port,
		StoreClientOnly: o.Store.client, StorePrefix: o.Store.prefix,
		GlooInterface: o.Interface, GlooHost: o.Host, Job: o.Job,
	}
	if o.Backend == NCCL {
		os.Setenv("TORCH_NCCL_BLOCKING_WAIT", "1")
		os.Setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
		cfg.Backend, cfg.Device = cdist.NCCL, o.Device.Index
	}
	g, err := cdist.New(cfg)
	if err != nil {
		return nil, wrap("new group", err)
	}
	return &Group{g: g, opts: o}, nil
}

// FromEnv starts a group from torchrun's environment (EnvOptions); opts, when given, sets
// the timeout, and the job, interface, host, backend and device where they are set.
func FromEnv(opts ...Options) (*Group, error) {
	o, err := EnvOptions()
	if err != nil {
		return nil, err
	}
	for _, x := range opts {
		o.Timeout = x.Timeout
		if x.Job != "" {
			o.Job = x.Job
		}
		if x.Interface != "" {
			o.Interface = x.Interface
		}
		if x.Host != "" {
			o.Host = x.Host
		}
		if x.Backend != "" {
			o.Backend = x.Backend
		}
		if x.Device.Type == cgotorch.DeviceCUDA {
			o.Device = x.Device
		}
	}
	return New(o)
}

// Rank is this process's rank.
func (g *Group) Rank() int { return g.opts.Rank }

// WorldSize is the number of ranks.
func (g *Group) WorldSize() int { return g.opts.WorldSize }

// LocalRank is the rank on this machine (as the options or torchrun gave it).
func (g *Group) LocalRank() int { return g.opts.LocalRank }

// Backend is the group's backend, Gloo or NCCL.
func (g *Group) Backend() string { return g.opts.Backend }

// Device is where the group's collectives take tensors besides the CPU: this rank's GPU with
// the NCCL backend, else the CPU.
func (g *Group) Device() cgotorch.Device {
	if g.opts.Backend == NCCL {
		return g.opts.Device
	}
	return cgotorch.CPU
}

// Close releases the group: Gloo's threads and connections, and on rank 0 the store's server
// (close rank 0 last, or at least after the others have started). It waits for a collective
// in flight on another goroutine; a second Close does nothing.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.g.Close()
	g.g = nil
	return nil
}

// do runs one collective under the group's lock. A timeout or a failed peer breaks the group
// (the ranks are out of step); arguments refused by the ranks' agreement do not.
func (g *Group) do(op string, f func(*cdist.Group) error) error {
	g.calls.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.g == nil {
		return &Error{Op: op, Kind: ErrClosed, Err: errors.New("the group is closed")}
	}
	if g.broken != nil {
		return &Error{Op: op, Kind: ErrBroken, Err: g.broken}
	}
	if err := f(g.g); err != nil {
		e := wrap(op, err)
		if e.Broken {
			g.broken = e
		}
		return e
	}
	return nil
}

// tensorOp runs a collective that returns a tensor.
func (g *Group) tensorOp(op string, f func(*cdist.Group) (*cgotorch.Tensor, error)) (*cgotorch.Tensor, error) {
	var out *cgotorch.Tensor
	err := g.do(op, func(d *cdist.Group) (err error) {
		out, err = f(d)
		return err
	})
	return out, err
}

// AllReduce returns the element-wise reduction of t over every rank (t has the same shape and
// dtype on every rank). t is not modified.
func (g *Group) AllReduce(t *cgotorch.Tensor, op ReduceOp) (*cgotorch.Tensor, error) {
	g.count(t)
	return g.tensorOp("all-reduce", func(d *cdist.Group) (*cgotorch.Tensor, error) { return d.AllReduce(t, cdist.Op(op)) })
}

// Broadcast returns root's t on every rank (t has the same shape and dtype on every rank; its
// values matter on root only). t is not modified.
func (g *Group) Broadcast(t *cgotorch.Tensor, root int) (*cgotorch.Tensor, error) {
	if g.Rank() == root {
		g.count(t)
	}
	return g.tensorOp("broadcast", func(d *cdist.Group) (*cgotorch.Tensor, error) { return d.Broadcast(t, root) })
}

// AllGather returns every rank's t ([N, ...], the same shape and dtype on every rank)
// concatenated along dimension 0 in rank order: [WorldSize*N, ...].
func (g *Group) AllGather(t *cgotorch.Tensor) (*cgotorch.Tensor, error) {
	g.count(t)
	return g.tensorOp("all-gather", func(d *cdist.Group) (*cgotorch.Tensor, error) { return d.AllGather(t) })
}

// AllToAll sends rows [sum(send[:j]), +send[j]) of t to rank j, and returns the rows received
// from every rank, concatenated in rank order, with how many came from each (recv[j] from rank
// j). len(send) is WorldSize and sum(send) t's first dimension; every rank's t has the same
// dtype and sizes after the first. t is not modified.
func (g *Group) AllToAll(t *cgotorch.Tensor, send []int64) (out *cgotorch.Tensor, recv []int64, err error) {
	g.countRows(t, send)
	err = g.do("all-to-all", func(d *cdist.Group) (err error) {
		out, recv, err = d.AllToAll(t, send)
		return err
	})
	return out, recv, err
}

// allGatherInts returns every rank's v (the same length everywhere, at most
// cdist.GatherIntsMax) in rank order, in one exchange of the ranks' agreement headers: half the
// round trips of an AllGather, with the same agreement (a rank in another collective, or with
// another count, gets ErrMismatch on every rank).
func (g *Group) allGatherInts(v []int64) (out []int64, err error) {
	g.sent.Add(int64(8 * len(v)))
	err = g.do("all-gather of integers", func(d *cdist.Group) (err error) {
		out, err = d.AllGatherInts(v)
		return err
	})
	return out, err
}

// Barrier returns when every rank has called it.
func (g *Group) Barrier() error {
	return g.do("barrier", func(d *cdist.Group) error { return d.Barrier() })
}

func storeBindsAddress() bool { return cdist.StoreBindsAddress() }
