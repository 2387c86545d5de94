package embedding_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// A crash-consistency check beyond SIGKILL, in the spirit of ALICE: a save is recorded at the
// system-call level (strace: creations, fsyncs, renames, unlinks), and every state a crash
// could leave on disk is rebuilt from the recording and loaded. A crash after the k-th call
// loses what was never made durable: a file's data survives only if the file was fsynced
// before the crash (its data is then what the save wrote, since a save writes each file whole
// before its fsync; an unsynced file is empty), and a creation, rename or unlink in the
// directory survives only if the directory was fsynced after it, or (a second state per k)
// survives anyway, since a file system may persist it early. Every state must load, with the
// contents of the checkpoint before the save or of the one it wrote.

const crashDirEnv = "GOREC_CRASH_SAVE_DIR"

// crashTable is the table of TestCrashReplay, under the same name in both processes.
func crashTable(t *testing.T) *embedding.Table {
	tbl, err := embedding.NewNamed("crash", embedding.Config{Dim: 3, Optimizer: embedding.Adagrad{LR: 0.1}, BlockRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// TestCrashReplayChild is the child of TestCrashReplay: it loads the checkpoint in its
// directory, trains a step and saves it again, under strace.
func TestCrashReplayChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child process of TestCrashReplay")
	}
	tbl := crashTable(t)
	defer tbl.Close()
	if err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{tbl}, nil); err != nil {
		t.Fatal(err)
	}
	update(t, tbl, []int64{1, 2, 9}, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
}

// crashOp is one recorded call on the checkpoint directory: create, fsync (of a file, or of
// the directory when path is ""), rename (to path2) or unlink; paths relative to it.
type crashOp struct{ kind, path, path2 string }

var (
	straceCall = regexp.MustCompile(`^(?:\d+ +)?(\w+)\((.*)\) += (-?\d+)`)
	straceStr  = regexp.MustCompile(`"([^"]*)"`)
	straceFd   = regexp.MustCompile(`^\d+<([^>]*)>`)
)

// readStrace turns strace -f -y's log into the calls on dir (joining calls another thread
// interrupted: "<unfinished ...>" and "<... resumed>").
func readStrace(t *testing.T, log, dir string) []crashOp {
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rel := func(p string) (string, bool) {
		if filepath.Dir(p) != dir {
			return "", false
		}
		return filepath.Base(p), true
	}
	pending := map[string]string{}
	var ops []crashOp
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pid, _, _ := strings.Cut(line, " ")
		if i := strings.Index(line, " <unfinished ...>"); i >= 0 {
			pending[pid] = line[:i]
			continue
		}
		if i := strings.Index(line, " resumed>"); i >= 0 {
			line = pending[pid] + line[i+len(" resumed>"):]
			delete(pending, pid)
		}
		m := straceCall.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[3], "-") {
			continue
		}
		args, strs := m[2], straceStr.FindAllStringSubmatch(m[2], -1)
		switch m[1] {
		case "openat":
			if len(strs) > 0 && strings.Contains(args, "O_CREAT") {
				if p, ok := rel(strs[0][1]); ok {
					ops = append(ops, crashOp{kind: "create", path: p})
				}
			}
		case "fsync", "fdatasync":
			if fd := straceFd.FindStringSubmatch(args); fd != nil {
				if fd[1] == dir {
					ops = append(ops, crashOp{kind: "fsync"})
				} else if p, ok := rel(fd[1]); ok {
					ops = append(ops, crashOp{kind: "fsync", path: p})
				}
			}
		case "rename", "renameat", "renameat2":
			if len(strs) >= 2 {
				a, okA := rel(strs[0][1])
				b, okB := rel(strs[1][1])
				if okA && okB {
					ops = append(ops, crashOp{kind: "rename", path: a, path2: b})
				}
			}
		case "unlink", "unlinkat":
			if len(strs) > 0 {
				if p, ok := rel(strs[0][1]); ok {
					ops = append(ops, crashOp{kind: "unlink", path: p})
				}
			}
		}
	}
	return ops
}

