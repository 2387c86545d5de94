package dist

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
)

// newSingle starts a group of one rank over a new FileStore.
func newSingle(t *testing.T) *Group {
	t.Helper()
	g, err := New(Options{WorldSize: 1, Store: FileStore(filepath.Join(t.TempDir(), "store")), Timeout: 10 * time.Second, Job: "single"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// One rank: the collectives return the input (average and max included), invalid arguments
// fail with ErrInvalidArgument and leave the group usable, Close is idempotent and ends it.
func TestSingleRank(t *testing.T) {
	g := newSingle(t)
	x := tensor([]float32{1, 2, 3, 4}, 2, 2)
	defer x.Close()
	for _, op := range []ReduceOp{Sum, Avg, Max} {
		got, err := values(g.AllReduce(x, op))
		if err := expect("all-reduce", got, err, []float64{1, 2, 3, 4}); err != nil {
			t.Error(err)
		}
	}
	got, err := values(g.Broadcast(x, 0))
	if err := expect("broadcast", got, err, []float64{1, 2, 3, 4}); err != nil {
		t.Error(err)
	}
	got, err = values(g.AllGather(x))
	if err := expect("all-gather", got, err, []float64{1, 2, 3, 4}); err != nil {
		t.Error(err)
	}
	out, recv, err := g.AllToAll(x, []int64{2})
	got, err = values(out, err)
	if err := expect("all-to-all", got, err, []float64{1, 2, 3, 4}); err != nil || !reflect.DeepEqual(recv, []int64{2}) {
		t.Error(err, recv)
	}
	n := tensor([]int64{1})
	defer n.Close()
	closed := tensor([]float32{1})
	closed.Close()
	bad := []struct {
		what string
		err  error
		want error
	}{
		{"average of integers", second(g.AllReduce(n, Avg)), ErrInvalidArgument},
		{"unknown reduction", second(g.AllReduce(x, ReduceOp(7))), ErrInvalidArgument},
		{"root out of range", second(g.Broadcast(x, 1)), ErrInvalidArgument},
		{"nil tensor", second(g.AllGather(nil)), ErrClosed},
		{"closed tensor", second(g.AllReduce(closed, Sum)), ErrClosed},
		{"splits past the rows", third(g.AllToAll(x, []int64{3})), ErrInvalidArgument},
		{"two splits for one rank", third(g.AllToAll(x, []int64{1, 1})), ErrInvalidArgument},
		{"no splits", third(g.AllToAll(x, nil)), ErrInvalidArgument},
		{"negative split", third(g.AllToAll(x, []int64{-1})), ErrInvalidArgument},
	}
	for _, b := range bad {
		if !errors.Is(b.err, b.want) || errors.Is(b.err, ErrBroken) {
			t.Errorf("%s: got %v, want %v and an unbroken group", b.what, b.err, b.want)
		}
	}
	if err := g.Barrier(); err != nil {
		t.Errorf("barrier after refused calls: %v", err)
	}
	g.Close()
	g.Close()
	if err := g.Barrier(); !errors.Is(err, ErrClosed) {
		t.Errorf("barrier after Close: got %v, want %v", err, ErrClosed)
	}
}

func second(_ *cgotorch.Tensor, err error) error           { return err }
func third(_ *cgotorch.Tensor, _ []int64, err error) error { return err }

// Collectives and Close from several goroutines at once (run with -race).
func TestSingleRankConcurrent(t *testing.T) {
	g := newSingle(t)
	x := tensor([]float32{1, 2})
	defer x.Close()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				y, err := g.AllReduce(x, Sum)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				y.Close()
				if i == 0 && j == 10 {
					g.Close()
				}
			}
		}()
	}
	wg.Wait()
}

// A second process claiming a rank of a running group is refused; Gloo binds to a named
// interface, and a missing one is an invalid argument; a group whose ranks do not all come
// fails with ErrTimeout within its timeout.
func TestStartFailures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	g, err := New(Options{WorldSize: 1, Store: FileStore(path), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := New(Options{WorldSize: 1, Store: FileStore(path), Timeout: 5 * time.Second}); !errors.Is(err, ErrRefused) {
		t.Errorf("a rank claimed twice: got %v, want %v", err, ErrRefused)
	}
	lo, err := New(Options{WorldSize: 1, Store: FileStore(filepath.Join(t.TempDir(), "store")), Interface: "lo"})
	if err != nil {
		t.Errorf("Gloo on interface lo: %v", err)
	} else {
		lo.Close()
	}
	_, err = New(Options{WorldSize: 1, Store: FileStore(filepath.Join(t.TempDir(), "store")), Interface: "nonexistent0"})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Gloo on a missing interface: got %v, want %v", err, ErrInvalidArgument)
	}
	start := time.Now()
	_, err = New(Options{WorldSize: 2, Store: FileStore(filepath.Join(t.TempDir(), "store")), Timeout: time.Second})
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 5*time.Second {
		t.Errorf("a rank that never comes: got %v after %v, want %v after about 1s", err, time.Since(start), ErrTimeout)
	}
}

