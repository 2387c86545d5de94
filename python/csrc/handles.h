// handles.h: the bridge from the dispatcher's ops (gorec_ops.cc) to cgotorch's C ABI. Every op
// goes through the C entry points, so the input checks, the error texts and the devices' handling
// (keys on a GPU are copied to the host) are the C ABI's, not a second copy of them. A ct_error
// becomes a std::runtime_error with the same text: Python sees a RuntimeError.
#ifndef GOREC_PY_HANDLES_H
#define GOREC_PY_HANDLES_H

#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cgotorch.h"
#include "csrc/tensor/internal.h"  // ct::wrap, ct::get: tensor handles over an at::Tensor, no copy

namespace gorec {

// Throws the error's text (and frees it); nothing on success.
inline void check(ct_error e) {
  if (e == nullptr) return;
  std::string m(e);
  ct_error_free(e);
  throw std::runtime_error(m);
}

// An op's int64 enum argument as the C ABI's int32_t: a value beyond int32_t would wrap to
// another (valid) enum, so it is refused with the C ABI's "invalid argument: " prefix.
inline int32_t enum32(int64_t v, const char *what) {
  if (v < INT32_MIN || v > INT32_MAX) {
    throw std::runtime_error(std::string("invalid argument: ") + what + " " + std::to_string(v) + " is out of range");
  }
  return static_cast<int32_t>(v);
}

// A ct_tensor handle over t for the length of a call (the tensor itself is shared, not copied).
class TensorArg {
 public:
  explicit TensorArg(const at::Tensor &t) : h_(ct::wrap(t)) {}
  ~TensorArg() { ct_tensor_free(h_); }
  TensorArg(const TensorArg &) = delete;
  TensorArg &operator=(const TensorArg &) = delete;
  ct_tensor get() const { return h_; }

 private:
  ct_tensor h_;
};

// The tensor behind a handle the C ABI returned, which is released.
inline at::Tensor take(ct_tensor h) {
  at::Tensor t = ct::get(h);
  ct_tensor_free(h);
  return t;
}

// A handle to the open table of that name ("not found: " when there is none).
class TableRef {
 public:
  explicit TableRef(const std::string &name) { check(ct_table_open(&h_, name.c_str())); }
  ~TableRef() { ct_table_free(h_); }
  TableRef(const TableRef &) = delete;
  TableRef &operator=(const TableRef &) = delete;
  ct_table get() const { return h_; }
  ct_table_stats stats() const {
    ct_table_stats s;
    check(ct_table_stats_get(&s, h_));
    return s;
  }

 private:
  ct_table h_ = nullptr;
};

// The schema of an op that changes or reads a table (every table op): TorchScript must neither
// drop, merge nor reorder its calls, which it may do to an op whose schema shows no effects (a
// scripted emb_write, returning nothing, was dropped).
inline c10::FunctionSchema stateful(const char *schema) {
  return torch::schema(schema, c10::AliasAnalysisKind::CONSERVATIVE);
}

}  // namespace gorec

#endif
