// Package procstat reads this process's memory figures from /proc/self/status, for the tests
// that bound resident memory (cgotorch, embedding, nn).
package procstat

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// KB returns the field of /proc/self/status (VmRSS, VmHWM, ...) in KiB, or 0 where it cannot be
// read (no procfs).
func KB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return v
		}
	}
	return 0
}

// ResidentKB is the resident set size (VmRSS) in KiB, 0 if unknown.
func ResidentKB() int64 { return KB("VmRSS") }
