// optim_step.cc.h: ct_optim_step, a dense optimizer's update of one parameter in one call. The
// operations and their order are those of torch.optim in PyTorch 1.13 (_single_tensor_sgd,
// _single_tensor_adam, _single_tensor_adamw, _single_tensor_adagrad).
#include <cmath>
#include <string>

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
  at::Tensor denom = (v.sqrt() / bc2_sqrt).add_(o.eps);
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

}  // namespace

extern "C" {

ct_error ct_optim_step(ct_tensor param, ct_tensor grad, ct_tensor state0, ct_tensor state1,
                       ct_tensor state2, int64_t step, const ct_optim_options *o) {
  return ct::guard([&] {
    if (o == nullptr) throw ct::arg_error("optimizer options are NULL");
    if (step < 1) throw ct::arg_error("optimizer step must be >= 1, got " + std::to_string(step));
    at::Tensor p = ct::get(param);
    const at::Tensor &g = ct::get(grad);
    if (!g.sizes().equals(p.sizes())) throw ct::arg_error("gradient is not shaped like the parameter");
    c10::NoGradGuard no_grad;
    switch (o->kind) {
      case CT_OPTIM_SGD:
        sgd(p, g, state0, step, *o);
        return;
      case CT_OPTIM_ADAM:
      case CT_OPTIM_ADAMW:
        adam(p, g, state0, state1, state2, step, *o, o->kind == CT_OPTIM_ADAMW);
        return;
      case CT_OPTIM_ADAGRAD:
        adagrad(p, g, state0, step, *o);
        return;
      default:
        throw ct::arg_error("unknown optimizer kind " + std::to_string(o->kind));
    }
  });
}

}  // extern "C"
