package cgotorch

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// includeRE matches a quoted #include and captures its path.
var includeRE = regexp.MustCompile(`(?m)^#include "([^"]+)"`)

// includes returns the files that file (a path relative to this folder) includes with quotes,
// resolved against its own folder, as cleaned slash paths relative to this folder.
func includes(t *testing.T, file string) []string {
	t.Helper()
	text, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range includeRE.FindAllStringSubmatch(string(text), -1) {
		out = append(out, path.Join(path.Dir(file), m[1]))
	}
	return out
}

// Every body of C or C++ (csrc/**/*.cc.h, *.c.h) is compiled through exactly one unity
// translation unit (unity_*.cc, unity_*.c), included once by the unit or by a body it
// includes: a body left out would be missing at link time, one included twice would define its
// symbols twice. unity_idmap_v3.c is the exception by design: it compiles the id map's body a
// second time, for x86-64-v3, under other names.
func TestUnitySourcesIncludedOnce(t *testing.T) {
	var bodies []string
	err := filepath.WalkDir("csrc", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".cc.h") || strings.HasSuffix(p, ".c.h")) {
			bodies = append(bodies, filepath.ToSlash(p))
		}
		return err
	})
	if err != nil || len(bodies) == 0 {
		t.Fatalf("no sources found in csrc/: %v", err)
	}
	units, err := filepath.Glob("unity_*.c*")
	if err != nil || len(units) == 0 {
		t.Fatalf("no unity_* units found: %v", err)
	}
	count := map[string]int{}
	var walk func(file string)
	walk = func(file string) {
		for _, inc := range includes(t, file) {
			if strings.HasSuffix(inc, ".cc.h") || strings.HasSuffix(inc, ".c.h") {
				count[inc]++
				walk(inc)
			}
		}
	}
	for _, u := range units {
		if u != "unity_idmap_v3.c" {
			walk(u)
		}
	}
	for _, s := range bodies {
		if count[s] != 1 {
			t.Errorf("%s is compiled %d times through the unity units, want 1", s, count[s])
		}
		delete(count, s)
	}
	for s := range count {
		t.Errorf("%s is included, but does not exist", s)
	}
}

// The package's own folder holds the Go files, the public header cgotorch.h and the unity
// units alone: any other C or C++ source belongs in a component folder of csrc/ (one left here
// would be compiled by cgo as a translation unit of its own, or be missed by the build cache's
// key). Every component folder is embedded by csrc/embed.go, which is what makes an edited
// source rebuild the package (TestEditedSourceRebuilds).
func TestSourcesLiveInComponentFolders(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, e := range entries {
		name := e.Name()
		switch ext := filepath.Ext(name); {
		case e.IsDir(), ext == ".go", name == "cgotorch.h", strings.HasPrefix(name, "unity_"):
		case slices.Contains([]string{".c", ".cc", ".cpp", ".h", ".hh", ".hpp", ".hxx"}, ext):
			t.Errorf("%s: C and C++ sources go into a component folder of csrc/", name)
		}
	}
	entries, err = os.ReadDir("csrc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			folders = append(folders, e.Name())
		}
	}
	embed, err := os.ReadFile(filepath.Join("csrc", "embed.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^//go:embed (.*)$`).FindStringSubmatch(string(embed))
	if m == nil {
		t.Fatal("csrc/embed.go has no //go:embed line")
	}
	embedded := strings.Fields(m[1])
	sort.Strings(embedded)
	if !slices.Equal(embedded, folders) {
		t.Errorf("csrc/embed.go embeds %v, want every folder of csrc/: %v", embedded, folders)
	}
}
