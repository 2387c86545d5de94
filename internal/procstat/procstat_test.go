package procstat

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// Touching 64 MiB raises the resident size by about that much; unknown fields read as 0.
// The heap's free pages go back to the system first: otherwise the 64 MiB of an earlier run
// (go test -count=2) are still resident, and the new slice reuses them.
func TestResidentKB(t *testing.T) {
	debug.FreeOSMemory()
	before := ResidentKB()
	if before == 0 {
		t.Skip("no /proc/self/status")
	}
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1
	}
	if grown := ResidentKB() - before; grown < 48<<10 {
		t.Errorf("RSS grew by %d KiB after touching 64 MiB", grown)
	}
	runtime.KeepAlive(b)
	if KB("NoSuchField") != 0 {
		t.Error("an unknown field is not 0")
	}
}
