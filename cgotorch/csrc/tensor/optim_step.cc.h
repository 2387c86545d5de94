// optim_step.cc.h: ct_optim_step, a dense optimizer's update of one parameter in one call. The
// operations and their order are those of torch.optim in PyTorch 1.13 (_single_tensor_sgd,
// _single_tensor_adam, _single_tensor_adamw, _single_tensor_adagrad).
#include <cmath>
#include <string>
#include <vector>

#include "internal.h"

namespace {

// A state tensor the rule needs: present and shaped like the parameter.
at::Tensor need_state(ct_tensor h, const at::Tensor &param, const char *what) {
  const at::Tensor *t = ct::get_optional(h);
  if (t == nullptr) throw ct::arg_error(std::string("optimizer state ") + what + " is NULL");
  if (!t->sizes().equals(param.sizes())) {
    throw ct::arg_error(std::string("optimizer state ") + what + " is not shaped like the parameter");
  }
  return *t;
}

void sgd(at::Tensor &p, at::Tensor g, ct_tensor buf_h, int64_t step, const ct_optim_options &o) {
  if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
  if (o.momentum != 0) {
    at::Tensor buf = need_state(buf_h, p, "momentum_buffer");
    if (step == 1) {
      buf.copy_(g);
    } else {
      buf.mul_(o.momentum).add_(g, 1 - o.dampening);
    }
    g = o.nesterov ? g.add(buf, o.momentum) : buf;
  }
  p.add_(g, -o.lr);
}

void adam(at::Tensor &p, at::Tensor g, ct_tensor s0, ct_tensor s1, ct_tensor s2, int64_t step,
          const ct_optim_options &o, bool decoupled) {
  at::Tensor exp_avg = need_state(s0, p, "exp_avg");
  at::Tensor exp_avg_sq = need_state(s1, p, "exp_avg_sq");
  // Every state is checked before anything changes: a failed step must leave all as it was.
  at::Tensor max_sq = o.amsgrad ? need_state(s2, p, "max_exp_avg_sq") : at::Tensor();
  if (decoupled) {
    p.mul_(1 - o.lr * o.weight_decay);
  } else if (o.weight_decay != 0) {
    g = g.add(p, o.weight_decay);
  }
  exp_avg.mul_(o.beta1).add_(g, 1 - o.beta1);
  exp_avg_sq.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
  const double t = static_cast<double>(step);
  const double bc1 = 1 - std::pow(o.beta1, t);
  const double bc2_sqrt = std::sqrt(1 - std::pow(o.beta2, t));
  at::Tensor v = exp_avg_sq;
  if (o.amsgrad) {
    at::maximum_out(max_sq, max_sq, exp_avg_sq);
    v = max_sq;
  }
  at::Tensor denom = v.sqrt().div_(bc2_sqrt).add_(o.eps);  // (v.sqrt() / bc2_sqrt) in place
  p.addcdiv_(exp_avg, denom, -(o.lr / bc1));
}

void adagrad(at::Tensor &p, at::Tensor g, ct_tensor s0, int64_t step, const ct_optim_options &o) {
  at::Tensor sum = need_state(s0, p, "sum");
  if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
  const double clr = o.lr / (1 + static_cast<double>(step - 1) * o.lr_decay);
  sum.addcmul_(g, g, 1);
  at::Tensor std = sum.sqrt().add_(o.eps);
  p.addcdiv_(g, std, -clr);
}

// Throws unless o, step, the gradient (when defined) and the states the rule reads are valid for
// param: what a step checks before it changes anything.
void check_step(const at::Tensor &p, const at::Tensor &g, const ct_tensor s[3], int64_t step,
                const ct_optim_options &o) {
  if (step < 1) throw ct::arg_error("optimizer step must be >= 1, got " + std::to_string(step));
  if (!g.sizes().equals(p.sizes())) throw ct::arg_error("gradient is not shaped like the parameter");
  switch (o.kind) {
    case CT_OPTIM_SGD:
      if (o.momentum != 0) need_state(s[0], p, "momentum_buffer");
      return;
    case CT_OPTIM_ADAM:
    case CT_OPTIM_ADAMW:
      need_state(s[0], p, "exp_avg");
      need_state(s[1], p, "exp_avg_sq");
      if (o.amsgrad) need_state(s[2], p, "max_exp_avg_sq");
      return;
    case CT_OPTIM_ADAGRAD:
      need_state(s[0], p, "sum");
      return;
    default:
      throw ct::arg_error("unknown optimizer kind " + std::to_string(o.kind));
  }
}

// One step of the rule, once check_step has passed.
void apply_step(at::Tensor &p, const at::Tensor &g, const ct_tensor s[3], int64_t step, const ct_optim_options &o) {
  ct::SerialBelow serial(p.numel());  // libtorch's sqrt and division split from 2,048 elements
  switch (o.kind) {
    case CT_OPTIM_SGD:
      sgd(p, g, s[0], step, o);
      return;
    case CT_OPTIM_ADAM:
    case CT_OPTIM_ADAMW:
      adam(p, g, s[0], s[1], s[2], step, o, o.kind == CT_OPTIM_ADAMW);
      return;
    default:
      adagrad(p, g, s[0], step, o);
  }
}

}  // namespace

extern "C" {

ct_error ct_optim_step(ct_tensor param, ct_tensor grad, ct_tensor state0, ct_tensor state1,
                       ct_tensor state2, int64_t step, const ct_optim_options *o) {
  return ct::guard([&] {
    if (o == nullptr) throw ct::arg_error("optimizer options are NULL");
    at::Tensor p = ct::get(param);
    const at::Tensor &g = ct::get(grad);
    const ct_tensor s[3] = {state0, state1, state2};
    check_step(p, g, s, step, *o);
    c10::NoGradGuard no_grad;
    apply_step(p, g, s, step, *o);
  });
}

ct_error ct_optim_step_params(int32_t *stepped, int32_t n, const ct_tensor *params,
                              const ct_tensor *states, const int64_t *steps,
                              const ct_optim_options *o) {
  return ct::guard([&] {
    if (o == nullptr) throw ct::arg_error("optimizer options are NULL");
    if (n < 0 || (n > 0 && (params == nullptr || states == nullptr || steps == nullptr))) {
      throw ct::arg_error("optimizer step: NULL arrays or a negative count");
    }
    std::vector<at::Tensor> ps(static_cast<size_t>(n)), gs(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; i++) {
      ps[i] = ct::get(params[i]);
      gs[i] = ps[i].grad();
      if (gs[i].defined()) check_step(ps[i], gs[i], states + 3 * i, steps[i], *o);
    }
    c10::NoGradGuard no_grad;
    for (int32_t i = 0; i < n; i++) {
      if (gs[i].defined()) apply_step(ps[i], gs[i], states + 3 * i, steps[i], *o);
      if (stepped != nullptr) stepped[i] = gs[i].defined() ? 1 : 0;
    }
  });
}

}  // extern "C"

