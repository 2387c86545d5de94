// core.cc.h: errors, handle lifecycle, conversions between C and libtorch types, tensor
// properties and copies in and out.
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "internal.h"

namespace {
std::atomic<int64_t> live_handles{0};
// A ct_error points at msg of an error block: its code sits in front of the message, so that
// the error stays a plain C string for its readers.
constexpr size_t error_header = 8;
struct {
  int32_t code;
  int32_t pad;
  char msg[48];
} oom_error = {CT_ERR_TORCH, 0, "out of memory while reporting an error"};
static_assert(offsetof(decltype(oom_error), msg) == error_header, "error header size");
}  // namespace

namespace ct {

ct_error make_error(int32_t code, const char *msg) noexcept {
  if (msg == nullptr) msg = "error";
  const size_t n = std::strlen(msg) + 1;
  char *b = static_cast<char *>(std::malloc(error_header + n));
  if (b == nullptr) return oom_error.msg;
  std::memcpy(b, &code, sizeof code);
  std::memcpy(b + error_header, msg, n);
  return b + error_header;
}

const at::Tensor &get(ct_tensor h) {
  if (h == nullptr) throw closed_error("tensor handle is NULL");
  if (!h->t.defined()) throw closed_error("tensor was released (its scope ended)");
  return h->t;
}

ct_tensor wrap(at::Tensor t) {
  auto *h = new ct_tensor_s{std::move(t), nullptr};
  live_handles.fetch_add(1, std::memory_order_relaxed);
  scope_adopt(h);
  return h;
}

at::ScalarType to_scalar_type(int32_t dtype) {
  switch (dtype) {
    case CT_UINT8: case CT_INT8: case CT_INT16: case CT_INT32: case CT_INT64:
    case CT_FLOAT16: case CT_FLOAT32: case CT_FLOAT64: case CT_BOOL: case CT_BFLOAT16:
      return static_cast<at::ScalarType>(dtype);
    default:
      throw arg_error("unknown dtype " + std::to_string(dtype));
  }
}

at::Device to_device(ct_device d) {
  if (d.type != CT_CPU && d.type != CT_CUDA) {
    throw arg_error("unknown device type " + std::to_string(d.type));
  }
  if (d.index < -1 || d.index > 127) throw arg_error("bad device index " + std::to_string(d.index));
  // at::Device asserts (an internal-assert error) on these rather than reporting them.
  if (d.type == CT_CPU && d.index > 0) {
    throw arg_error("CPU device index must be -1 or 0, got " + std::to_string(d.index));
  }
  return at::Device(static_cast<c10::DeviceType>(d.type), static_cast<c10::DeviceIndex>(d.index));
}

ct_device from_device(const at::Device &d) {
  return ct_device{static_cast<int32_t>(d.type()), static_cast<int32_t>(d.index())};
}

at::TensorOptions to_options(const ct_options &o) {
  return at::TensorOptions()
      .dtype(to_scalar_type(o.dtype))
      .device(to_device(o.device))
      .requires_grad(o.requires_grad != 0);
}

at::IntArrayRef to_shape(const int64_t *shape, int32_t ndim) {
  if (ndim < 0 || ndim > 64) throw arg_error("bad number of dimensions " + std::to_string(ndim));
  if (ndim > 0 && shape == nullptr) throw arg_error("shape is NULL");
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0) throw arg_error("negative dimension " + std::to_string(shape[i]));
  }
  return at::IntArrayRef(shape, static_cast<size_t>(ndim));
}

}  // namespace ct

using ct::get;
using ct::guard;
using ct::need_out;

