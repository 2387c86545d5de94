// Package cdist is the Go side of cgotorch.h's process groups (ct_dist_*): the one layer
// between package dist and the C ABI. Like internal/ctable it is a cgo package without C
// sources of its own: the C++ is compiled in cgotorch, which it imports, and tensors and errors
// cross through internal/ctensor.
package cdist

// #include <stdlib.h>
// #include "../../cgotorch/cgotorch.h"
import "C"

import (
	"runtime"
	"time"
	"unsafe"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctensor"
)

// Config says how a process group starts (ct_dist_config in cgotorch.h). Package dist
// builds it from its options or from torchrun's environment.
type Config struct {
	Rank, WorldSize int
	Timeout         time.Duration // the limit of the start-up and of every collective
	StorePath       string        // a FileStore at this path when set
	StoreHost       string        // else a TCPStore at StoreHost:StorePort, served by rank 0
	StorePort       int
	StoreClientOnly bool   // no rank serves: every rank connects (torchrun's agent store)
	StorePrefix     string // every key of the group goes under it
	GlooInterface   string // Gloo binds to this interface's address when set
	GlooHost        string // else to this address when set, else to the host name's
	Job             string // the job's identity: ranks announcing another are refused
	// Backend moves CUDA tensors too when NCCL: NCCL on CUDA device Device (the CPU tensors
	// and the ranks' agreement stay on Gloo). The caller sets NCCL's environment (ct_dist_config).
	Backend Backend
	Device  int
}

// Backend is a process group's backend (ct_dist_backend).
type Backend int32

// The backends: Gloo (CPU tensors only), and NCCL for CUDA tensors beside it.
const (
	Gloo Backend = C.CT_DIST_GLOO
	NCCL Backend = C.CT_DIST_NCCL
)

// BackendAvailable reports whether this build has backend b: NCCL needs the gorec_nccl
// build tag and a libtorch with CUDA and NCCL (make cuda-test-bins).
func BackendAvailable(b Backend) bool {
	var v C.int32_t
	must(toError("dist backend available", C.ct_dist_backend_available(&v, C.int32_t(b))))
	return v != 0
}

// Op is a reduction of AllReduce.
type Op int32

// The reductions. Avg is the sum divided by the world size (floating-point tensors only).
const (
	Sum Op = C.CT_DIST_SUM
	Avg Op = C.CT_DIST_AVG
	Max Op = C.CT_DIST_MAX
)

// Group is a c10d ProcessGroupGloo, with a ProcessGroupNCCL for CUDA tensors when its
// backend is NCCL (see cgotorch.h, "Process groups"). It is the thin layer
// under package dist, which serialises its calls: a Group must not be used by two
// goroutines at once, nor closed while in use. Close it: no cleanup frees it, since freeing
// a group waits for Gloo's threads.
type Group struct {
	p     C.ct_dist_group
	world int
}

// New starts a process group; it blocks until every rank has arrived, at most
// cfg.Timeout.
func New(cfg Config) (*Group, error) {
	var c C.ct_dist_config
	c.rank = C.int32_t(cfg.Rank)
	c.world_size = C.int32_t(cfg.WorldSize)
	c.timeout_ms = C.int64_t(cfg.Timeout.Milliseconds())
	c.store_port = C.int32_t(cfg.StorePort)
	c.backend = C.int32_t(cfg.Backend)
	c.device = C.int32_t(cfg.Device)
	if cfg.StoreClientOnly {
		c.store_client_only = 1
	}
	strs := []struct {
		dst **C.char
		src string
	}{
		{&c.store_path, cfg.StorePath}, {&c.store_host, cfg.StoreHost}, {&c.store_prefix, cfg.StorePrefix},
		{&c.gloo_interface, cfg.GlooInterface}, {&c.gloo_host, cfg.GlooHost}, {&c.job, cfg.Job},
	}
	for _, s := range strs {
		*s.dst = C.CString(s.src)
		defer C.free(unsafe.Pointer(*s.dst))
	}
	var p C.ct_dist_group
	if err := toError("process group", C.ct_dist_group_new(&p, &c)); err != nil {
		return nil, err
	}
	return &Group{p: p, world: cfg.WorldSize}, nil
}

// Close releases the group (its threads, its connections, rank 0's store server); a second
// Close does nothing.
func (g *Group) Close() {
	if g != nil && g.p != nil {
		C.ct_dist_group_free(g.p)
		g.p = nil
	}
}

