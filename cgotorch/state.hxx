// state.hxx: process-wide library state: threads, seed, CUDA presence, version.
#include <ATen/Parallel.h>
#include <torch/version.h>
#include <c10/core/DeviceType.h>

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
