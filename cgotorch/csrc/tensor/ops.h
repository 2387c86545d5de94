// ops.h: C++ helpers shared by the ops_*.cc.h files (the tensor operations of the C ABI).
#ifndef CGOTORCH_OPS_H
#define CGOTORCH_OPS_H

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <ATen/WrapDimUtils.h>

#include "internal.h"

namespace ct {

// A list of n dimensions (or other int64 arguments) passed by a caller; may be negative.
inline at::IntArrayRef to_dims(const int64_t *dims, int32_t n) {
  if (n < 0 || n > 64) throw arg_error("bad number of dimensions " + std::to_string(n));
  if (n > 0 && dims == nullptr) throw arg_error("dimension list is NULL");
  return at::IntArrayRef(dims, static_cast<size_t>(n));
}

// dims made non-negative and sorted from the last: removing them one at a time in this order
// keeps the positions of those left valid. A dimension listed twice is an error.
inline std::vector<int64_t> dims_last_first(at::IntArrayRef dims, int64_t ndim) {
  std::vector<int64_t> order;
  for (int64_t d : dims) order.push_back(at::maybe_wrap_dim(d, ndim));
  std::sort(order.begin(), order.end(), std::greater<int64_t>());
  auto twice = std::adjacent_find(order.begin(), order.end());
  TORCH_CHECK(twice == order.end(), "dim ", (twice == order.end() ? 0 : *twice),
              " appears multiple times in the list of dims");
  return order;
}

// A scalar argument: an integral value that fits int64 becomes an integer Scalar (converted
// exactly) so that integer tensors stay integer, as Python's int constants do. -0.0 stays a
// double, whose sign matters (x / -0.0 is -inf), as do 2^63 and beyond, which int64 cannot hold
// (-2^63 can), NaN and the infinities.
inline at::Scalar to_scalar(double v) {
  constexpr double two63 = 9223372036854775808.0;  // 2^63, exact in a double
  if (std::trunc(v) == v && v >= -two63 && v < two63 && !(v == 0 && std::signbit(v))) {
    return at::Scalar(static_cast<int64_t>(v));
  }
  return at::Scalar(v);
}

// Throws the error of an operation code the function does not know.
[[noreturn]] inline void bad_op(const char *family, int32_t op) {
  throw arg_error(std::string("unsupported ") + family + " operation " + std::to_string(op));
}

// Checks that an op got the number of int64 arguments it takes.
inline void need_nargs(const char *op, at::IntArrayRef args, size_t want) {
  if (args.size() != want) {
    throw arg_error(std::string(op) + " takes " + std::to_string(want) + " arguments, got " +
                    std::to_string(args.size()));
  }
}

// Wraps several results: each (out-parameter, tensor) pair whose pointer is not NULL gets a new
// handle. Either all of them are written or, on failure, none is and no handle leaks.
inline void wrap_outputs(const std::vector<std::pair<ct_tensor *, at::Tensor>> &outs) {
  std::vector<ct_tensor> made;
  try {
    for (const auto &o : outs) made.push_back(o.first != nullptr ? wrap(o.second) : nullptr);
  } catch (...) {
    for (ct_tensor h : made) ct_tensor_free(h);
    throw;
  }
  size_t i = 0;
  for (const auto &o : outs) {
    if (o.first != nullptr) *o.first = made[i];
    i++;
  }
}

}  // namespace ct

// The helpers every entry point of the ops_*.cc.h files uses.
using ct::get;
using ct::guard;
using ct::need_out;
using ct::wrap;

#endif