func TestOptionsChecked(t *testing.T) {
	file := FileStore(filepath.Join(t.TempDir(), "store"))
	for _, o := range []Options{
		{WorldSize: 0, Store: file},
		{Rank: 2, WorldSize: 2, Store: file},
		{Rank: -1, WorldSize: 2, Store: file},
		{WorldSize: 1},
		{WorldSize: 1, Store: TCPStore("127.0.0.1", 0)},
		{WorldSize: 1, Store: TCPStore("", 29500)},
		{WorldSize: 1, Store: file, Timeout: -time.Second},
	} {
		if _, err := New(o); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want %v", o, err, ErrConfig)
		}
	}
	t.Setenv("GLOO_SOCKET_IFNAME", "")
	for _, c := range []struct {
		store Store
		host  string
	}{{file, "127.0.0.1"}, {TCPStore("127.0.0.1", 1), "127.0.0.1"}, {TCPStore("localhost", 1), "127.0.0.1"}, {TCPStore("10.0.0.1", 1), ""}} {
		o, err := Options{WorldSize: 1, Store: c.store}.config()
		if err != nil || o.Host != c.host || o.Timeout != DefaultTimeout {
			t.Errorf("%+v: host %q, timeout %v, %v; want host %q", c.store, o.Host, o.Timeout, err, c.host)
		}
	}
	t.Setenv("GLOO_SOCKET_IFNAME", "eth1")
	if o, _ := (Options{WorldSize: 1, Store: file}).config(); o.Interface != "eth1" || o.Host != "" {
		t.Errorf("GLOO_SOCKET_IFNAME: interface %q, host %q", o.Interface, o.Host)
	}
}

func TestEnvOptions(t *testing.T) {
	env := map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.1.2.3",
		"MASTER_PORT": "29501", "TORCHELASTIC_RUN_ID": "run7", "GOREC_JOB_ID": "", "TORCHELASTIC_USE_AGENT_STORE": ""}
	for k, v := range env {
		t.Setenv(k, v)
	}
	o, err := EnvOptions()
	want := Options{Rank: 1, WorldSize: 4, LocalRank: 1, Store: TCPStore("10.1.2.3", 29501), Job: "run7"}
	if err != nil || !reflect.DeepEqual(o, want) {
		t.Errorf("got %+v, %v; want %+v", o, err, want)
	}
	t.Setenv("GOREC_JOB_ID", "job9")
	t.Setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
	t.Setenv("TORCHELASTIC_RESTART_COUNT", "2")
	o, err = EnvOptions()
	want.Job = "job9"
	want.Store.client, want.Store.prefix = true, "/gorec/attempt_2"
	if err != nil || !reflect.DeepEqual(o, want) {
		t.Errorf("agent store: got %+v, %v; want %+v", o, err, want)
	}
	for k, v := range map[string]string{"RANK": "x", "WORLD_SIZE": "", "MASTER_ADDR": "", "MASTER_PORT": "p"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			if _, err := EnvOptions(); !errors.Is(err, ErrConfig) {
				t.Errorf("$%s=%q: got %v, want %v", k, v, err, ErrConfig)
			}
			if _, err := FromEnv(); !errors.Is(err, ErrConfig) {
				t.Errorf("FromEnv with $%s=%q: got %v, want %v", k, v, err, ErrConfig)
			}
		})
	}
}

// Rank 0's TCPStore server listens on the store's address only where libtorch takes a listening
// socket (2.x): then the port is closed on this machine's other addresses. libtorch 1.x's c10d
// listens on every interface.
func TestStoreBindsAddress(t *testing.T) {
	if !StoreBindsAddress() {
		if v := cgotorch.TorchVersion(); !strings.HasPrefix(v, "1.") {
			t.Errorf("libtorch %s: the store server should take a bound socket", v)
		}
		t.Skipf("libtorch %s's TCPStore listens on every interface", cgotorch.TorchVersion())
	}
	other := nonLoopbackAddress(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	g, err := New(Options{WorldSize: 1, Store: TCPStore("127.0.0.1", port), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(other, fmt.Sprint(port)), time.Second); err == nil {
		c.Close()
		t.Errorf("the store's port %d answers on %s, not only on 127.0.0.1", port, other)
	}
}

// nonLoopbackAddress is one of this machine's addresses other than loopback (the test skips
// without one).
func nonLoopbackAddress(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			return ip.IP.String()
		}
	}
	t.Skip("no address but loopback")
	return ""
}
