package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func write(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// entries lists dir's file names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestReplaceWritesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.bin")
	for _, s := range []string{"first", "second, longer"} {
		if err := Replace(path, write(s)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != s {
			t.Fatalf("read %q, %v; want %q", got, err, s)
		}
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, %v; want 0644", st.Mode().Perm(), err)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v; want only state.bin", names)
	}
}

// A writer that fails part way leaves the old file and no temporary file.
func TestReplaceFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.bin")
	if err := Replace(path, write("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Replace(path, func(w io.Writer) error {
		io.WriteString(w, "partial new contents")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v; want boom", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("file holds %q after a failed replace; want \"old\"", got)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v; want only state.bin", names)
	}
	// In a directory that does not exist: an error, nothing created.
	if err := Replace(filepath.Join(dir, "no", "such"), write("x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err %v; want ErrNotExist", err)
	}
}

func TestWriteSyncedNeedsAFreshName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := WriteSynced(path, write("a")); err != nil {
		t.Fatal(err)
	}
	if err := WriteSynced(path, write("b")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("err %v; want ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "a" {
		t.Fatalf("file holds %q; want \"a\"", got)
	}
}

// Two Replace calls on one path at once (a periodic save and a manual one) each write a
// temporary file of their own: when one returns nil, path holds its contents in full, never
// the other's partial file.
func TestReplaceConcurrentOnOnePath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.bin")
	aHalf, bHalf, bGo := make(chan struct{}), make(chan struct{}), make(chan struct{})
	bDone := make(chan error, 1)
	go func() {
		<-aHalf
		bDone <- Replace(path, func(w io.Writer) error {
			io.WriteString(w, "B first half|")
			close(bHalf)
			<-bGo
			_, err := io.WriteString(w, "B second half")
			return err
		})
	}()
	err := Replace(path, func(w io.Writer) error {
		io.WriteString(w, "A first half|")
		close(aHalf)
		<-bHalf
		_, err := io.WriteString(w, "A second half")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "A first half|A second half" {
		t.Errorf("after A's Replace returned: file holds %q; want A's contents", got)
	}
	close(bGo)
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "B first half|B second half" {
		t.Errorf("after B's Replace returned: file holds %q; want B's contents", got)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v; want only state.bin", names)
	}
}

// Replace gives the file 0666 less the umask, as os.Create does: 0640 under umask 027 (before
// the fix it chmod-ed 0644 whatever the umask, which let others read a file the user's umask
// keeps private).
func TestReplaceRespectsUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "state.bin")
	if err := Replace(path, write("x")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v under umask 027, want -rw-r-----", fi.Mode().Perm())
	}
}
