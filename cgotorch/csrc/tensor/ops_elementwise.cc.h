// ops_elementwise.cc.h: elementwise operations: unary functions, binary arithmetic and comparisons
// (with tensors or scalars), in-place updates, clamp, where and masked_fill.
#include <ATen/ScalarOps.h>

#include "ops.h"

namespace {

at::Tensor unary(int32_t op, const at::Tensor &a) {
  switch (op) {
    case CT_OP_NEG: return at::neg(a);
    case CT_OP_ABS: return at::abs(a);
    case CT_OP_SQRT: return at::sqrt(a);
    case CT_OP_RSQRT: return at::rsqrt(a);
    case CT_OP_EXP: return at::exp(a);
    case CT_OP_LOG: return at::log(a);
    case CT_OP_LOG1P: return at::log1p(a);
    case CT_OP_SIGMOID: return at::sigmoid(a);
    case CT_OP_TANH: return at::tanh(a);
    case CT_OP_RELU: return at::relu(a);
    case CT_OP_GELU: return at::gelu(a);
    case CT_OP_SILU: return at::silu(a);
    case CT_OP_SQUARE: return at::square(a);
    case CT_OP_RECIPROCAL: return at::reciprocal(a);
    case CT_OP_SIGN: return at::sign(a);
    case CT_OP_FLOOR: return at::floor(a);
    case CT_OP_CEIL: return at::ceil(a);
    case CT_OP_ROUND: return at::round(a);
    case CT_OP_LOGICAL_NOT: return at::logical_not(a);
    default: ct::bad_op("unary", op);
  }
}

at::Tensor binary(int32_t op, const at::Tensor &a, const at::Tensor &b) {
  switch (op) {
    case CT_OP_ADD: return at::add(a, b);
    case CT_OP_SUB: return at::sub(a, b);
    case CT_OP_MUL: return at::mul(a, b);
    case CT_OP_DIV: return at::div(a, b);
    case CT_OP_POW: return at::pow(a, b);
    case CT_OP_REMAINDER: return at::remainder(a, b);
    case CT_OP_MAXIMUM: return at::maximum(a, b);
    case CT_OP_MINIMUM: return at::minimum(a, b);
    case CT_OP_EQ: return at::eq(a, b);
    case CT_OP_NE: return at::ne(a, b);
    case CT_OP_LT: return at::lt(a, b);
    case CT_OP_LE: return at::le(a, b);
    case CT_OP_GT: return at::gt(a, b);
    case CT_OP_GE: return at::ge(a, b);
    case CT_OP_LOGICAL_AND: return at::logical_and(a, b);
    case CT_OP_LOGICAL_OR: return at::logical_or(a, b);
    default: ct::bad_op("binary", op);
  }
}

// A scalar as a "wrapped number" tensor: libtorch's type promotion then treats it exactly like
// a Python scalar operand, so every binary op takes scalars through the same path.
at::Tensor scalar_operand(double s, const at::Tensor &like) {
  return at::native::wrapped_scalar_tensor(ct::to_scalar(s), like.device());
}

// self op= other, where other is a tensor or a Scalar.
template <class Other>
void inplace(int32_t op, const at::Tensor &self, const Other &other, const at::Scalar &alpha) {
  bool unit = alpha.toDouble() == 1.0;
  if (!unit && op != CT_OP_ADD && op != CT_OP_SUB) {
    throw ct::arg_error("alpha applies to in-place add and sub only");
  }
  switch (op) {
    case CT_OP_ADD: self.add_(other, alpha); break;
    case CT_OP_SUB: self.sub_(other, alpha); break;
    case CT_OP_MUL: self.mul_(other); break;
    case CT_OP_DIV: self.div_(other); break;
    case CT_OP_SET:
      if constexpr (std::is_same_v<Other, at::Tensor>) self.copy_(other); else self.fill_(other);
      break;
    default: ct::bad_op("in-place", op);
  }
}

}  // namespace

extern "C" {

ct_error ct_unary(ct_tensor *out, int32_t op, ct_tensor a) {
  return guard([&] {
    need_out(out);
    const at::Tensor &x = get(a);
    ct::SerialBelow serial(x.numel());
    *out = wrap(serial.sized(unary(op, x)));
  });
}

ct_error ct_binary(ct_tensor *out, int32_t op, ct_tensor a, ct_tensor b) {
  return guard([&] {
    need_out(out);
    const int64_t work = std::max(get(a).numel(), get(b).numel());
    ct::SerialBelow serial(work);
    *out = wrap(serial.sized(binary(op, get(a), get(b))));
  });
}

ct_error ct_binary_scalar(ct_tensor *out, int32_t op, ct_tensor a, double s) {
  return guard([&] {
    need_out(out);
    const auto &x = get(a);
    ct::SerialBelow serial(x.numel());
    *out = wrap(serial.sized(binary(op, x, scalar_operand(s, x))));
  });
}

ct_error ct_inplace_binary(ct_tensor self, int32_t op, ct_tensor other, double alpha) {
  return guard([&] { inplace(op, get(self), get(other), ct::to_scalar(alpha)); });
}

ct_error ct_inplace_scalar(ct_tensor self, int32_t op, double s) {
  return guard([&] { inplace(op, get(self), ct::to_scalar(s), at::Scalar(1)); });
}

ct_error ct_clamp(ct_tensor *out, ct_tensor a, double min, double max, int32_t has_min,
                  int32_t has_max) {
  return guard([&] {
    need_out(out);
    c10::optional<at::Scalar> lo, hi;
    if (has_min != 0) lo = ct::to_scalar(min);
    if (has_max != 0) hi = ct::to_scalar(max);
    const auto &x = get(a);
    *out = wrap(lo || hi ? at::clamp(x, lo, hi) : x.clone());
  });
}

ct_error ct_where(ct_tensor *out, ct_tensor cond, ct_tensor a, ct_tensor b) {
  return guard([&] { need_out(out); *out = wrap(at::where(get(cond), get(a), get(b))); });
}

ct_error ct_masked_fill(ct_tensor *out, ct_tensor a, ct_tensor mask, double value) {
  return guard([&] {
    need_out(out);
    *out = wrap(at::masked_fill(get(a), get(mask), ct::to_scalar(value)));
  });
}

}  // extern "C"
