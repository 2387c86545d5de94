package cgotorch

// All cgo flags of gorec live in this file, but for the C++ standard (C++20): cxxstd.go says
// how to choose another.
//
// By default libtorch is found where Debian and Ubuntu's libtorch-dev put it (/usr/include,
// /usr/lib/<arch>). To build against another libtorch (a release zip, or the torch/ folder of
// a PyTorch wheel), point the environment at it; the environment's flags come first:
//
//	export LIBTORCH=/path/to/libtorch
//	export CGO_CXXFLAGS="-I$LIBTORCH/include -I$LIBTORCH/include/torch/csrc/api/include"
//	export CGO_LDFLAGS="-L$LIBTORCH/lib -Wl,-rpath,$LIBTORCH/lib"
//
// PyTorch wheels before 2.7 are built with the old C++ ABI: add -D_GLIBCXX_USE_CXX11_ABI=0 to
// CGO_CXXFLAGS for them (the Makefile's LIBTORCH support detects this). A CPU-only program
// links libtorch_cpu and libc10 alone; for CUDA add -ltorch_cuda -lc10_cuda to CGO_LDFLAGS,
// wrapped in -Wl,--no-as-needed so that libtorch's CUDA hooks register.

/*
#cgo CFLAGS: -O3 -std=gnu11 -Wall
#cgo CXXFLAGS: -O2 -fopenmp -I/usr/include/torch/csrc/api/include -Wno-unused-parameter
#cgo LDFLAGS: -fopenmp -ltorch_cpu -lc10 -lstdc++ -lm
#cgo CXXFLAGS: -DUSE_C10D_GLOO
*/
import "C"
