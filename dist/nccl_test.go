package dist

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
)

// The backend option: unknown names and NCCL in a build without it are ErrConfig errors (the
// latter wrapping errors.ErrUnsupported), and NCCL's device defaults to cuda:LocalRank.
func TestBackendOption(t *testing.T) {
	base := Options{WorldSize: 2, Rank: 1, LocalRank: 1, Store: FileStore(filepath.Join(t.TempDir(), "store"))}
	o := base
	o.Backend = "mpi"
	if _, err := New(o); !errors.Is(err, ErrConfig) {
		t.Errorf("backend mpi: got %v, want %v", err, ErrConfig)
	}
	o.Backend = ""
	if c, err := o.config(); err != nil || c.Backend != Gloo {
		t.Errorf("no backend: got %q, %v; want %q", c.Backend, err, Gloo)
	}
	o.Backend = NCCL
	c, err := o.config()
	if !NCCLAvailable() {
		if !errors.Is(err, ErrConfig) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("nccl in a build without it: got %v, want %v and %v", err, ErrConfig, errors.ErrUnsupported)
		}
		if _, err := New(o); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("New with nccl in a build without it: got %v, want %v", err, errors.ErrUnsupported)
		}
		return
	}
	if err != nil || c.Device != cgotorch.CUDA(1) {
		t.Errorf("nccl on local rank 1: got device %v, %v; want cuda:1", c.Device, err)
	}
	o.Device = cgotorch.CUDA(0)
	if c, err := o.config(); err != nil || c.Device != cgotorch.CUDA(0) {
		t.Errorf("nccl on cuda:0: got device %v, %v", c.Device, err)
	}
}

// EnvOptions takes the backend from $GOREC_DIST_BACKEND.
func TestEnvBackend(t *testing.T) {
	for k, v := range map[string]string{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
		"MASTER_PORT": "29500", EnvBackend: NCCL} {
		t.Setenv(k, v)
	}
	o, err := EnvOptions()
	if err != nil || o.Backend != NCCL {
		t.Errorf("got backend %q, %v; want %q", o.Backend, err, NCCL)
	}
}

// needNCCL skips t unless this build has NCCL and the machine has gpus GPUs.
func needNCCL(t *testing.T, gpus int) {
	t.Helper()
	if !NCCLAvailable() {
		t.Skip("this build has no NCCL (make cuda-test-bins builds it with the gorec_nccl tag)")
	}
	if n := cgotorch.CUDADeviceCount(); n < gpus {
		t.Skipf("%d GPUs, the test needs %d (NCCL cannot run two ranks on one GPU)", n, gpus)
	}
}

