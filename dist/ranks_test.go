package dist

// The multi-process tests: the test binary runs itself again as the ranks of a group (TestMain
// sees $GOREC_DIST_SCENARIO and runs that scenario as one rank instead of the tests).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	envScenario = "GOREC_DIST_SCENARIO" // the scenario a rank runs
	envStore    = "GOREC_DIST_STORE"    // "file:PATH", "tcp:HOST:PORT" or "env" (torchrun's)
	envRank     = "GOREC_DIST_RANK"
	envWorld    = "GOREC_DIST_WORLD"
	envTimeout  = "GOREC_DIST_TIMEOUT" // a time.Duration
)

func TestMain(m *testing.M) {
	if name := os.Getenv(envScenario); name != "" {
		os.Exit(runRank(name))
	}
	os.Exit(m.Run())
}

// rankOptions are the Options a rank process was started with.
func rankOptions() (Options, error) {
	timeout, err := time.ParseDuration(os.Getenv(envTimeout))
	if err != nil {
		return Options{}, fmt.Errorf("$%s: %v", envTimeout, err)
	}
	store := os.Getenv(envStore)
	if store == "env" {
		o, err := EnvOptions()
		o.Timeout = timeout
		return o, err
	}
	o := Options{Timeout: timeout, Job: "test"}
	if o.Rank, err = strconv.Atoi(os.Getenv(envRank)); err != nil {
		return o, err
	}
	if o.WorldSize, err = strconv.Atoi(os.Getenv(envWorld)); err != nil {
		return o, err
	}
	o.LocalRank, o.Backend = o.Rank, os.Getenv(EnvBackend) // one machine: a GPU per rank (NCCL)
	switch {
	case strings.HasPrefix(store, "file:"):
		o.Store = FileStore(strings.TrimPrefix(store, "file:"))
	case strings.HasPrefix(store, "tcp:"):
		host, port, err := net.SplitHostPort(strings.TrimPrefix(store, "tcp:"))
		if err != nil {
			return o, err
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return o, err
		}
		o.Store = TCPStore(host, p)
	default:
		return o, fmt.Errorf("$%s=%q", envStore, store)
	}
	return o, nil
}

// runRank runs one rank of a scenario; the exit code says whether it passed.
func runRank(name string) int {
	f, ok := scenarios[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", name)
		return 2
	}
	o, err := rankOptions()
	if err == nil {
		err = f(o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: FAIL: %v\n", o.Rank, err)
		return 1
	}
	fmt.Printf("rank %d: ok\n", o.Rank)
	return 0
}

// rankResult is how a rank process ended.
type rankResult struct {
	rank   int
	err    error // nil: exit 0
	output string
}

// store names where a test's ranks meet: a new FileStore in a temporary directory, or a
// TCPStore on a free loopback port.
func store(t testing.TB, kind string) string {
	t.Helper()
	if kind == "file" {
		return "file:" + filepath.Join(t.TempDir(), "store")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "tcp:" + l.Addr().String()
}

// launch runs scenario as world ranks meeting through storeSpec, with the group timeout given,
// and waits for all of them (killing them after a minute). extra adds environment variables
// to a rank.
func launch(t testing.TB, scenario string, world int, storeSpec string, timeout time.Duration, extra func(rank int) []string) []rankResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type proc struct {
		cmd *exec.Cmd
		out bytes.Buffer
	}
	procs := make([]*proc, world)
	for r := range procs {
		p := &proc{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), envScenario+"="+scenario, envStore+"="+storeSpec,
			envRank+"="+strconv.Itoa(r), envWorld+"="+strconv.Itoa(world), envTimeout+"="+timeout.String())
		if extra != nil {
			p.cmd.Env = append(p.cmd.Env, extra(r)...)
		}
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[r] = p
	}
	res := make([]rankResult, world)
	for r, p := range procs {
		res[r] = rankResult{rank: r, err: p.cmd.Wait(), output: p.out.String()}
	}
	if ctx.Err() != nil {
		t.Errorf("%s: the ranks were killed after a minute", scenario)
	}
	return res
}

// requirePassed fails t unless every rank exited 0.
func requirePassed(t *testing.T, res []rankResult) {
	t.Helper()
	for _, r := range res {
		if r.err != nil {
			t.Errorf("rank %d: %v\n%s", r.rank, r.err, r.output)
		}
	}
}

// killedBySignal reports whether a rank's process ended by sig.
func killedBySignal(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
