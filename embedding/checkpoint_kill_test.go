package embedding_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/gorec/gorec/embedding"
)

const killDirEnv = "GOREC_KILL_SAVE_DIR"

// killTable is the table the child saves over and over: every update steps all its rows with
// gradient 1, so every consistent checkpoint has each Adagrad sum equal to its step.
func killTable(t testing.TB) (*embedding.Table, []int64, []float32) {
	tbl, err := embedding.NewNamed("kill", embedding.Config{Dim: 8, Optimizer: embedding.Adagrad{LR: 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 50_000)
	g := make([]float32, 8*len(ids))
	for i := range ids {
		ids[i] = int64(i)*1_000_003 - 7
	}
	for i := range g {
		g[i] = 1
	}
	return tbl, ids, g
}

// TestKillDuringSaveChild is the child of TestKillDuringSave: it updates and saves forever.
func TestKillDuringSaveChild(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("the child process of TestKillDuringSave")
	}
	tbl, ids, g := killTable(t)
	defer tbl.Close()
	if err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{tbl}, nil); err != nil && !errors.Is(err, embedding.ErrNotFound) {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		if err := tbl.UpdateIDs(ids, g); err != nil {
			t.Fatal(err)
		}
		if err := embedding.Save(context.Background(), dir, tbl); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("saved at %v\n", time.Since(start))
	}
}

// TestKillDuringSave re-executes the test binary as a child that saves a checkpoint in a loop,
// kills it (SIGKILL) at random moments, and loads the checkpoint after each kill: it must load
// and be consistent, and the steps seen must move on.
func TestKillDuringSave(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	tbl, ids, g := killTable(t)
	if err := tbl.UpdateIDs(ids, g); err != nil {
		t.Fatal(err)
	}
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	tbl.Close()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	prev := int64(1)
	const kills = 10
	for i := 0; i < kills; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringSaveChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), killDirEnv+"="+dir)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Once the child has saved once (it has loaded the previous checkpoint and is up to
		// speed), kill it at a random moment of the saves that follow (one takes ~100 ms).
		sc := bufio.NewScanner(pipe)
		first := sc.Scan()
		time.Sleep(time.Duration(r.IntN(400)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		go io.Copy(io.Discard, pipe)
		cmd.Wait()
		if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !first || !ok || !st.Signaled() {
			t.Fatalf("the child did not run until killed: %v\n%s", cmd.ProcessState, errOut.String())
		}
		step := checkUniformSum(t, dir)
		if step < prev {
			t.Fatalf("kill %d: loaded step %d after step %d", i, step, prev)
		}
		prev = step
	}
	t.Logf("%d kills; the last checkpoint loaded is of step %d", kills, prev)
	if prev < kills {
		t.Errorf("the children completed too few saves between kills: step %d", prev)
	}
}
