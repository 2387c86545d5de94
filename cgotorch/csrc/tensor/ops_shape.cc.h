// ops_shape.cc.h: shape and layout changes (reshape, view, permute, squeeze, ...), narrow, and
// joining tensors (cat, stack).
#include "ops.h"

namespace {

at::Tensor squeeze_dims(const at::Tensor &a, at::IntArrayRef dims) {
  if (dims.empty()) return at::squeeze(a);
  at::Tensor r = a;
  for (int64_t d : ct::dims_last_first(dims, a.dim())) r = at::squeeze(r, d);
  return r;
}

at::Tensor shape_op(int32_t op, const at::Tensor &a, at::IntArrayRef args) {
  switch (op) {
    case CT_SHAPE_RESHAPE: return at::reshape(a, args);
    case CT_SHAPE_VIEW: return a.view(args);
    case CT_SHAPE_EXPAND: return a.expand(args);
    case CT_SHAPE_PERMUTE: return at::permute(a, args);
    case CT_SHAPE_TRANSPOSE:
      ct::need_nargs("transpose", args, 2);
      return at::transpose(a, args[0], args[1]);
    case CT_SHAPE_SQUEEZE: return squeeze_dims(a, args);
    case CT_SHAPE_UNSQUEEZE:
      ct::need_nargs("unsqueeze", args, 1);
      return at::unsqueeze(a, args[0]);
    case CT_SHAPE_FLATTEN:
      ct::need_nargs("flatten", args, 2);
      return at::flatten(a, args[0], args[1]);
    case CT_SHAPE_CONTIGUOUS:
      ct::need_nargs("contiguous", args, 0);
      return a.contiguous();
    case CT_SHAPE_CLONE:
      ct::need_nargs("clone", args, 0);
      return a.clone();
    default: ct::bad_op("shape", op);
  }
}

}  // namespace

extern "C" {

ct_error ct_shape_op(ct_tensor *out, int32_t op, ct_tensor a, const int64_t *args,
                     int32_t nargs) {
  return guard([&] { need_out(out); *out = wrap(shape_op(op, get(a), ct::to_dims(args, nargs))); });
}

ct_error ct_narrow(ct_tensor *out, ct_tensor a, int64_t dim, int64_t start, int64_t length) {
  return guard([&] { need_out(out); *out = wrap(at::narrow(get(a), dim, start, length)); });
}

ct_error ct_split(ct_tensor *outs, int32_t n, ct_tensor a, const int64_t *sizes, int64_t dim) {
  return guard([&] {
    if (outs == nullptr || sizes == nullptr) throw ct::arg_error("outs or sizes is NULL");
    if (n <= 0) throw ct::arg_error("split into no pieces");
    std::vector<int64_t> sz(sizes, sizes + n);
    std::vector<at::Tensor> pieces = at::split_with_sizes(get(a), sz, dim);
    std::vector<std::pair<ct_tensor *, at::Tensor>> wrapped;
    for (int32_t i = 0; i < n; i++) wrapped.emplace_back(&outs[i], pieces[static_cast<size_t>(i)]);
    ct::wrap_outputs(wrapped);
  });
}

ct_error ct_join(ct_tensor *out, int32_t op, const ct_tensor *ts, int32_t n, int64_t dim) {
  return guard([&] {
    need_out(out);
    if (op != CT_JOIN_CAT && op != CT_JOIN_STACK) ct::bad_op("join", op);
    if (n <= 0) throw ct::arg_error("nothing to join: the list of tensors is empty");
    if (ts == nullptr) throw ct::arg_error("tensor list is NULL");
    std::vector<at::Tensor> list;
    list.reserve(static_cast<size_t>(n));
    int64_t work = 0;
    for (int32_t i = 0; i < n; i++) {
      list.push_back(get(ts[i]));
      work += list.back().numel();
    }
    ct::SerialBelow serial(work);
    *out = wrap(serial.sized(op == CT_JOIN_CAT ? at::cat(list, dim) : at::stack(list, dim)));
  });
}

}  // extern "C"
