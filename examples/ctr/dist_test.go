package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDistributed runs the README's command, the example on 2 local processes under torchrun
// (or, without torchrun, 2 processes given RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT), on
// a short stream: the training loss must fall, the model must learn (AUC above 0.65), and the
// ranks must end with the same MLP weights and held-out AUC (the program checks it and fails
// otherwise). With -pipeline (dist.TrainPipeline) and with -fetch (dist.TrainStep) it must
// train exactly as without: the same held-out metrics (the pipeline's training loss lines
// cover the batches trained so far, one fewer). The plain loop must call as many collectives a
// step as -fetch: its collection fetches every table's rows in one exchange, as TrainStep does.
func TestDistributed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example and runs it on 2 processes")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ctr")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	args := []string{"-dist", "-train", "40000", "-test", "8000", "-report", "10000", "-lr", "0.01", "-dense-lr", "0.001"}
	plain := runDistributed(t, bin, filepath.Join(dir, "plain"), args)
	piped := runDistributed(t, bin, filepath.Join(dir, "pipelined"), append(args, "-pipeline"))
	fetched := runDistributed(t, bin, filepath.Join(dir, "fetched"), append(args, "-fetch"))
	heldOut := regexp.MustCompile(`model +AUC [0-9.]+ +log-loss [0-9.]+`) // (a training loss line's batches lag by one)
	if a, b := heldOut.FindString(piped), heldOut.FindString(plain); a == "" || a != b {
		t.Errorf("-pipeline trains otherwise: %q, want %q", a, b)
	}
	if a, b := heldOut.FindString(fetched), heldOut.FindString(plain); a == "" || a != b {
		t.Errorf("-fetch trains otherwise: %q, want %q", a, b)
	}
	calls := regexp.MustCompile(`collectives: [0-9.]+ a training step`)
	if a, b := calls.FindString(plain), calls.FindString(fetched); a == "" || a != b {
		t.Errorf("the plain loop: %q, want as many as -fetch: %q", a, b)
	}
}

// runDistributed runs bin with args on 2 ranks (logs under dir), checks rank 0's output, and
// returns it.
func runDistributed(t *testing.T, bin, dir string, args []string) string {
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out string
	if torchrun, err := exec.LookPath("torchrun"); err == nil {
		cmd := exec.CommandContext(ctx, torchrun, append([]string{"--no_python", "--nproc_per_node", "2",
			"--redirects", "1", "--tee", "1", "--log_dir", filepath.Join(dir, "logs"),
			"--master_addr", "127.0.0.1", "--master_port", port, bin}, args...)...)
		b, err := cmd.CombinedOutput()
		if out = string(b); err != nil {
			t.Fatalf("torchrun: %v\n%s", err, out)
		}
	} else {
		out = runRanks(ctx, t, bin, port, args)
	}
	t.Log("\n" + out)
	var losses []float64
	for _, m := range regexp.MustCompile(`samples/s  log-loss ([0-9.]+)`).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		losses = append(losses, v)
	}
	if len(losses) != 4 || !(losses[3] < losses[0]) {
		t.Errorf("training log-losses %v: want 4 reports, the last below the first", losses)
	}
	m := regexp.MustCompile(`model      AUC ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no held-out AUC in rank 0's output")
	}
	if v, _ := strconv.ParseFloat(m[1], 64); !(v > 0.65) {
		t.Errorf("held-out AUC %v, want above 0.65", v)
	}
	for _, want := range []string{"distributed: 2 ranks", "the 2 ranks agree"} {
		if !strings.Contains(out, want) {
			t.Errorf("rank 0's output lacks %q", want)
		}
	}
	return out
}

// runRanks runs bin as the 2 ranks of a job through the plain environment and returns their
// output (rank 0's first).
func runRanks(ctx context.Context, t *testing.T, bin, port string, args []string) string {
	cmds := make([]*exec.Cmd, 2)
	outs := make([]strings.Builder, 2)
	for r := range cmds {
		cmds[r] = exec.CommandContext(ctx, bin, args...)
		cmds[r].Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "WORLD_SIZE=2",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port, "GOREC_JOB_ID=ctr-test")
		cmds[r].Stdout, cmds[r].Stderr = &outs[r], &outs[r]
		if err := cmds[r].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, outs[r].String())
		}
	}
	return outs[0].String() + outs[1].String()
}

// freePort is a TCP port free on the loopback interface now.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
