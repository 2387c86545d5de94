// ops_reduce.cc.h: reductions (sum, mean, max, ...), max/min with indices, topk and sort.
#include <numeric>

#include "ops.h"

namespace {

// Ops that libtorch reduces one dimension at a time.
at::Tensor reduce_one(int32_t op, const at::Tensor &a, int64_t dim, bool keep) {
  switch (op) {
    case CT_REDUCE_PROD: return at::prod(a, dim, keep);
    case CT_REDUCE_ANY: return at::any(a, dim, keep);
    case CT_REDUCE_ALL: return at::all(a, dim, keep);
    default: ct::bad_op("reduce", op);
  }
}

at::Tensor reduce_whole(int32_t op, const at::Tensor &a) {
  switch (op) {
    case CT_REDUCE_PROD: return at::prod(a);
    case CT_REDUCE_ANY: return at::any(a);
    case CT_REDUCE_ALL: return at::all(a);
    default: ct::bad_op("reduce", op);
  }
}

at::Tensor reduce(int32_t op, const at::Tensor &a, at::IntArrayRef dims, bool keep) {
  switch (op) {
    case CT_REDUCE_SUM: return at::sum(a, dims, keep);
    case CT_REDUCE_MEAN: return at::mean(a, dims, keep);
    case CT_REDUCE_MAX: return at::amax(a, dims, keep);
    case CT_REDUCE_MIN: return at::amin(a, dims, keep);
    case CT_REDUCE_LOGSUMEXP: return at::logsumexp(a, dims, keep);
    case CT_REDUCE_STD: return at::std(a, dims, /*unbiased=*/true, keep);
    case CT_REDUCE_VAR: return at::var(a, dims, /*unbiased=*/true, keep);
    case CT_REDUCE_NORM: return at::norm(a, 2, dims, keep);
    default: break;
  }
  if (dims.empty()) return reduce_whole(op, a);  // a 0-dim tensor
  // The others, one dimension at a time.
  at::Tensor r = a;
  for (int64_t d : ct::dims_last_first(dims, a.dim())) r = reduce_one(op, r, d, keep);
  return r;
}

}  // namespace

extern "C" {

ct_error ct_reduce(ct_tensor *out, int32_t op, ct_tensor a, const int64_t *dims, int32_t ndims,
                   int32_t keepdim) {
  return guard([&] {
    need_out(out);
    const auto &x = get(a);
    auto list = ct::to_dims(dims, ndims);
    std::vector<int64_t> all;
    if (list.empty()) {  // every dimension
      all.resize(static_cast<size_t>(x.dim()));
      std::iota(all.begin(), all.end(), 0);
      list = all;
    }
    ct::SerialBelow serial(x.numel());
    *out = wrap(serial.sized(reduce(op, x, list, keepdim != 0)));
  });
}

ct_error ct_reduce_with_indices(ct_tensor *values, ct_tensor *indices, int32_t op, ct_tensor a,
                                int64_t dim, int32_t keepdim) {
  return guard([&] {
    need_out(indices);
    if (op != CT_REDUCE_MAX && op != CT_REDUCE_MIN) ct::bad_op("reduce with indices", op);
    const auto &x = get(a);
    bool max = op == CT_REDUCE_MAX, keep = keepdim != 0;
    if (values == nullptr) {
      *indices = wrap(max ? at::argmax(x, dim, keep) : at::argmin(x, dim, keep));
      return;
    }
    auto r = max ? at::max(x, dim, keep) : at::min(x, dim, keep);
    ct::wrap_outputs({{values, std::get<0>(r)}, {indices, std::get<1>(r)}});
  });
}

ct_error ct_topk(ct_tensor *values, ct_tensor *indices, ct_tensor a, int64_t k, int64_t dim,
                 int32_t largest, int32_t sorted) {
  return guard([&] {
    need_out(values);
    need_out(indices);
    auto r = at::topk(get(a), k, dim, largest != 0, sorted != 0);
    ct::wrap_outputs({{values, std::get<0>(r)}, {indices, std::get<1>(r)}});
  });
}

ct_error ct_sort(ct_tensor *values, ct_tensor *indices, ct_tensor a, int64_t dim,
                 int32_t descending) {
  return guard([&] {
    need_out(values);
    need_out(indices);
    auto r = at::sort(get(a), /*stable=*/true, dim, descending != 0);
    ct::wrap_outputs({{values, std::get<0>(r)}, {indices, std::get<1>(r)}});
  });
}

}  // extern "C"
