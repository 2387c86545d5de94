package outside

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorec/gorec/dist"
)

// knownDefect skips a test of a defect not yet fixed, unless GOREC_OUTSIDE_REPRO=1.
func knownDefect(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("GOREC_OUTSIDE_REPRO") != "1" {
		t.Skipf("known defect (GOREC_OUTSIDE_REPRO=1 runs it): %s", what)
	}
}

// runRanks runs the test named name again as n processes, the ranks of one group over a
// FileStore, with env added to their environment, and returns each rank's output and exit error.
func runRanks(t *testing.T, n int, name string, env ...string) ([]string, []error) {
	t.Helper()
	store := filepath.Join(t.TempDir(), "store")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outs, errs := make([]string, n), make([]error, n)
	bufs := make([]*lockedBuffer, n)
	var wg sync.WaitGroup
	for r := range n {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^"+name+"$", "-test.count=1", "-test.v")
		cmd.Env = append(append(os.Environ(), env...), "OUTSIDE_RANK="+strconv.Itoa(r), "OUTSIDE_WORLD="+strconv.Itoa(n), "OUTSIDE_STORE="+store)
		bufs[r] = &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = bufs[r], bufs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = cmd.Wait() }()
	}
	wg.Wait()
	for r := range n {
		outs[r] = bufs[r].String()
	}
	return outs, errs
}

// rankGroup is a child rank's group, or nil in the parent test.
func rankGroup(t *testing.T, timeout time.Duration) *dist.Group {
	t.Helper()
	rs := os.Getenv("OUTSIDE_RANK")
	if rs == "" {
		return nil
	}
	r, _ := strconv.Atoi(rs)
	w, _ := strconv.Atoi(os.Getenv("OUTSIDE_WORLD"))
	g, err := dist.New(dist.Options{Rank: r, WorldSize: w, Store: dist.FileStore(os.Getenv("OUTSIDE_STORE")), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// say prints a line the parent finds by its RANKn: prefix.
func say(g *dist.Group, format string, a ...any) {
	fmt.Printf("RANK%d: %s\n", g.Rank(), fmt.Sprintf(format, a...))
}

// rankLines are the lines of a rank's output that say printed.
func rankLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "RANK") || strings.Contains(l, "panic") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// oneRank is a group of one rank over a FileStore.
func oneRank(t *testing.T) *dist.Group {
	t.Helper()
	g, err := dist.New(dist.Options{WorldSize: 1, Store: dist.FileStore(filepath.Join(t.TempDir(), "store"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
