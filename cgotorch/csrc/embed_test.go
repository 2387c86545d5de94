package csrc

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCXX stands in for the C++ compiler: it logs each unity unit it is asked to compile to
// $GOREC_CXX_LOG and compiles an empty file in its place, so that a build of cgotorch takes
// seconds instead of minutes of libtorch's headers. Any other invocation goes to the real one.
const fakeCXX = `#!/bin/sh
n=0
for a in "$@"; do
  case "$a" in
    unity_*.cc) echo "$a" >> "$GOREC_CXX_LOG"; n=1 ;;
  esac
done
if [ $n = 0 ]; then exec "$GOREC_REAL_CXX" "$@"; fi
for a in "$@"; do
  shift
  case "$a" in
    unity_*.cc) set -- "$@" "$GOREC_EMPTY_CC" ;;
    *) set -- "$@" "$a" ;;
  esac
done
exec "$GOREC_REAL_CXX" "$@"
`

// Editing a source in a component folder of csrc/ makes `go build` rebuild cgotorch, although
// the go command hashes no subfolder file into a package's cache key: the embed of embed.go
// makes those files inputs of this package, which cgotorch imports. The test builds a copy of
// the module's cgotorch twice without a change (the second build compiles nothing), edits
// csrc/table/lr.cc.h, and builds again: the C++ units are compiled again. Without the blank
// import of this package by cgotorch (or with a folder left out of the embed) the last build
// finds cgotorch in the cache and compiles nothing.
func TestEditedSourceRebuilds(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	realCXX, err := exec.LookPath(envOr("CXX", "g++"))
	if err != nil {
		t.Skipf("no C++ compiler: %v", err)
	}
	tmp := t.TempDir()
	mod := filepath.Join(tmp, "mod")
	copyModule(t, filepath.Join("..", ".."), mod)

	cxx := filepath.Join(tmp, "fakecxx")
	empty := filepath.Join(tmp, "empty.cc")
	log := filepath.Join(tmp, "cxx.log")
	write(t, cxx, fakeCXX, 0o755)
	write(t, empty, "", 0o644)

	build := func() []string {
		t.Helper()
		_ = os.Remove(log)
		cmd := exec.Command(goTool, "build", "./cgotorch")
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "CXX="+cxx, "GOREC_REAL_CXX="+realCXX,
			"GOREC_EMPTY_CC="+empty, "GOREC_CXX_LOG="+log, "GOFLAGS=-mod=mod",
			"GOCACHE="+filepath.Join(tmp, "cache"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		b, err := os.ReadFile(log)
		if os.IsNotExist(err) {
			return nil
		} else if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(b))
	}

	if units := build(); len(units) == 0 {
		t.Fatal("the first build compiled no unity unit: the fake compiler is not used")
	}
	if units := build(); len(units) != 0 {
		t.Fatalf("a build without a change compiled %v: want it from the cache", units)
	}
	src := filepath.Join(mod, "cgotorch", "csrc", "table", "lr.cc.h")
	text, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	write(t, src, string(text)+"// edited\n", 0o644)
	units := build()
	if !contains(units, "unity_table.cc") {
		t.Fatalf("after an edit of csrc/table/lr.cc.h the build compiled %v: want unity_table.cc", units)
	}
}

// copyModule copies what a build of cgotorch reads (go.mod, the sources of cgotorch and of the
// package it imports, without tests and test data) from the module at src to dst.
func copyModule(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dst, "go.mod"), string(b), 0o644)
	for _, pkg := range []string{"cgotorch", filepath.Join("internal", "ctensor")} { // cgotorch and what it imports
		copyTree(t, filepath.Join(src, pkg), filepath.Join(dst, pkg))
	}
}

// copyTree copies the files of root (without tests, test data and C tests) to dst.
func copyTree(t *testing.T, root, dst string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "testdata" || rel == "ctest" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		write(t, filepath.Join(dst, rel), string(b), 0o644)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
