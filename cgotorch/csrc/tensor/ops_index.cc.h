// ops_index.cc.h: indexing with index tensors (index_select, gather), their accumulating and
// scattering counterparts (index_add, scatter, scatter_add) and unique.
#include "ops.h"

extern "C" {

ct_error ct_index(ct_tensor *out, int32_t op, ct_tensor a, int64_t dim, ct_tensor index) {
  return guard([&] {
    need_out(out);
    const auto &x = get(a);
    const auto &i = get(index);
    switch (op) {
      case CT_INDEX_SELECT: *out = wrap(at::index_select(x, dim, i)); break;
      case CT_INDEX_GATHER: *out = wrap(at::gather(x, dim, i)); break;
      default: ct::bad_op("index", op);
    }
  });
}

ct_error ct_index_update(ct_tensor *out, int32_t op, ct_tensor a, int64_t dim, ct_tensor index,
                         ct_tensor src, int32_t inplace) {
  return guard([&] {
    bool in = inplace != 0;
    if (!in) need_out(out);
    const auto &x = get(a);
    const auto &i = get(index);
    const auto &s = get(src);
    at::Tensor r;
    switch (op) {
      case CT_INDEX_ADD: r = in ? x.index_add_(dim, i, s) : at::index_add(x, dim, i, s); break;
      case CT_INDEX_SCATTER: r = in ? x.scatter_(dim, i, s) : at::scatter(x, dim, i, s); break;
      case CT_INDEX_SCATTER_ADD:
        r = in ? x.scatter_add_(dim, i, s) : at::scatter_add(x, dim, i, s);
        break;
      default: ct::bad_op("index update", op);
    }
    if (!in) *out = wrap(std::move(r));
  });
}

ct_error ct_unique(ct_tensor *values, ct_tensor *inverse, ct_tensor *counts, ct_tensor a,
                   int32_t sorted) {
  return guard([&] {
    need_out(values);
    auto r = at::_unique2(get(a), sorted != 0, inverse != nullptr, counts != nullptr);
    ct::wrap_outputs(
        {{values, std::get<0>(r)}, {inverse, std::get<1>(r)}, {counts, std::get<2>(r)}});
  });
}

}  // extern "C"
