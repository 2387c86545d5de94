// unity_tensor.cc: one translation unit for the tensor half of the C ABI.
//
// cgo compiles every .c and .cc file of the package's own folder as its own translation unit,
// and each C++ one parses <ATen/ATen.h> (about 8 s) and emits its debug information (as long
// again at cgo's default -g): that fixed cost, not our code, was most of a build. So the sources
// live by component in csrc/ (tensor/, table/, idmap/, dist/), each file with one purpose, and
// the package has a few translation units that include them: this one, unity_table.cc,
// unity_dist.cc and the id map's unity_idmap.c (and unity_idmap_v3.c), compiled in parallel.
// A body included by a unit is named .cc.h (C++) or .c.h (C); a real header keeps .h. The go
// command hashes no file of a subfolder into its build cache key: the package csrc, imported
// by this one, embeds those folders (csrc/embed.go), so that an edited source rebuilds.
// A new source goes into exactly one of the units' lists (TestUnitySourcesIncludedOnce).
#include "csrc/tensor/allocator.cc.h"
#include "csrc/tensor/autograd.cc.h"
#include "csrc/tensor/factory.cc.h"
#include "csrc/tensor/ops_elementwise.cc.h"
#include "csrc/tensor/ops_index.cc.h"
#include "csrc/tensor/ops_nn.cc.h"
#include "csrc/tensor/ops_reduce.cc.h"
#include "csrc/tensor/ops_shape.cc.h"
#include "csrc/tensor/op_threads.cc.h"
#include "csrc/tensor/optim_step.cc.h"
#include "csrc/tensor/scope.cc.h"
#include "csrc/tensor/state.cc.h"
#include "csrc/tensor/core.cc.h"
