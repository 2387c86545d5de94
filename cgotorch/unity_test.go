package cgotorch

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Every C++ source (.hxx) is compiled through exactly one unity translation unit
// (unity_*.cc): a source left out would be missing at link time, one included twice would
// define its symbols twice.
func TestUnitySourcesIncludedOnce(t *testing.T) {
	sources, err := filepath.Glob("*.hxx")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no .hxx sources found: %v", err)
	}
	units, err := filepath.Glob("unity_*.cc")
	if err != nil || len(units) == 0 {
		t.Fatalf("no unity_*.cc units found: %v", err)
	}
	include := regexp.MustCompile(`(?m)^#include "([^"]+\.hxx)"`)
	count := map[string]int{}
	for _, u := range units {
		text, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range include.FindAllStringSubmatch(string(text), -1) {
			count[m[1]]++
		}
	}
	for _, s := range sources {
		if count[s] != 1 {
			t.Errorf("%s is included by %d unity units, want 1", s, count[s])
		}
		delete(count, s)
	}
	for s := range count {
		t.Errorf("a unity unit includes %s, which does not exist", s)
	}
}