// readDir is dir's files and their contents.
func readDir(t *testing.T, dir string) map[string][]byte {
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// crashState is the directory a crash after ops[:k] leaves (see the top of this file): entry
// operations made durable by a later fsync of the directory, or all of them (early).
func crashState(before, after map[string][]byte, ops []crashOp, k int, early bool) map[string][]byte {
	files := map[string][]byte{}
	for n, b := range before {
		files[n] = b
	}
	lastDirSync := -1
	for i, op := range ops[:k] {
		if op.kind == "fsync" && op.path == "" {
			lastDirSync = i
		}
	}
	for i, op := range ops[:k] {
		durable := early || i < lastDirSync
		switch {
		case op.kind == "fsync" || !durable:
		case op.kind == "create":
			// Its data if fsynced before the crash: what it holds in the end, under the name
			// its renames give it.
			final := op.path
			for _, r := range ops[i:] {
				if r.kind == "rename" && r.path == final {
					final = r.path2
				}
			}
			files[op.path] = nil
			if crashSynced(ops[:k], op.path) {
				files[op.path] = after[final]
			}
		case op.kind == "rename":
			if b, ok := files[op.path]; ok {
				files[op.path2] = b
				delete(files, op.path)
			}
		case op.kind == "unlink":
			delete(files, op.path)
		}
	}
	return files
}

// crashSynced: whether ops fsync path (before any rename of it).
func crashSynced(ops []crashOp, path string) bool {
	for _, op := range ops {
		if op.kind == "fsync" && op.path == path {
			return true
		}
	}
	return false
}

// TestCrashReplay records a save under strace and loads every state a crash during it could
// leave, dropping what was never fsynced: each loads the previous checkpoint or the new one,
// and both occur.
func TestCrashReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process under strace")
	}
	straceBin, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	dir := t.TempDir()
	tbl := crashTable(t)
	update(t, tbl, []int64{1, 2, 3}, 1, 1, 1, 2, 2, 2, 3, 3, 3)
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	tbl.Close()
	before := readDir(t, dir)
	log := filepath.Join(t.TempDir(), "strace.log")
	cmd := exec.Command(straceBin, "-f", "-qq", "-y", "-o", log,
		"-e", "trace=openat,fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat",
		os.Args[0], "-test.run=^TestCrashReplayChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "ptrace") {
			t.Skipf("strace cannot trace here: %s", out)
		}
		t.Fatalf("the child under strace: %v: %s", err, out)
	}
	after := readDir(t, dir)
	ops := readStrace(t, log, dir)
	kinds := map[string]int{}
	for _, op := range ops {
		kinds[op.kind]++
	}
	if kinds["create"] == 0 || kinds["rename"] == 0 || kinds["unlink"] == 0 || kinds["fsync"] == 0 {
		t.Fatalf("the recording misses calls of the save: %v", kinds)
	}
	load := func(files map[string][]byte) (tableDump, error) {
		d := t.TempDir()
		for n, b := range files {
			if err := os.WriteFile(filepath.Join(d, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		loaded, err := embedding.LoadRenamed(context.Background(), d, func(s string) string { return s + "-crash" })
		if err != nil {
			return tableDump{}, err
		}
		defer loaded[0].Close()
		return dump(t, loaded[0]), nil
	}
	old, err := load(before)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := load(after)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for k := 0; k <= len(ops); k++ {
		for _, early := range []bool{false, true} {
			got, err := load(crashState(before, after, ops, k, early))
			switch {
			case err != nil:
				t.Fatalf("crash after call %d of %d (%+v, early %v): Load: %v", k, len(ops), ops[max(k-1, 0)], early, err)
			case reflect.DeepEqual(got, old):
				seen["previous"]++
			case reflect.DeepEqual(got, saved):
				seen["new"]++
			default:
				t.Fatalf("crash after call %d (early %v): loaded neither checkpoint", k, early)
			}
		}
	}
	if seen["previous"] == 0 || seen["new"] == 0 {
		t.Errorf("crash states: %v; want both checkpoints", seen)
	}
	t.Logf("%d recorded calls %v, %d crash states: %v", len(ops), kinds, 2*(len(ops)+1), seen)
}