// One rank on cuda:0 with NCCL: every collective of CUDA tensors returns CUDA tensors of the
// right values, CPU tensors still go through Gloo, and tensors of another GPU, or CUDA tensors
// on a Gloo group, are refused with ErrInvalidArgument and leave the group usable.
func TestNCCLSingleRank(t *testing.T) {
	needNCCL(t, 1)
	g, err := New(Options{WorldSize: 1, Store: FileStore(filepath.Join(t.TempDir(), "store")), Timeout: 30 * time.Second,
		Job: "nccl", Backend: NCCL})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Device() != cgotorch.CUDA(0) || g.Backend() != NCCL {
		t.Fatalf("group on %v with %q, want cuda:0 with nccl", g.Device(), g.Backend())
	}
	if err := scenarioCollectives(Options{WorldSize: 1, Store: FileStore(filepath.Join(t.TempDir(), "store2")),
		Timeout: 30 * time.Second, Backend: NCCL}); err != nil {
		t.Error(err)
	}
	cpu := tensor([]float32{1, 2, 3, 4}, 2, 2)
	defer cpu.Close()
	x := placed(g, tensor([]float32{1, 2, 3, 4}, 2, 2))
	defer x.Close()
	out, recv, err := g.AllToAll(x, []int64{2})
	if got, err := values(out, err); err != nil || !reflect.DeepEqual(got, []float64{1, 2, 3, 4}) || !reflect.DeepEqual(recv, []int64{2}) {
		t.Errorf("all-to-all on cuda:0: %v %v %v", got, recv, err)
	}
	sum, err := g.AllReduce(cpu, Sum)
	if err == nil && sum.Device().Type != cgotorch.DeviceCPU {
		err = fmt.Errorf("on %v", sum.Device())
	}
	if got, err := values(sum, err); err != nil || !reflect.DeepEqual(got, []float64{1, 2, 3, 4}) {
		t.Errorf("all-reduce of a CPU tensor in an NCCL group: %v %v", got, err)
	}
	if cgotorch.CUDADeviceCount() > 1 {
		other, err := cpu.To(cgotorch.CUDA(1), cgotorch.KeepDType)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := g.AllReduce(other, Sum); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("all-reduce of a cuda:1 tensor in a cuda:0 group: got %v, want %v", err, ErrInvalidArgument)
		}
	}
	gloo := newSingle(t)
	if _, err := gloo.AllReduce(x, Sum); !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrBroken) {
		t.Errorf("CUDA tensor on a Gloo group: got %v, want %v", err, ErrInvalidArgument)
	}
	if err := errors.Join(g.Barrier(), gloo.Barrier()); err != nil {
		t.Errorf("barrier after refused calls: %v", err)
	}
}

// launchNCCL runs scenario on 2 ranks with the NCCL backend, rank r on cuda:r.
func launchNCCL(t *testing.T, scenario string, timeout time.Duration, extra ...string) []rankResult {
	return launch(t, scenario, 2, store(t, "tcp"), timeout, func(int) []string {
		return append([]string{EnvBackend + "=" + NCCL}, extra...)
	})
}

// Two ranks on two GPUs: every collective's results on CUDA tensors (scenarioCollectives).
func TestNCCLCollectives(t *testing.T) {
	needNCCL(t, 2)
	requirePassed(t, launchNCCL(t, "collectives", 60*time.Second))
}

// Two ranks on two GPUs: a rank killed mid-broadcast, or one that skips an all-reduce, makes
// the other fail within the timeout (ErrPeer or ErrTimeout), never hang or crash.
func TestNCCLFailures(t *testing.T) {
	needNCCL(t, 2)
	res := launchNCCL(t, "killed", 10*time.Second, "GOREC_DIST_KILL=1")
	if !killedBySignal(res[1].err, syscall.SIGKILL) {
		t.Errorf("rank 1 was not killed: %v\n%s", res[1].err, res[1].output)
	}
	requirePassed(t, res[:1])
	requirePassed(t, launchNCCL(t, "skip", 5*time.Second))
}

// Two ranks on two GPUs: a CPU tensor on one rank and a CUDA tensor on the other fail with
// ErrMismatch on both, nothing sent, and the group stays usable.
func TestNCCLMixedDevices(t *testing.T) {
	needNCCL(t, 2)
	requirePassed(t, launchNCCL(t, "nccl-mixed", 30*time.Second))
}

// scenarioNCCLMixed: rank 0 all-reduces a CPU tensor, the others a CUDA one.
func scenarioNCCLMixed(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	x := tensor([]float32{1, 2})
	defer x.Close()
	y := placed(g, tensor([]float32{1, 2}))
	defer y.Close()
	mine := y
	if g.Rank() == 0 {
		mine = x
	}
	if _, err := g.AllReduce(mine, Sum); !errors.Is(err, ErrMismatch) || errors.Is(err, ErrBroken) {
		return fmt.Errorf("all-reduce of a CPU and a CUDA tensor: got %v, want %v", err, ErrMismatch)
	}
	got, err := values(g.AllReduce(y, Sum))
	return expect("all-reduce after the mismatch", got, err, []float64{float64(g.WorldSize()), float64(2 * g.WorldSize())})
}

func init() { scenarios["nccl-mixed"] = scenarioNCCLMixed }
