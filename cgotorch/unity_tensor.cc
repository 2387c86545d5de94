// unity_tensor.cc: one translation unit for the tensor half of the C ABI.
//
// cgo compiles every .cc file of the package as its own translation unit, and each of them
// parses <ATen/ATen.h> (about 8 s) and emits its debug information (as long again at cgo's
// default -g): that fixed cost, not our code, was most of a build. So the C++ sources are
// .hxx files, each with one purpose, and the package has a few translation units that include
// them: this one, unity_table.cc and unity_dist.cc, compiled in parallel. The sources have a header extension
// because the go command hashes a package's .h/.hh/.hpp/.hxx files into its build cache key;
// a source under another extension or in a subdirectory would leave stale builds in the cache.
// A new source goes into exactly one of the units' lists (TestUnitySourcesIncludedOnce).
#include "allocator.hxx"
#include "autograd.hxx"
#include "factory.hxx"
#include "ops_elementwise.hxx"
#include "ops_index.hxx"
#include "ops_nn.hxx"
#include "ops_reduce.hxx"
#include "ops_shape.hxx"
#include "optim_step.hxx"
#include "scope.hxx"
#include "state.hxx"
#include "tensor_core.hxx"
