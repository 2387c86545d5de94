package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplesBuildWhenCopied copies each example's folder into a module of its own, as a user
// starts from one, and builds it (and vets it, tests included) against this checkout: an
// example that imports a package gorec keeps internal, or anything else outside gorec's public
// API, fails to build there.
func TestExamplesBuildWhenCopied(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every example in a module of its own")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "examples", e.Name()))); err != nil {
				t.Fatal(err)
			}
			mod := "module example.com/mine\n\ngo 1.24\n\nrequire github.com/gorec/gorec v0.0.0\n\n" +
				"replace github.com/gorec/gorec => " + root + "\n"
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"build", "-o", os.DevNull, "."}, {"vet", "."}} {
				cmd := exec.Command(goBin, args...)
				cmd.Dir = dir
				// Offline: gorec needs no other module, so nothing is fetched.
				cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("go %s in a copy of examples/%s: %v\n%s", strings.Join(args, " "), e.Name(), err, out)
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no examples found")
	}
}
