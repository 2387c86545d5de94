package dist

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/cdist"
)

// DefaultTimeout is the timeout of a group whose Options leave it zero.
const DefaultTimeout = 5 * time.Minute

// Store is where the ranks of a group meet: a c10d TCPStore served by rank 0, or a FileStore
// (one machine, tests).
type Store struct {
	host   string
	port   int
	path   string
	client bool   // every rank connects to a store that runs already (torchrun's agent store)
	prefix string // the keys of this group go under it
}

// TCPStore is a c10d TCPStore at host:port: rank 0 serves it (listening on host where libtorch
// allows it, see StoreBindsAddress) and every rank connects to it.
func TCPStore(host string, port int) Store { return Store{host: host, port: port} }

// FileStore is a c10d FileStore: a file every rank can reach (one machine, or a shared file
// system), new for each job: a file left by an earlier job makes its ranks refuse this one's.
func FileStore(path string) Store { return Store{path: path} }

// StoreBindsAddress reports whether rank 0's TCPStore server listens on the store's host only.
// With libtorch 2.x it does; libtorch 1.x's c10d (Debian's 1.13) listens on every interface
// of rank 0's machine: keep the port closed to other networks by a firewall.
func StoreBindsAddress() bool { return storeBindsAddress() }

// The backends of Options.Backend, named as torch.distributed names them.
const (
	// Gloo moves CPU tensors. It is the default, and every group has it.
	Gloo = "gloo"
	// NCCL moves CUDA tensors, on the rank's Device; the CPU tensors and the ranks' agreement
	// before each collective stay on Gloo. It needs a build with the gorec_nccl tag against a
	// libtorch with CUDA and NCCL (make cuda-test-bins): see NCCLAvailable.
	NCCL = "nccl"
)

// EnvBackend is the environment variable EnvOptions reads the backend from.
const EnvBackend = "GOREC_DIST_BACKEND"

// NCCLAvailable reports whether this build has the NCCL backend (it also needs a GPU to run).
func NCCLAvailable() bool { return cdist.BackendAvailable(cdist.NCCL) }

// Options say how a group starts.
type Options struct {
	Rank      int // 0 <= Rank < WorldSize
	WorldSize int
	LocalRank int   // the rank on this machine (informational, torchrun's LOCAL_RANK)
	Store     Store // where the ranks meet
	// Timeout bounds the start (every rank must join within it) and every collective; zero:
	// DefaultTimeout.
	Timeout time.Duration
	// Job is the job's identity. Every rank announces it with the world size before any data
	// moves; a rank announcing another one is refused (ErrRefused) on every rank that sees it.
	Job string
	// Interface is the network interface Gloo binds to; empty: $GLOO_SOCKET_IFNAME.
	Interface string
	// Host is the address Gloo binds to when there is no Interface; empty: 127.0.0.1 when the
	// store is on a loopback address or a file, else the address of the machine's host name.
	Host string
	// Backend is Gloo (the default when empty) or NCCL. In a build without NCCL, NCCL is an
	// ErrConfig error that also wraps errors.ErrUnsupported.
	Backend string
	// Device is this rank's GPU with the NCCL backend (its CUDA tensors must be there); unset
	// (not a CUDA device) or index -1: cuda:LocalRank, as torchrun's jobs place their ranks.
	// NCCL cannot run two ranks of a group on one GPU.
	Device cgotorch.Device
}