// StoreBindsAddress reports whether rank 0's TCPStore server listens on the store address
// only (libtorch 2.x), rather than on every interface (libtorch 1.x's c10d).
func StoreBindsAddress() bool {
	var v C.int32_t
	must(toError("dist store binds address", C.ct_dist_store_binds_address(&v)))
	return v != 0
}

// collective runs one tensor collective: f gets the group's handle and t's. A nil or closed t
// goes to C as NULL: the rank still takes part in the agreement, where it refuses the call.
func (g *Group) collective(op string, t *cgotorch.Tensor, f func(C.ct_dist_group, C.ct_tensor, *C.ct_tensor) C.ct_error) (*cgotorch.Tensor, error) {
	p, _ := ctensor.Handle(op, "tensor", t)
	h := C.ct_tensor(p)
	var out C.ct_tensor
	beforeBlocking()
	e := f(g.p, h, &out)
	runtime.KeepAlive(t)
	if err := toError(op, e); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// AllReduce returns the element-wise reduction of t over every rank.
func (g *Group) AllReduce(t *cgotorch.Tensor, op Op) (*cgotorch.Tensor, error) {
	return g.collective("all-reduce", t, func(p C.ct_dist_group, h C.ct_tensor, out *C.ct_tensor) C.ct_error {
		return C.ct_dist_all_reduce(out, p, h, C.int32_t(op))
	})
}

// Broadcast returns root's t on every rank.
func (g *Group) Broadcast(t *cgotorch.Tensor, root int) (*cgotorch.Tensor, error) {
	return g.collective("broadcast", t, func(p C.ct_dist_group, h C.ct_tensor, out *C.ct_tensor) C.ct_error {
		return C.ct_dist_broadcast(out, p, h, C.int32_t(root))
	})
}

// AllGather returns every rank's t concatenated along dimension 0 in rank order.
func (g *Group) AllGather(t *cgotorch.Tensor) (*cgotorch.Tensor, error) {
	return g.collective("all-gather", t, func(p C.ct_dist_group, h C.ct_tensor, out *C.ct_tensor) C.ct_error {
		return C.ct_dist_all_gather(out, p, h)
	})
}

// AllToAll sends rows [sum(send[:j]), +send[j]) of t to rank j and returns the rows received
// from every rank, concatenated in rank order, and how many came from each.
func (g *Group) AllToAll(t *cgotorch.Tensor, send []int64) (*cgotorch.Tensor, []int64, error) {
	var sp *C.int64_t
	if len(send) > 0 {
		sp = (*C.int64_t)(unsafe.Pointer(&send[0]))
	}
	recv := make([]int64, max(len(send), 1))
	out, err := g.collective("all-to-all", t, func(p C.ct_dist_group, h C.ct_tensor, out *C.ct_tensor) C.ct_error {
		return C.ct_dist_all_to_all(out, (*C.int64_t)(unsafe.Pointer(&recv[0])), p, h, sp, C.int32_t(len(send)))
	})
	runtime.KeepAlive(send)
	if err != nil {
		return nil, nil, err
	}
	return out, recv[:len(send)], nil
}

// Barrier returns when every rank has called it.
func (g *Group) Barrier() error {
	beforeBlocking()
	return toError("barrier", C.ct_dist_barrier(g.p))
}

// newTensor wraps a handle the C ABI returned (nil for NULL).
func newTensor(p C.ct_tensor) *cgotorch.Tensor {
	return ctensor.Wrap(unsafe.Pointer(p)).(*cgotorch.Tensor)
}

// toError converts (and frees) an error of the C ABI with cgotorch's conversion.
func toError(op string, e C.ct_error) error { return ctensor.Error(op, unsafe.Pointer(e)) }

// must panics with err: for queries that fail only when the library is broken.
func must(err error) {
	if err != nil {
		panic(err)
	}
}

// AllGatherInts returns every rank's v (the same length everywhere, at most GatherIntsMax) in
// rank order. The values ride in the agreement header: one exchange, not two.
func (g *Group) AllGatherInts(v []int64) ([]int64, error) {
	n := len(v)
	out := make([]int64, max(n*g.world, 1))
	var vp *C.int64_t
	if n > 0 {
		vp = (*C.int64_t)(unsafe.Pointer(&v[0]))
	}
	beforeBlocking()
	e := C.ct_dist_all_gather_ints((*C.int64_t)(unsafe.Pointer(&out[0])), g.p, vp, C.int32_t(n))
	runtime.KeepAlive(v)
	if err := toError("all-gather of integers", e); err != nil {
		return nil, err
	}
	return out[:n*g.world], nil
}

// GatherIntsMax is the most integers AllGatherInts moves.
const GatherIntsMax = C.CT_DIST_GATHER_INTS_MAX
