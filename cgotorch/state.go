package cgotorch

// #include "cgotorch.h"
import "C"

import "fmt"

// SetNumThreads sets libtorch's intra-op thread count (process-wide).
func SetNumThreads(n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: thread count must be positive, got %d", ErrInvalidArgument, n)
	}
	return toError("set num threads", C.ct_set_num_threads(C.int32_t(n)))
}

// NumThreads is libtorch's intra-op thread count.
func NumThreads() int {
	var n C.int32_t
	must("num threads", C.ct_get_num_threads(&n))
	return int(n)
}

// ManualSeed seeds libtorch's default generators (Rand, Randn, dropout, ...).
func ManualSeed(seed uint64) { must("manual seed", C.ct_manual_seed(C.uint64_t(seed))) }

// CUDAAvailable reports whether libtorch was built with CUDA and sees at least one GPU.
func CUDAAvailable() bool { return CUDADeviceCount() > 0 }

// CUDADeviceCount is the number of GPUs libtorch can use (0 without CUDA).
func CUDADeviceCount() int {
	var n C.int32_t
	must("cuda device count", C.ct_cuda_device_count(&n))
	return int(n)
}

// TorchVersion is the version of the libtorch gorec is linked with, e.g. "1.13.1".
func TorchVersion() string { return C.GoString(C.ct_torch_version()) }
