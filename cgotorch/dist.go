package cgotorch

// #include <stdlib.h>
// #include "cgotorch.h"
import "C"

import (
	"runtime"
	"time"
	"unsafe"
)

// DistConfig says how a process group starts (ct_dist_config in cgotorch.h). Package dist
// builds it from its options or from torchrun's environment.
type DistConfig struct {
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
	// Backend moves CUDA tensors too when DistNCCL: NCCL on CUDA device Device (the CPU tensors
	// and the ranks' agreement stay on Gloo). The caller sets NCCL's environment (ct_dist_config).
	Backend DistBackend
	Device  int
}

// DistBackend is a process group's backend (ct_dist_backend).
type DistBackend int32

// The backends: Gloo (CPU tensors only), and NCCL for CUDA tensors beside it.
const (
	DistGloo DistBackend = C.CT_DIST_GLOO
	DistNCCL DistBackend = C.CT_DIST_NCCL
)

// DistBackendAvailable reports whether this build has backend b: NCCL needs the gorec_nccl
// build tag and a libtorch with CUDA and NCCL (make cuda-test-bins).
func DistBackendAvailable(b DistBackend) bool {
	var v C.int32_t
	must("dist backend available", C.ct_dist_backend_available(&v, C.int32_t(b)))
	return v != 0
}

// DistOp is a reduction of AllReduce.
type DistOp int32

// The reductions. DistAvg is the sum divided by the world size (floating-point tensors only).
const (
	DistSum DistOp = C.CT_DIST_SUM
	DistAvg DistOp = C.CT_DIST_AVG
	DistMax DistOp = C.CT_DIST_MAX
)

// DistGroup is a c10d ProcessGroupGloo, with a ProcessGroupNCCL for CUDA tensors when its
// backend is DistNCCL (see cgotorch.h, "Process groups"). It is the thin layer
// under package dist, which serialises its calls: a DistGroup must not be used by two
// goroutines at once, nor closed while in use. Close it: no cleanup frees it, since freeing
// a group waits for Gloo's threads.
type DistGroup struct {
	p C.ct_dist_group
}

// NewDistGroup starts a process group; it blocks until every rank has arrived, at most
// cfg.Timeout.
func NewDistGroup(cfg DistConfig) (*DistGroup, error) {
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
	return &DistGroup{p: p}, nil
}

// Close releases the group (its threads, its connections, rank 0's store server); a second
// Close does nothing.
func (g *DistGroup) Close() {
	if g != nil && g.p != nil {
		C.ct_dist_group_free(g.p)
		g.p = nil
	}
}

// DistStoreBindsAddress reports whether rank 0's TCPStore server listens on the store address
// only (libtorch 2.x), rather than on every interface (libtorch 1.x's c10d).
func DistStoreBindsAddress() bool {
	var v C.int32_t
	must("dist store binds address", C.ct_dist_store_binds_address(&v))
	return v != 0
}

// collective runs one tensor collective: f gets the group's handle and t's. A nil or closed t
// goes to C as NULL: the rank still takes part in the agreement, where it refuses the call.
func (g *DistGroup) collective(op string, t *Tensor, f func(C.ct_dist_group, C.ct_tensor, *C.ct_tensor) C.ct_error) (*Tensor, error) {
	h, _ := t.cOrErr(op)
	var out C.ct_tensor
	e := f(g.p, h, &out)
	runtime.KeepAlive(t)
	if err := toError(op, e); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// AllReduce returns the element-wise reduction of t over every rank.
func (g *DistGroup) AllReduce(t *Tensor, op DistOp) (*Tensor, error) {
	return g.collective("all-reduce", t, func(p C.ct_dist_group, h C.ct_tensor, out *C.ct_tensor) C.ct_error {
		return C.ct_dist_all_reduce(out, p, h, C.int32_t(op))
	})
}

// Broadcast returns root's t on every rank.
func (g *DistGroup) Broadcast(t *Tensor, root int) (*Tensor, error) {
	return g.collective("broadcast", t, func(p C.ct_dist_group, h C.ct_tensor, out *C.ct_tensor) C.ct_error {
		return C.ct_dist_broadcast(out, p, h, C.int32_t(root))
	})
}

// AllGather returns every rank's t concatenated along dimension 0 in rank order.
func (g *DistGroup) AllGather(t *Tensor) (*Tensor, error) {
	return g.collective("all-gather", t, func(p C.ct_dist_group, h C.ct_tensor, out *C.ct_tensor) C.ct_error {
		return C.ct_dist_all_gather(out, p, h)
	})
}

// AllToAll sends rows [sum(send[:j]), +send[j]) of t to rank j and returns the rows received
// from every rank, concatenated in rank order, and how many came from each.
func (g *DistGroup) AllToAll(t *Tensor, send []int64) (*Tensor, []int64, error) {
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
func (g *DistGroup) Barrier() error {
	return toError("barrier", C.ct_dist_barrier(g.p))
}