extern "C" {

void ct_error_free(ct_error err) {
  if (err != nullptr && err != oom_error.msg) std::free(err - error_header);
}

int32_t ct_error_code(ct_error err) {
  if (err == nullptr) return CT_OK;
  int32_t code;
  std::memcpy(&code, err - error_header, sizeof code);
  return code;
}

void ct_string_free(char *s) { std::free(s); }

int64_t ct_live_handles(void) { return live_handles.load(std::memory_order_relaxed); }

void ct_tensor_free(ct_tensor t) {
  if (t == nullptr) return;
  ct::scope_forget(t);
  delete t;
  live_handles.fetch_sub(1, std::memory_order_relaxed);
}

ct_error ct_tensor_from_data(ct_tensor *out, const void *data, size_t nbytes, int32_t dtype,
                             const int64_t *shape, int32_t ndim) {
  return guard([&] {
    need_out(out);
    auto type = ct::to_scalar_type(dtype);
    auto sizes = ct::to_shape(shape, ndim);
    auto t = at::empty(sizes, at::TensorOptions().dtype(type));
    if (t.nbytes() != nbytes) {
      throw ct::arg_error("data has " + std::to_string(nbytes) + " bytes, shape needs " +
                          std::to_string(t.nbytes()));
    }
    if (nbytes > 0) {
      if (data == nullptr) throw ct::arg_error("data is NULL");
      std::memcpy(t.data_ptr(), data, nbytes);
    }
    *out = ct::wrap(std::move(t));
  });
}

ct_error ct_tensor_copy_to(void *dst, size_t nbytes, ct_tensor t, int32_t dtype) {
  return guard([&] {
    const auto &x = get(t);
    if (x.scalar_type() != ct::to_scalar_type(dtype)) {
      throw ct::arg_error(std::string("tensor has dtype ") + c10::toString(x.scalar_type()) +
                          ", destination wants " +
                          c10::toString(ct::to_scalar_type(dtype)));
    }
    if (x.nbytes() != nbytes) {
      throw ct::arg_error("destination has " + std::to_string(nbytes) + " bytes, tensor has " +
                          std::to_string(x.nbytes()));
    }
    if (nbytes == 0) return;
    if (dst == nullptr) throw ct::arg_error("destination is NULL");
    auto c = x.detach().to(at::kCPU).contiguous();
    std::memcpy(dst, c.data_ptr(), nbytes);
  });
}

ct_error ct_tensor_ndim(int32_t *out, ct_tensor t) {
  return guard([&] { need_out(out); *out = static_cast<int32_t>(get(t).dim()); });
}

ct_error ct_tensor_shape(int64_t *out, int32_t cap, ct_tensor t) {
  return guard([&] {
    const auto &x = get(t);
    if (cap > 0) need_out(out);
    for (int64_t i = 0; i < x.dim() && i < cap; i++) out[i] = x.size(i);
  });
}

ct_error ct_tensor_numel(int64_t *out, ct_tensor t) {
  return guard([&] { need_out(out); *out = get(t).numel(); });
}

ct_error ct_tensor_dtype(int32_t *out, ct_tensor t) {
  return guard([&] { need_out(out); *out = static_cast<int32_t>(get(t).scalar_type()); });
}

ct_error ct_tensor_device(ct_device *out, ct_tensor t) {
  return guard([&] { need_out(out); *out = ct::from_device(get(t).device()); });
}

ct_error ct_tensor_string(char **out, ct_tensor t) {
  return guard([&] {
    need_out(out);
    std::ostringstream s;
    s << get(t);
    char *r = strdup(s.str().c_str());
    if (r == nullptr) throw std::bad_alloc();
    *out = r;
  });
}

ct_error ct_tensor_shallow_clone(ct_tensor *out, ct_tensor t) {
  return guard([&] { need_out(out); *out = ct::wrap(get(t)); });
}

ct_error ct_tensor_to(ct_tensor *out, ct_tensor t, ct_device device, int32_t dtype) {
  return guard([&] {
    need_out(out);
    const auto &x = get(t);
    auto type = dtype < 0 ? x.scalar_type() : ct::to_scalar_type(dtype);
    *out = ct::wrap(x.to(ct::to_device(device), type));
  });
}

}  // extern "C"
