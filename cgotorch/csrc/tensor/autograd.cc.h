// autograd.cc.h: requires-grad, backward, gradients, detach, set data and the grad mode.
#include <c10/core/GradMode.h>

#include "internal.h"

using ct::get;
using ct::guard;

extern "C" {

ct_error ct_tensor_set_requires_grad(ct_tensor t, int32_t requires_grad) {
  return guard([&] { get(t).set_requires_grad(requires_grad != 0); });
}

ct_error ct_tensor_requires_grad(int32_t *out, ct_tensor t) {
  return guard([&] { ct::need_out(out); *out = get(t).requires_grad() ? 1 : 0; });
}

ct_error ct_tensor_backward(ct_tensor t, ct_tensor grad, int32_t retain_graph) {
  return guard([&] {
    const at::Tensor *g = ct::get_optional(grad);
    // A small node's hook hands its thread count back after the node; a failed node does not.
    struct Restore {
      ~Restore() { ct::restore_threads(); }
    } restore;
    get(t).backward(g != nullptr ? *g : at::Tensor(), retain_graph != 0);
  });
}

ct_error ct_tensor_grad(ct_tensor *out, ct_tensor t) {
  return guard([&] {
    ct::need_out(out);
    const at::Tensor &g = get(t).grad();
    *out = g.defined() ? ct::wrap(g) : nullptr;
  });
}

ct_error ct_tensor_zero_grad(ct_tensor t) {
  return guard([&] {
    at::Tensor g = get(t).mutable_grad();
    if (g.defined()) g.detach().zero_();
  });
}

ct_error ct_tensor_detach(ct_tensor *out, ct_tensor t) {
  return guard([&] { ct::need_out(out); *out = ct::wrap(get(t).detach()); });
}

ct_error ct_tensor_set_data(ct_tensor t, ct_tensor src) {
  return guard([&] {
    const at::Tensor &dst = get(t), &s = get(src);
    if (!dst.is_same(s)) dst.set_data(s);  // (to() returns its tensor itself when nothing changes)
  });
}

ct_error ct_grad_mode_set(int32_t *prev, int32_t enabled) {
  return guard([&] {
    ct::need_out(prev);
    *prev = c10::GradMode::is_enabled() ? 1 : 0;
    c10::GradMode::set_enabled(enabled != 0);
  });
}

}  // extern "C"
