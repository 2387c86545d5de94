// state.cc.h: process-wide library state: threads, seed and generator state, CUDA presence,
// version.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/version.h>
#include <c10/core/DeviceType.h>

#include <mutex>

#include "internal.h"

using ct::guard;

namespace ct {

std::atomic<uint32_t> threads_epoch{0};  // 0: never set; libtorch's own default applies
static std::atomic<int32_t> thread_count{0};

void apply_thread_count() {
  const int32_t n = thread_count.load(std::memory_order_relaxed);
  // Only when it differs: a thread's first parallel work already takes libtorch's global count,
  // and the native (non-OpenMP) backend warns about changes after its pool started.
  if (n > 0 && at::get_num_threads() != n) at::set_num_threads(n);
}

// set_rng_state sets gen's state to the tensor behind state, under gen's mutex, after checking
// that it is a 1-D contiguous CPU uint8 tensor; libtorch's refusal (size, contents) is an
// argument error with libtorch's message.
static void set_rng_state(at::Generator gen, ct_tensor state) {
  const at::Tensor &s = ct::get(state);  // NULL or released: "closed"
  if (s.device().type() != at::kCPU)
    throw ct::arg_error("RNG state must be a CPU tensor, got one on " + s.device().str());
  if (s.layout() != at::kStrided) throw ct::arg_error("RNG state must be a dense tensor");
  if (s.scalar_type() != at::kByte)
    throw ct::arg_error(std::string("RNG state must be uint8, got ") +
                        c10::toString(s.scalar_type()));
  if (s.dim() != 1)
    throw ct::arg_error("RNG state must be 1-D, got " + std::to_string(s.dim()) + " dimensions");
  if (!s.is_contiguous()) throw ct::arg_error("RNG state must be contiguous");
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    // libtorch checks the size (its current or its legacy layout) and the contents (a valid
    // mt19937 state) before it changes anything, so a rejected state leaves the generator as
    // it was. Its rejection is about the argument: report it as one, with libtorch's message.
    gen.set_state(s);
  } catch (const c10::Error &e) {
    throw ct::arg_error(e.what_without_backtrace());
  }
}

}  // namespace ct

extern "C" {

ct_error ct_set_num_threads(int32_t n) {
  return guard([&] {
    if (n <= 0) throw ct::arg_error("thread count must be positive, got " + std::to_string(n));
    at::set_num_threads(n);
    ct::thread_count.store(n, std::memory_order_relaxed);
    ct::threads_epoch.fetch_add(1, std::memory_order_release);
  });
}

ct_error ct_get_num_threads(int32_t *out) {
  return guard([&] { ct::need_out(out); *out = at::get_num_threads(); });
}

ct_error ct_manual_seed(uint64_t seed) {
  return guard([&] { at::manual_seed(seed); });
}

// The default CPU generator's state, read and written under its mutex as PyTorch's
// torch.get_rng_state / set_rng_state do (see libtorch's note "Acquire lock when using random
// generators"): ops that draw from it (dropout, rand, ...) take the same lock.
ct_error ct_rng_state(ct_tensor *out) {
  return guard([&] {
    ct::need_out(out);
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    at::Tensor state;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      state = gen.get_state();  // a new tensor: libtorch serialises into fresh memory
    }
    *out = ct::wrap(std::move(state));
  });
}

ct_error ct_set_rng_state(ct_tensor state) {
  return guard([&] { ct::set_rng_state(at::detail::getDefaultCPUGenerator(), state); });
}

// The same checks on a private generator: libtorch's own validation of the contents runs, and
// the default generator is not touched.
ct_error ct_rng_check_state(ct_tensor state) {
  return guard([&] { ct::set_rng_state(at::make_generator<at::CPUGeneratorImpl>(), state); });
}

ct_error ct_cuda_available(int32_t *out) {
  return guard([&] { ct::need_out(out); *out = at::hasCUDA() ? 1 : 0; });
}

ct_error ct_cuda_device_count(int32_t *out) {
  return guard([&] {
    ct::need_out(out);
    *out = at::hasCUDA() ? static_cast<int32_t>(at::getNumGPUs()) : 0;
  });
}

const char *ct_torch_version(void) {
  static const std::string v = std::to_string(TORCH_VERSION_MAJOR) + "." +
                               std::to_string(TORCH_VERSION_MINOR) + "." +
                               std::to_string(TORCH_VERSION_PATCH);
  return v.c_str();
}

}  // extern "C"
