// op_threads.cc.h: size-aware intra-op threads. libtorch (OpenMP build) forks its thread team
// for any elementwise op of more than 32,768 elements and OpenBLAS for any matrix product of
// more than 262,144 multiply-adds. On the ops of a recommendation model's step (tens of
// microseconds each) the fork and join cost more than the second thread saves: waking a
// sleeping worker takes tens of microseconds on a VM, and a whole time slice when another
// process holds the other core. So the ops gorec runs for Go, and the backward nodes of their
// results, run on the calling thread alone unless their work reaches kParallelWork; gorec's
// own kernels (the tables') keep their grain and the thread count. The choice depends only on
// the op's shapes, so a step is bit-reproducible at a fixed thread count.
#include <omp.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>

#include "internal.h"

namespace ct {

namespace {

using torch::autograd::variable_list;

// The thread count a serial section replaced on this thread (0: none open). The autograd engine
// runs one CPU node at a time on the thread that called backward, so sections do not nest.
thread_local int saved_threads = 0;

// Runs a small op's node on one thread; ThreadsPostHook restores the count.
struct ThreadsPreHook : torch::autograd::FunctionPreHook {
  variable_list operator()(const variable_list &grads) override {
    const int n = omp_get_max_threads();
    if (saved_threads == 0 && n > 1) {
      saved_threads = n;
      omp_set_num_threads(1);
    }
    return grads;
  }
};

struct ThreadsPostHook : torch::autograd::FunctionPostHook {
  variable_list operator()(const variable_list &outputs, const variable_list & /*inputs*/) override {
    restore_threads();
    return outputs;
  }
};

}  // namespace

void restore_threads() {
  if (saved_threads != 0) {
    omp_set_num_threads(saved_threads);
    saved_threads = 0;
  }
}

SerialBelow::SerialBelow(int64_t work) {
  const int n = omp_get_max_threads();
  if (n > 1 && work < kParallelWork) {
    prev_ = n;
    omp_set_num_threads(1);
  }
}

SerialBelow::~SerialBelow() {
  if (prev_ != 0) omp_set_num_threads(prev_);
}

at::Tensor SerialBelow::sized(at::Tensor out) const {
  if (prev_ == 0) return out;  // the op ran on all threads: so does its node
  const auto &fn = out.grad_fn();
  // Only libtorch's own nodes: gorec's (the tables') choose their threads themselves. A node
  // with several outputs gets its hooks once.
  if (fn == nullptr || dynamic_cast<torch::autograd::TraceableFunction *>(fn.get()) == nullptr) return out;
  for (const auto &h : fn->pre_hooks())
    if (dynamic_cast<ThreadsPreHook *>(h.get()) != nullptr) return out;
  fn->add_pre_hook(std::make_unique<ThreadsPreHook>());
  fn->add_post_hook(std::make_unique<ThreadsPostHook>());
  return out;
}

int64_t product_work(int64_t a_numel, int64_t m) {
  // Multiply-adds of a [.., n] x [n, m] product (broadcast batches included), a quarter each:
  // a blocked matrix kernel does about four of them in the time of one elementwise element.
  return a_numel * m / 4;
}

int64_t matmul_work(const at::Tensor &a, const at::Tensor &b) {
  if (a.dim() == 0 || b.dim() == 0) return std::max(a.numel(), b.numel());
  return product_work(a.numel(), b.dim() >= 2 ? b.size(-1) : 1);
}

}  // namespace ct
