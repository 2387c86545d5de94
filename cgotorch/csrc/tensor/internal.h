// internal.h: C++ helpers shared by the implementation files of the C ABI (never by callers).
#ifndef CGOTORCH_INTERNAL_H
#define CGOTORCH_INTERNAL_H

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>  // NoGradGuard (ATen.h stopped bringing it in libtorch 2.x)

#include <atomic>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "../../cgotorch.h"

// The object behind a ct_tensor handle.
struct ct_tensor_s {
  at::Tensor t;
  ct_scope_s *scope = nullptr;  // the scope that owns it; guarded by the scope mutex
};

namespace ct {

// An error on the heap (ct_error) with its code (CT_ERR_*); never NULL.
ct_error make_error(int32_t code, const char *msg) noexcept;

// The code of a ct_error, carried by the exceptions of the C layer (a base next to the standard
// exception class); guard reads it. Any other exception is CT_ERR_TORCH.
struct coded {
  explicit coded(int32_t c) : code(c) {}
  virtual ~coded() = default;
  int32_t code;
};
inline int32_t code_of(const std::exception &e) {
  const auto *c = dynamic_cast<const coded *>(&e);
  return c != nullptr ? c->code : CT_ERR_TORCH;
}
// An exception whose message is given whole (its prefix included) with its code.
struct coded_error : std::runtime_error, coded {
  coded_error(int32_t c, const std::string &m) : std::runtime_error(m), coded(c) {}
};
// An exception of code C whose message is prefix + m (the prefix of the code, for people).
template <int32_t C, class Base = std::runtime_error>
struct prefixed_error : Base, coded {
  prefixed_error(const char *prefix, const std::string &m) : Base(prefix + m), coded(C) {}
};

// The intra-op thread count is per OS thread in OpenMP builds of libtorch (omp_set_num_threads
// sets the calling thread's value, and a thread takes libtorch's count only the first time it runs
// parallel work), while goroutines move between OS threads. So ct_set_num_threads bumps
// threads_epoch, and every entry point re-applies the count on a thread that has not seen the
// latest epoch: one relaxed load and a thread-local compare per call.
extern std::atomic<uint32_t> threads_epoch;
void apply_thread_count();  // sets the calling thread's count (state.cc.h)
inline void sync_thread_count() {
  static thread_local uint32_t seen = 0;
  const uint32_t e = threads_epoch.load(std::memory_order_acquire);
  if (e != seen) {
    apply_thread_count();
    seen = e;
  }
}

// Size-aware intra-op threads (op_threads.cc.h). An op whose work (elements, or a quarter of
// the multiply-adds of a matrix product) is below kParallelWork runs on the calling thread
// alone, and so does the backward node of its result (SerialBelow::sized).
constexpr int64_t kParallelWork = int64_t{1} << 22;
class SerialBelow {
 public:
  explicit SerialBelow(int64_t work);
  ~SerialBelow();
  SerialBelow(const SerialBelow &) = delete;
  SerialBelow &operator=(const SerialBelow &) = delete;
  // out, its grad_fn (a libtorch node) set to run on one thread too when this op does.
  at::Tensor sized(at::Tensor out) const;

 private:
  int prev_ = 0;
};
// The work of a product of a (a_numel elements, last dimension n) by an [n, m] matrix, and of
// matmul(a, b), in kParallelWork's units.
int64_t product_work(int64_t a_numel, int64_t m);
int64_t matmul_work(const at::Tensor &a, const at::Tensor &b);
// Gives the calling thread back the count a small node's hook took (after a failed backward).
void restore_threads();

// Runs f, converting anything it throws into a ct_error. Every C entry point goes through it.
template <class F>
ct_error guard(F &&f) noexcept {
  try {
    sync_thread_count();
    f();
    return nullptr;
  } catch (const c10::Error &e) {
    return make_error(CT_ERR_TORCH, e.what_without_backtrace());
  } catch (const std::exception &e) {
    return make_error(code_of(e), e.what());
  } catch (...) {
    return make_error(CT_ERR_TORCH, "unknown C++ exception");
  }
}

// Thrown for invalid arguments detected by the wrapper itself, and for NULL or closed handles.
struct arg_error : prefixed_error<CT_ERR_INVALID_ARGUMENT, std::invalid_argument> {
  explicit arg_error(const std::string &m) : prefixed_error("invalid argument: ", m) {}
};
struct closed_error : prefixed_error<CT_ERR_CLOSED> {
  explicit closed_error(const std::string &m) : prefixed_error("closed: ", m) {}
};

// The tensor behind a handle; throws if the handle is NULL or its scope released it.
const at::Tensor &get(ct_tensor h);
// A tensor handle or NULL; throws if released by a scope.
inline const at::Tensor *get_optional(ct_tensor h) { return h == nullptr ? nullptr : &get(h); }
// A new handle owning t, counted, and registered with the calling thread's open scope.
ct_tensor wrap(at::Tensor t);
// Checks an out-parameter pointer.
template <class T>
void need_out(T *out) {
  if (out == nullptr) throw arg_error("output pointer is NULL");
}

at::ScalarType to_scalar_type(int32_t dtype);
at::Device to_device(ct_device d);
ct_device from_device(const at::Device &d);
at::TensorOptions to_options(const ct_options &o);
at::IntArrayRef to_shape(const int64_t *shape, int32_t ndim);

// Hooks of scope.cc.h used by the tensor lifecycle.
void scope_adopt(ct_tensor h);
void scope_forget(ct_tensor h);

}  // namespace ct

#endif