// config checks o and fills its defaults.
func (o Options) config() (Options, error) {
	if o.WorldSize < 1 || o.Rank < 0 || o.Rank >= o.WorldSize {
		return o, &Error{Op: "new group", Kind: ErrConfig, Err: fmt.Errorf("rank %d of world size %d", o.Rank, o.WorldSize)}
	}
	s := o.Store
	if s.path == "" && (s.host == "" || s.port < 1 || s.port > 65535) {
		return o, &Error{Op: "new group", Kind: ErrConfig, Err: fmt.Errorf("no store: give a TCPStore with a host and a port in 1..65535, or a FileStore")}
	}
	if o.Timeout < 0 {
		return o, &Error{Op: "new group", Kind: ErrConfig, Err: fmt.Errorf("negative timeout %v", o.Timeout)}
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	switch o.Backend {
	case "", Gloo:
		o.Backend = Gloo
	case NCCL:
		if !NCCLAvailable() {
			return o, &Error{Op: "new group", Kind: ErrConfig, Err: fmt.Errorf("backend %q: %w (build with the gorec_nccl tag "+
				"against a libtorch with CUDA and NCCL: make cuda-test-bins)", NCCL, errors.ErrUnsupported)}
		}
		if o.Device.Type != cgotorch.DeviceCUDA || o.Device.Index < 0 {
			o.Device = cgotorch.CUDA(o.LocalRank)
		}
	default:
		return o, &Error{Op: "new group", Kind: ErrConfig, Err: fmt.Errorf("unknown backend %q (want %q or %q)", o.Backend, Gloo, NCCL)}
	}
	if o.Interface == "" {
		o.Interface = os.Getenv("GLOO_SOCKET_IFNAME")
	}
	if o.Interface == "" && o.Host == "" && (s.path != "" || isLoopback(s.host)) {
		o.Host = "127.0.0.1"
	}
	return o, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// EnvOptions are the Options of torchrun's environment (and of Kubernetes' PyTorchJob, or
// anything that sets it): RANK, WORLD_SIZE, LOCAL_RANK (optional), MASTER_ADDR and
// MASTER_PORT (the TCPStore, which rank 0 serves), GLOO_SOCKET_IFNAME (optional),
// GOREC_DIST_BACKEND (optional: "gloo" or "nccl"; with NCCL the rank's GPU is cuda:LOCAL_RANK). The job's
// identity is $GOREC_JOB_ID, else torchrun's run id ($TORCHELASTIC_RUN_ID), else empty. When
// torchrun runs the store itself (TORCHELASTIC_USE_AGENT_STORE=True) every rank connects to it
// and the keys of this attempt ($TORCHELASTIC_RESTART_COUNT) are kept apart. Timeout is left
// zero (DefaultTimeout): set it on the result.
func EnvOptions() (Options, error) {
	var o Options
	num := func(name string, dst *int, required bool) error {
		v, ok := os.LookupEnv(name)
		if !ok {
			if required {
				return &Error{Op: "environment", Kind: ErrConfig, Err: fmt.Errorf("$%s is not set", name)}
			}
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return &Error{Op: "environment", Kind: ErrConfig, Err: fmt.Errorf("$%s=%q is not a number", name, v)}
		}
		*dst = n
		return nil
	}
	var port int
	for _, v := range []struct {
		name     string
		dst      *int
		required bool
	}{{"RANK", &o.Rank, true}, {"WORLD_SIZE", &o.WorldSize, true}, {"LOCAL_RANK", &o.LocalRank, false}, {"MASTER_PORT", &port, true}} {
		if err := num(v.name, v.dst, v.required); err != nil {
			return o, err
		}
	}
	host := os.Getenv("MASTER_ADDR")
	if host == "" {
		return o, &Error{Op: "environment", Kind: ErrConfig, Err: fmt.Errorf("$MASTER_ADDR is not set")}
	}
	o.Store = TCPStore(host, port)
	if os.Getenv("TORCHELASTIC_USE_AGENT_STORE") == "True" {
		o.Store.client = true
		o.Store.prefix = "/gorec/attempt_" + os.Getenv("TORCHELASTIC_RESTART_COUNT")
	}
	o.Backend = os.Getenv(EnvBackend)
	o.Job = os.Getenv("GOREC_JOB_ID")
	if o.Job == "" {
		o.Job = os.Getenv("TORCHELASTIC_RUN_ID")
	}
	return o, nil
}
