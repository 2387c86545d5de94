//go:build linux

package cgotorch

import "syscall"

// physicalMemory is the machine's RAM in bytes (0 if unknown): ToSlice refuses to allocate more.
func physicalMemory() uint64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
