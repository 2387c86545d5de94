// ops_nn.cc.h: the building blocks of layers and training: matrix products, softmax, dropout
// and the losses.
#include "ops.h"

namespace {

constexpr int64_t reduction_number(ct_reduction r) { return static_cast<int64_t>(r); }
static_assert(reduction_number(CT_REDUCTION_NONE) == at::Reduction::None &&
                  reduction_number(CT_REDUCTION_MEAN) == at::Reduction::Mean &&
                  reduction_number(CT_REDUCTION_SUM) == at::Reduction::Sum,
              "ct_reduction must follow at::Reduction");

// PyTorch's binary_cross_entropy and binary_cross_entropy_with_logits refuse a target whose size
// differs from the input's (ValueError); libtorch's functions squeeze or broadcast it instead,
// giving losses of the wrong shape. (The other losses broadcast in PyTorch too, with a warning.)
void check_same_size(const char *name, const at::Tensor &input, const at::Tensor &target) {
  TORCH_CHECK(input.sizes() == target.sizes(), name, ": target size ", target.sizes(),
              " differs from input size ", input.sizes(), "; they must be the same");
}

at::Tensor loss(int32_t op, const at::Tensor &input, const at::Tensor &target, int64_t r) {
  switch (op) {
    case CT_LOSS_MSE: return at::mse_loss(input, target, r);
    case CT_LOSS_L1: return at::l1_loss(input, target, r);
    case CT_LOSS_SMOOTH_L1: return at::smooth_l1_loss(input, target, r, /*beta=*/1.0);
    case CT_LOSS_BCE:
      check_same_size("binary cross entropy", input, target);
      return at::binary_cross_entropy(input, target, {}, r);
    case CT_LOSS_BCE_WITH_LOGITS:
      check_same_size("binary cross entropy with logits", input, target);
      return at::binary_cross_entropy_with_logits(input, target, {}, {}, r);
    case CT_LOSS_CROSS_ENTROPY: return at::cross_entropy_loss(input, target, {}, r);
    case CT_LOSS_NLL: return at::nll_loss_nd(input, target, {}, r);
    default: ct::bad_op("loss", op);
  }
}

}  // namespace

extern "C" {

ct_error ct_mm(ct_tensor *out, ct_tensor a, ct_tensor b) {
  return guard([&] {
    need_out(out);
    const int64_t work = ct::matmul_work(get(a), get(b));
    ct::SerialBelow serial(work);
    *out = wrap(serial.sized(at::mm(get(a), get(b))));
  });
}

ct_error ct_matmul(ct_tensor *out, ct_tensor a, ct_tensor b) {
  return guard([&] {
    need_out(out);
    const int64_t work = ct::matmul_work(get(a), get(b));
    ct::SerialBelow serial(work);
    *out = wrap(serial.sized(at::matmul(get(a), get(b))));
  });
}

ct_error ct_linear(ct_tensor *out, ct_tensor x, ct_tensor weight, ct_tensor bias) {
  return guard([&] {
    need_out(out);
    const at::Tensor *b = ct::get_optional(bias);
    const at::Tensor &w = get(weight);
    const int64_t work = ct::product_work(get(x).numel(), w.dim() == 2 ? w.size(0) : 1);  // (w is [m, n])
    ct::SerialBelow serial(work);
    *out = wrap(serial.sized(at::linear(get(x), w, b != nullptr ? c10::optional<at::Tensor>(*b) : c10::nullopt)));
  });
}

ct_error ct_softmax(ct_tensor *out, ct_tensor a, int64_t dim, int32_t log) {
  return guard([&] {
    need_out(out);
    const auto &x = get(a);
    *out = wrap(log != 0 ? at::log_softmax(x, dim) : at::softmax(x, dim));
  });
}

ct_error ct_dropout(ct_tensor *out, ct_tensor a, double p, int32_t train) {
  return guard([&] { need_out(out); *out = wrap(at::dropout(get(a), p, train != 0)); });
}

ct_error ct_loss(ct_tensor *out, int32_t op, ct_tensor input, ct_tensor target,
                 int32_t reduction) {
  return guard([&] {
    need_out(out);
    if (reduction < CT_REDUCTION_NONE || reduction > CT_REDUCTION_SUM) {
      throw ct::arg_error("unknown reduction " + std::to_string(reduction));
    }
    const int64_t work = get(input).numel();
    ct::SerialBelow serial(work);
    *out = wrap(serial.sized(loss(op, get(input), get(target), reduction)));
  });
}

}  // extern "C"
