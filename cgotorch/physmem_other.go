//go:build !linux

package cgotorch

// physicalMemory is the machine's RAM in bytes, 0 (no limit) where this package does not know
// how to read it.
func physicalMemory() uint64 { return 0 }
