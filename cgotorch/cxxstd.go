//go:build !gorec_cxxstd

package cgotorch

// The C++ standard of cgotorch's sources: C++20, which libtorch 2.14 and newer require (ATen
// stops with "C++20 or later compatible compiler is required") and which Debian's libtorch 1.13
// compiles with too (tested with GCC 12.2). cgo puts a package's #cgo flags after CGO_CXXFLAGS, so a
// -std given there would lose to this one: to build with another standard, leave this file out
// with the build tag gorec_cxxstd and give the standard in CGO_CXXFLAGS, e.g.
//
//	CGO_CXXFLAGS="-std=c++23" go build -tags gorec_cxxstd ./...

/*
#cgo CXXFLAGS: -std=c++20
*/
import "C"
