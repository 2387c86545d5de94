package dist

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
)

// Every collective's results on 2 and 3 ranks, over a FileStore and a TCPStore.
func TestCollectives(t *testing.T) {
	for _, kind := range []string{"file", "tcp"} {
		for _, world := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/%d", kind, world), func(t *testing.T) {
				requirePassed(t, launch(t, "collectives", world, store(t, kind), 30*time.Second, nil))
			})
		}
	}
}

// Collectives called from several goroutines at once on every rank.
func TestConcurrentCallers(t *testing.T) {
	requirePassed(t, launch(t, "concurrent", 2, store(t, "tcp"), 30*time.Second, nil))
}

// A rank killed mid-job (the last one, or rank 0, which serves the store and is the root of
// the broadcasts): the others get an error within the timeout and live on.
func TestKilledRank(t *testing.T) {
	for _, c := range []struct{ world, kill int }{{2, 1}, {3, 2}, {3, 0}} {
		t.Run(fmt.Sprintf("%d/kill%d", c.world, c.kill), func(t *testing.T) {
			res := launch(t, "killed", c.world, store(t, "tcp"), 5*time.Second, func(int) []string {
				return []string{"GOREC_DIST_KILL=" + fmt.Sprint(c.kill)}
			})
			for _, r := range res {
				if r.rank == c.kill {
					if !killedBySignal(r.err, syscall.SIGKILL) {
						t.Errorf("rank %d was not killed: %v\n%s", r.rank, r.err, r.output)
					}
					continue
				}
				requirePassed(t, []rankResult{r})
			}
			t.Log(res[(c.kill+1)%c.world].output)
		})
	}
}

// A rank that skips a collective: the others time out.
func TestSkippedCollective(t *testing.T) {
	res := launch(t, "skip", 2, store(t, "file"), 2*time.Second, nil)
	requirePassed(t, res)
	t.Log(res[0].output)
}

// A rank of another job or world size is refused on every rank.
func TestRefusedRanks(t *testing.T) {
	for _, scenario := range []string{"other-job", "other-world"} {
		for _, kind := range []string{"file", "tcp"} {
			t.Run(scenario+"/"+kind, func(t *testing.T) {
				res := launch(t, scenario, 2, store(t, kind), 10*time.Second, nil)
				requirePassed(t, res)
				t.Log(res[0].output, res[1].output)
			})
		}
	}
}

// Calls that do not match across ranks fail on every rank, and the group stays usable.
func TestDisagreeingCalls(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			res := launch(t, "disagree", world, store(t, "file"), 10*time.Second, nil)
			requirePassed(t, res)
			if world == 2 {
				t.Log(res[0].output)
			}
		})
	}
}

// The collectives on 2 ranks started by torchrun (python3-torch ships it), through FromEnv's
// reading of its environment.
func TestTorchrunLaunch(t *testing.T) {
	torchrun, err := exec.LookPath("torchrun")
	if err != nil {
		t.Skip("no torchrun (python3-torch) on this machine")
	}
	// torchrun serves the ranks' store itself, speaking its own torch's TCPStore protocol: with
	// another libtorch line (a LIBTORCH build against Debian's torchrun) the ranks cannot talk
	// to it, as with any mixed-version job.
	if v, mine := torchrunTorchVersion(t, torchrun), cgotorch.TorchVersion(); majorMinor(v) != majorMinor(mine) {
		t.Skipf("torchrun runs torch %s, this binary libtorch %s", v, mine)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// --redirects 1 --tee 1: Debian's torchrun 1.13 under Python 3.11 fails on the default "0"
	// (its Std.from_str finds no member for 0).
	cmd := exec.CommandContext(ctx, torchrun, "--no_python", "--nproc_per_node", "2",
		"--redirects", "1", "--tee", "1", "--log_dir", t.TempDir(),
		"--master_addr", "127.0.0.1", "--master_port", strings.TrimPrefix(store(t, "tcp"), "tcp:127.0.0.1:"),
		os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envScenario+"=collectives", envStore+"=env", envTimeout+"=30s",
		"GOREC_JOB_ID=torchrun-test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("torchrun: %v\n%s", err, out)
	}
	for _, want := range []string{"rank 0: ok", "rank 1: ok"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("torchrun's output lacks %q:\n%s", want, out)
		}
	}
}

// torchrunTorchVersion is the torch version of the Python that runs torchrun (its #! line).
func torchrunTorchVersion(t *testing.T, torchrun string) string {
	script, err := os.ReadFile(torchrun)
	if err != nil {
		t.Skip(err)
	}
	line, _, _ := strings.Cut(string(script), "\n")
	python := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(python) == 0 {
		t.Skipf("%s has no #! line", torchrun)
	}
	out, err := exec.Command(python[0], append(python[1:], "-c", "import torch; print(torch.__version__)")...).Output()
	if err != nil {
		t.Skipf("torchrun's Python has no torch: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// majorMinor is "1.13" of "1.13.0a0+gitunknown".
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}
