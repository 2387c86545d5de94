//go:build gorec_nccl

package cgotorch

// With the build tag gorec_nccl, process groups can use c10d's ProcessGroupNCCL for CUDA
// tensors (csrc/dist/nccl.cc.h). It needs a libtorch with CUDA and NCCL (PyPI's wheel) and the CUDA
// and NCCL headers in CGO_CXXFLAGS: mk/cuda.mk's `make cuda-test-bins` sets them up. c10d's
// ProcessGroupNCCL.hpp declares nothing without USE_C10D_NCCL, which a libtorch build defines
// for itself only.

/*
#cgo CXXFLAGS: -DUSE_C10D_NCCL -DGOREC_NCCL
#cgo LDFLAGS: -Wl,--no-as-needed -ltorch_cuda -lc10_cuda -Wl,--as-needed
*/
import "C"
