// factory.cc.h: tensors made from nothing (zeros, ones, full, rand, randn, empty, arange).
#include "internal.h"

using ct::guard;

extern "C" {

ct_error ct_tensor_new(ct_tensor *out, int32_t fill, double value, const int64_t *shape,
                       int32_t ndim, ct_options opts) {
  return guard([&] {
    ct::need_out(out);
    auto sizes = ct::to_shape(shape, ndim);
    auto o = ct::to_options(opts);
    at::Tensor t;
    switch (fill) {
      case CT_FILL_ZEROS: t = at::zeros(sizes, o); break;
      case CT_FILL_ONES: t = at::ones(sizes, o); break;
      case CT_FILL_FULL: t = at::full(sizes, value, o); break;
      case CT_FILL_RAND: t = at::rand(sizes, o); break;
      case CT_FILL_RANDN: t = at::randn(sizes, o); break;
      case CT_FILL_EMPTY: t = at::empty(sizes, o); break;
      default: throw ct::arg_error("unknown fill " + std::to_string(fill));
    }
    // at:: factories ignore the requires_grad option (torch:: ones apply it): apply it here.
    if (opts.requires_grad != 0) t.set_requires_grad(true);
    *out = ct::wrap(std::move(t));
  });
}

ct_error ct_tensor_arange(ct_tensor *out, double start, double end, double step, ct_options opts) {
  return guard([&] {
    ct::need_out(out);
    auto t = at::arange(start, end, step, ct::to_options(opts));
    if (opts.requires_grad != 0) t.set_requires_grad(true);
    *out = ct::wrap(std::move(t));
  });
}

}  // extern "C"
