package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"errors"
	"fmt"
	"runtime"
)

// SetNumThreads sets libtorch's intra-op thread count (process-wide). n must be in
// [1, math.MaxInt32], else ErrInvalidArgument. An operation whose work is below about 4M
// elements (a quarter of a matrix product's multiply-adds), and the backward of its result, runs
// on the calling thread whatever n is: forking the threads costs more than it saves there, and
// such an operation gives the same bits on any count. Larger ones split as libtorch splits them.
func SetNumThreads(n int) error {
	if n <= 0 || n > 1<<31-1 { // libtorch's count is an int32: never truncate
		return fmt.Errorf("%w: thread count must be in [1, 2^31-1], got %d", ErrInvalidArgument, n)
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

// RNGState returns the state of libtorch's default CPU generator, the one ManualSeed seeds and
// Rand, Randn, Dropout, ... draw from: a new 1-D Uint8 tensor in libtorch's own serialised form
// (the bytes of PyTorch's torch.get_rng_state()). Save it with a training checkpoint and give it
// back to SetRNGState to resume with the same random draws (dropout masks included).
func RNGState() (*Tensor, error) {
	var out C.ct_tensor
	if err := toError("rng state", C.ct_rng_state(&out)); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// SetRNGState restores a state returned by RNGState (or saved from PyTorch's
// torch.get_rng_state()): the draws that follow are those that followed the saved state. The
// generator copies the bytes; state stays the caller's. A state that is not a 1-D contiguous CPU
// Uint8 tensor of the size libtorch expects, with valid contents, is an error wrapping
// ErrInvalidArgument (a nil or closed one wraps ErrClosed too), and leaves the generator as it
// was.
func SetRNGState(state *Tensor) error {
	return rngStateCall("set rng state", state, func(p C.ct_tensor) C.ct_error { return C.ct_set_rng_state(p) })
}

// CheckRNGState reports the error SetRNGState would return for state, without changing the
// default generator: it sets state on a private generator, so libtorch's checks of the size and
// of the contents (a valid mt19937 state) run. A loader calls it before it changes anything else.
func CheckRNGState(state *Tensor) error {
	return rngStateCall("check rng state", state, func(p C.ct_tensor) C.ct_error { return C.ct_rng_check_state(p) })
}

// rngStateCall runs call on state's handle; a nil, closed or scope-released state is an error
// wrapping ErrClosed and ErrInvalidArgument.
func rngStateCall(op string, state *Tensor, call func(C.ct_tensor) C.ct_error) error {
	p, err := state.cOrErr(op)
	if err == nil {
		err = toError(op, call(p))
		runtime.KeepAlive(state)
	}
	if errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w (%w)", err, ErrInvalidArgument)
	}
	return err
}

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
