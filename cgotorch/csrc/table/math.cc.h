// math.cc.h: the numbers of the embedding tables: initializers of new rows (a counter-based
// generator) and the optimizer rules, each as a raw CPU kernel for one row (optim_rows.h) and as
// a tensor kernel (any device) for gathered rows.
//
// Optimizer rules. g is a row's gradient after summing the gradients of repeated ids; t is the
// table's step counter, incremented once per update call (every row of a step sees the same t);
// only the rows present in an update change, except for SGD with momentum (see SGD).
//
//   SGD (lr, momentum m, dampening d, nesterov): without momentum w -= lr * g. With momentum,
//     PyTorch's rule for nn.Embedding(sparse=True): buf = g at the optimizer's first step (t = 1),
//     else buf = m * buf + (1 - d) * g; step = nesterov ? g + m * buf : buf; w -= lr * step, and
//     rows absent from a step keep moving with their decaying buffer (g = 0). The table applies
//     those absent steps lazily: a row stamped with the step it was last brought up to date,
//     k steps behind, moves by -lr * S(k) * buf with S(k) = m + m^2 + ... + m^k (times m for
//     nesterov) and its buffer becomes m^k * buf. Reads, exports, writes and updates all see the
//     caught-up values, so the numbers are PyTorch's (within float rounding of the closed form).
//   Adagrad (lr, lr_decay, initial_accumulator_value, eps), PyTorch's sparse rule:
//     clr = lr / (1 + (t - 1) * lr_decay); sum += g * g; w -= clr * g / (sqrt(sum) + eps).
//   Row-wise Adagrad (same parameters; one accumulator per row, as in TorchRec/FBGEMM):
//     sum += mean_j(g_j^2); w -= clr * g / (sqrt(sum) + eps).
//   SparseAdam (lr, beta1, beta2, eps), PyTorch's rule with the table's global step:
//     m += (1 - b1) * (g - m); v += (1 - b2) * (g^2 - v);
//     w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps).
//   AdamW (lr, beta1, beta2, eps, weight_decay): PyTorch's AdamW applied to the rows present
//     (lazy, global step): w *= 1 - lr * wd; m = b1 * m + (1 - b1) * g; v = b2 * v + (1 - b2) g^2;
//     w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
//   FTRL-Proximal (alpha, beta, l1, l2, initial_accumulator_value; McMahan et al. 2013, per
//     coordinate, with the current weight in the linear term as in TensorFlow's ApplyFtrl, so
//     that rows may start from any initializer): n' = n + g^2;
//     sigma = (sqrt(n') - sqrt(n)) / alpha; z += g - sigma * w; n = n';
//     w = |z| <= l1 ? 0 : -(z - sign(z) * l1) / ((beta + sqrt(n)) / alpha + l2).
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <algorithm>

#include "internal.h"

namespace ct {
namespace table {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// splitmix64's finaliser: a bijection with full avalanche.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The random stream of one row: splitmix64 keyed by (seed, id), indexed by a counter.
struct RowStream {
  uint64_t key;
  RowStream(uint64_t seed, int64_t id) : key(mix64(mix64(seed * kGolden + 1) ^ static_cast<uint64_t>(id))) {}
  uint64_t bits(uint64_t ctr) const { return mix64(key + (ctr + 1) * kGolden); }
  // [0, 1)
  double u01(uint64_t ctr) const { return static_cast<double>(bits(ctr) >> 11) * 0x1.0p-53; }
  // (0, 1)
  double uopen(uint64_t ctr) const { return (static_cast<double>(bits(ctr) >> 11) + 0.5) * 0x1.0p-53; }
  // Standard normal number k: Box-Muller on uniforms 2p and 2p + 1 (p = k / 2) gives a pair of
  // independent normals, r cos(theta) for even k and r sin(theta) for odd k.
  double normal(uint64_t k) const {
    const uint64_t p = k / 2;
    const double r = std::sqrt(-2.0 * std::log(uopen(2 * p)));
    const double th = 2.0 * M_PI * u01(2 * p + 1);
    return r * ((k & 1) == 0 ? std::cos(th) : std::sin(th));
  }
  // Normals 0 .. n-1 into out, a pair at a time.
  void normals(int64_t n, double mean, double std, float *out) const {
    for (int64_t k = 0; k + 1 < n; k += 2) {
      const uint64_t p = static_cast<uint64_t>(k) / 2;
      const double r = std::sqrt(-2.0 * std::log(uopen(2 * p)));
      const double th = 2.0 * M_PI * u01(2 * p + 1);
      out[k] = static_cast<float>(mean + std * r * std::cos(th));
      out[k + 1] = static_cast<float>(mean + std * r * std::sin(th));
    }
    if (n % 2 == 1) out[n - 1] = static_cast<float>(mean + std * normal(static_cast<uint64_t>(n - 1)));
  }
};

bool finite(double x) { return std::isfinite(x); }

void need(bool ok, const std::string &msg) {
  if (!ok) throw arg_error(msg);
}

// The largest |z| RowStream::normal(s) can give: r = sqrt(-2 ln u) with u >= 2^-54 (uopen) is at
// most sqrt(108 ln 2) = 8.6521..., and |cos|, |sin| <= 1; rounded up to cover rounding.
constexpr double kMaxAbsNormal = 8.66;

std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", x);
  return b;
}

// Whether a double is within float32's range (so that it converts to a finite float). False for
// NaN.
bool fits_float(double x) { return std::fabs(x) <= static_cast<double>(FLT_MAX); }

std::string float_range() {
  char b[48];
  std::snprintf(b, sizeof b, "float32's range (|x| <= %.17g)", static_cast<double>(FLT_MAX));
  return b;
}

}  // namespace

// ---- initializers -------------------------------------------------------------------------

// Besides the parameters' own constraints, every value row() can produce must be a finite
// float32: rows are float32, and a row of Inf (a finite double beyond float32's range) would be
// saved by a checkpoint that then fails to load, and refused by every delta. The bounds follow
// row(): constant and uniform values lie in [low, high]; normal ones within |mean| +
// kMaxAbsNormal * std; truncated normal ones in [low, high] (a draw outside is redrawn, and the
// fallback is uniform on [low, high]); Xavier's scale depends on the fans, dim by default.
void Init::validate() const {
  for (double x : p) need(finite(x), "initializer parameters must be finite");
  // |mean| + kMaxAbsNormal * std within float32's range (NaN-safe: an overflow to Inf fails).
  auto normal_fits = [](double mean, double std) {
    return fits_float(std::fabs(mean) + kMaxAbsNormal * std);
  };
  switch (kind) {
    case CT_INIT_ZEROS:
      return;
    case CT_INIT_CONSTANT:
      need(fits_float(p[0]), "constant initializer: value " + num(p[0]) + " is beyond " + float_range());
      return;
    case CT_INIT_UNIFORM:
      need(p[0] <= p[1], "uniform initializer needs low <= high");
      need(fits_float(p[0]), "uniform initializer: low " + num(p[0]) + " is beyond " + float_range());
      need(fits_float(p[1]), "uniform initializer: high " + num(p[1]) + " is beyond " + float_range());
      return;
    case CT_INIT_NORMAL:
      need(p[1] >= 0, "normal initializer needs std >= 0");
      need(fits_float(p[0]), "normal initializer: mean " + num(p[0]) + " is beyond " + float_range());
      need(normal_fits(p[0], p[1]),
           "normal initializer: std " + num(p[1]) + " (mean " + num(p[0]) + ") can give values beyond " +
               float_range() + ": |mean| + " + num(kMaxAbsNormal) + " * std must be within it");
      return;
    case CT_INIT_TRUNCATED_NORMAL:
      need(p[1] >= 0, "truncated normal initializer needs std >= 0");
      need(p[2] < p[3], "truncated normal initializer needs low < high");
      need(fits_float(p[2]), "truncated normal initializer: low " + num(p[2]) + " is beyond " + float_range());
      need(fits_float(p[3]), "truncated normal initializer: high " + num(p[3]) + " is beyond " + float_range());
      return;
    case CT_INIT_XAVIER_UNIFORM:
    case CT_INIT_XAVIER_NORMAL: {
      need(p[0] >= 0 && p[1] >= 0 && p[2] >= 0, "xavier initializer needs gain, fans >= 0");
      // As row() computes them.
      const double fan_in = p[1] > 0 ? p[1] : static_cast<double>(dim);
      const double fan_out = p[2] > 0 ? p[2] : static_cast<double>(dim);
      const std::string what = kind == CT_INIT_XAVIER_UNIFORM ? "xavier uniform" : "xavier normal";
      const std::string fans = " (fan_in " + num(fan_in) + ", fan_out " + num(fan_out) + ")";
      if (kind == CT_INIT_XAVIER_UNIFORM) {
        const double b = p[0] * std::sqrt(6.0 / (fan_in + fan_out));
        need(fits_float(b), what + " initializer: gain " + num(p[0]) + " gives the bound " + num(b) + fans +
                                ", beyond " + float_range());
      } else {
        const double s = p[0] * std::sqrt(2.0 / (fan_in + fan_out));
        need(normal_fits(0, s), what + " initializer: gain " + num(p[0]) + " gives the std " + num(s) + fans +
                                    ", which can give values beyond " + float_range() + ": " +
                                    num(kMaxAbsNormal) + " * std must be within it");
      }
      return;
    }
    default:
      throw arg_error("unknown initializer " + std::to_string(kind));
  }
}

double Init::bound() const {
  switch (kind) {
    case CT_INIT_CONSTANT: return std::fabs(p[0]);
    case CT_INIT_UNIFORM: return std::max(std::fabs(p[0]), std::fabs(p[1]));
    case CT_INIT_NORMAL: return std::fabs(p[0]) + kMaxAbsNormal * p[1];
    case CT_INIT_TRUNCATED_NORMAL: return std::max(std::fabs(p[2]), std::fabs(p[3]));
    case CT_INIT_XAVIER_UNIFORM:
    case CT_INIT_XAVIER_NORMAL: {
      const double fan_in = p[1] > 0 ? p[1] : static_cast<double>(dim);
      const double fan_out = p[2] > 0 ? p[2] : static_cast<double>(dim);
      if (kind == CT_INIT_XAVIER_UNIFORM) return p[0] * std::sqrt(6.0 / (fan_in + fan_out));
      return kMaxAbsNormal * p[0] * std::sqrt(2.0 / (fan_in + fan_out));
    }
    default: return 0;
  }
}

void Init::row(int64_t id, float *out) const {
  const RowStream rs(seed, id);
  const int64_t d = dim;
  switch (kind) {
    case CT_INIT_ZEROS:
      std::memset(out, 0, sizeof(float) * static_cast<size_t>(d));
      return;
    case CT_INIT_CONSTANT:
      for (int64_t j = 0; j < d; j++) out[j] = static_cast<float>(p[0]);
      return;
    case CT_INIT_UNIFORM:
      for (int64_t j = 0; j < d; j++) out[j] = static_cast<float>(p[0] + (p[1] - p[0]) * rs.u01(j));
      return;
    case CT_INIT_NORMAL:
      rs.normals(d, p[0], p[1], out);
      return;
    case CT_INIT_TRUNCATED_NORMAL:
      // Resampling: attempt a of column j uses counters (a * dim + j); after 64 rejections
      // (only for bounds far in a tail) a uniform sample of [low, high] is used.
      for (int64_t j = 0; j < d; j++) {
        double x = 0;
        int a = 0;
        for (; a < 64; a++) {
          x = p[0] + p[1] * rs.normal(static_cast<uint64_t>(a) * d + j);
          if (x >= p[2] && x <= p[3]) break;
        }
        if (a == 64) x = p[2] + (p[3] - p[2]) * rs.u01(static_cast<uint64_t>(128) * d + j);
        out[j] = static_cast<float>(x);
      }
      return;
    case CT_INIT_XAVIER_UNIFORM:
    case CT_INIT_XAVIER_NORMAL: {
      double fan_in = p[1] > 0 ? p[1] : static_cast<double>(d);
      double fan_out = p[2] > 0 ? p[2] : static_cast<double>(d);
      if (kind == CT_INIT_XAVIER_UNIFORM) {
        double b = p[0] * std::sqrt(6.0 / (fan_in + fan_out));
        for (int64_t j = 0; j < d; j++) out[j] = static_cast<float>(-b + 2 * b * rs.u01(j));
      } else {
        rs.normals(d, 0.0, p[0] * std::sqrt(2.0 / (fan_in + fan_out)), out);
      }
      return;
    }
    default:
      throw arg_error("unknown initializer " + std::to_string(kind));
  }
}

// ---- optimizers ---------------------------------------------------------------------------

namespace {
// Where each optimizer's parameters are in the C ABI's opt_params (cgotorch.h, ct_table_optimizer).
struct ParamOrder {
  int n;
  double OptimParams::*at[5];
};
ParamOrder param_order(int32_t kind) {
  using P = OptimParams;
  switch (kind) {
    case CT_OPT_SGD: return {4, {&P::lr, &P::momentum, &P::dampening, &P::nesterov}};
    case CT_OPT_ADAGRAD:
    case CT_OPT_ROWWISE_ADAGRAD: return {4, {&P::lr, &P::lr_decay, &P::initial_accumulator_value, &P::eps}};
    case CT_OPT_SPARSE_ADAM: return {4, {&P::lr, &P::beta1, &P::beta2, &P::eps}};
    case CT_OPT_ADAMW: return {5, {&P::lr, &P::beta1, &P::beta2, &P::eps, &P::weight_decay}};
    case CT_OPT_FTRL: return {5, {&P::lr, &P::beta, &P::l1, &P::l2, &P::initial_accumulator_value}};
    default: return {0, {}};
  }
}
}  // namespace

OptimParams OptimParams::from_array(int32_t kind, const double a[8]) {
  for (int i = 0; i < 8; i++) need(finite(a[i]), "optimizer parameters must be finite");
  OptimParams p;
  const ParamOrder o = param_order(kind);
  for (int i = 0; i < o.n; i++) p.*o.at[i] = a[i];
  return p;
}

void OptimParams::to_array(int32_t kind, double a[8]) const {
  std::fill(a, a + 8, 0.0);
  const ParamOrder o = param_order(kind);
  for (int i = 0; i < o.n; i++) a[i] = this->*o.at[i];
}

void Optim::validate() const {
  double a[8];
  p.to_array(kind, a);
  for (double x : a) need(finite(x), "optimizer parameters must be finite");
  switch (kind) {
    case CT_OPT_NONE:
      return;
    case CT_OPT_SGD:
      need(p.lr >= 0, "SGD needs lr >= 0");
      need(p.momentum >= 0, "SGD needs momentum >= 0");
      need(p.nesterov == 0 || p.nesterov == 1, "SGD nesterov must be 0 or 1");
      need(p.nesterov == 0 || (p.momentum > 0 && p.dampening == 0),
           "SGD nesterov needs a momentum and zero dampening");
      return;
    case CT_OPT_ADAGRAD:
    case CT_OPT_ROWWISE_ADAGRAD:
      need(p.lr >= 0, "Adagrad needs lr >= 0");
      need(p.lr_decay >= 0, "Adagrad needs lr_decay >= 0");
      need(p.initial_accumulator_value >= 0, "Adagrad needs initial_accumulator_value >= 0");
      need(p.eps > 0, "Adagrad needs eps > 0");
      return;
    case CT_OPT_SPARSE_ADAM:
    case CT_OPT_ADAMW:
      need(p.lr >= 0, "Adam needs lr >= 0");
      need(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1, "Adam needs betas in [0, 1)");
      need(p.eps > 0, "Adam needs eps > 0");
      need(kind == CT_OPT_SPARSE_ADAM || p.weight_decay >= 0, "AdamW needs weight_decay >= 0");
      return;
    case CT_OPT_FTRL:
      need(p.lr > 0, "FTRL needs alpha > 0");
      need(p.beta >= 0 && p.l1 >= 0 && p.l2 >= 0, "FTRL needs beta, l1, l2 >= 0");
      need(p.initial_accumulator_value >= 0, "FTRL needs initial_accumulator_value >= 0");
      return;
    default:
      throw arg_error("unknown optimizer " + std::to_string(kind));
  }
}

int Optim::num_states() const {
  switch (kind) {
    case CT_OPT_SGD: return has_momentum() ? 1 : 0;
    case CT_OPT_ADAGRAD:
    case CT_OPT_ROWWISE_ADAGRAD: return 1;
    case CT_OPT_SPARSE_ADAM:
    case CT_OPT_ADAMW:
    case CT_OPT_FTRL: return 2;
    default: return 0;
  }
}

StateSpec Optim::state_shape(int i) const {
  switch (kind) {
    case CT_OPT_SGD: return {"momentum_buffer", true, 0.f, false};
    case CT_OPT_ADAGRAD: return {"sum", true, 0.f, true};
    case CT_OPT_ROWWISE_ADAGRAD: return {"sum", false, 0.f, true};
    case CT_OPT_SPARSE_ADAM:
    case CT_OPT_ADAMW:
      return i == 0 ? StateSpec{"exp_avg", true, 0.f, false} : StateSpec{"exp_avg_sq", true, 0.f, true};
    case CT_OPT_FTRL:
      return i == 0 ? StateSpec{"z", true, 0.f, false} : StateSpec{"n", true, 0.f, true};
    default: throw std::logic_error("optimizer has no state");
  }
}

StateSpec Optim::state(int i) const {
  StateSpec s = state_shape(i);
  if (kind == CT_OPT_ADAGRAD || kind == CT_OPT_ROWWISE_ADAGRAD) s.init = static_cast<float>(p.initial_accumulator_value);
  if (kind == CT_OPT_FTRL && i == 1) s.init = static_cast<float>(p.initial_accumulator_value);
  return s;
}

StepConsts Optim::begin(int64_t t) const {
  StepConsts c;
  c.t = t;
  switch (kind) {
    case CT_OPT_ADAGRAD:
    case CT_OPT_ROWWISE_ADAGRAD:
      c.clr = p.lr / (1 + static_cast<double>(t - 1) * p.lr_decay);
      break;
    case CT_OPT_SPARSE_ADAM: {
      double bc1 = 1 - std::pow(p.beta1, static_cast<double>(t));
      double bc2 = 1 - std::pow(p.beta2, static_cast<double>(t));
      c.step_size = p.lr * std::sqrt(bc2) / bc1;
      break;
    }
    case CT_OPT_ADAMW: {
      double bc1 = 1 - std::pow(p.beta1, static_cast<double>(t));
      double bc2 = 1 - std::pow(p.beta2, static_cast<double>(t));
      c.step_size = p.lr / bc1;
      c.bc2_sqrt = std::sqrt(bc2);
      break;
    }
    default:
      break;
  }
  return c;
}

// Each bound follows the rule's formulas with |w| <= M[0], |s0| <= M[1], |s1| <= M[2], |g| <= G,
// every denominator at least its eps (sqrt() >= 0), the states kept >= 0 non-negative, and a
// convex combination (Adam's moments) bounded by the sum of the bounds (which also covers its
// float rounding). See the rules at the top of this file.
double Optim::step_bound(const StepConsts &c, const double M[3], double G, double out[3]) const {
  const double inf = std::numeric_limits<double>::infinity();
  out[0] = out[1] = out[2] = inf;
  switch (kind) {
    case CT_OPT_SGD: {
      const double lr = p.lr;
      if (!has_momentum()) return out[0] = M[0] + lr * G;
      const double m = p.momentum;
      if (m > 1) return inf;
      // Catch-up over at most t - 1 steps: |w| <= M0 + lr S M1, |buf| <= M1 (m^k <= 1).
      double S = m == 1 ? static_cast<double>(c.t) : m / (1 - m);
      if (p.nesterov != 0) S *= m;
      const double b = c.t == 1 ? G : m * M[1] + std::fabs(1 - p.dampening) * G;
      out[0] = M[0] + lr * S * M[1] + lr * (p.nesterov != 0 ? G + m * b : b);
      out[1] = std::max(M[1], b);
      return std::max(out[0], out[1]);
    }
    case CT_OPT_ADAGRAD:
    case CT_OPT_ROWWISE_ADAGRAD:
      out[0] = M[0] + c.clr * G / p.eps;
      out[1] = M[1] + G * G;
      return std::max(out[0], out[1]);
    case CT_OPT_SPARSE_ADAM:
    case CT_OPT_ADAMW: {
      out[1] = M[1] + G;
      out[2] = M[2] + G * G;
      const double decay = kind == CT_OPT_ADAMW ? std::fabs(1 - p.lr * p.weight_decay) : 1.0;
      out[0] = M[0] * decay + c.step_size * out[1] / p.eps;
      return std::max({out[0], out[1], out[2]});
    }
    case CT_OPT_FTRL: {
      const double alpha = p.lr, beta = p.beta, l1 = p.l1, l2 = p.l2;
      out[2] = M[2] + G * G;
      out[1] = M[1] + G + std::sqrt(out[2]) / alpha * M[0];
      const double q = beta / alpha + l2;
      if (!(q > 0)) return inf;
      out[0] = (out[1] + l1) / q;
      return std::max({out[0], out[1], out[2]});
    }
    default:
      return inf;
  }
}

void Optim::catch_up_factors(int64_t k, double *S, double *decay) const {
  const double m = p.momentum;
  const double mk = std::pow(m, static_cast<double>(k));
  double s = m == 1.0 ? static_cast<double>(k) : m * (1 - mk) / (1 - m);
  if (p.nesterov != 0) s *= m;
  *S = s;
  *decay = mk;
}

void Optim::apply(const StepConsts &c, const at::Tensor &g, at::Tensor &w, at::Tensor *s0,
                  at::Tensor *s1) const {
  switch (kind) {
    case CT_OPT_SGD: {
      if (!has_momentum()) {
        w.add_(g, -p.lr);
        return;
      }
      if (c.t == 1) {
        s0->copy_(g);
      } else {
        s0->mul_(p.momentum).add_(g, 1 - p.dampening);
      }
      if (p.nesterov != 0) {
        w.add_(g.add(*s0, p.momentum), -p.lr);
      } else {
        w.add_(*s0, -p.lr);
      }
      return;
    }
    case CT_OPT_ADAGRAD: {
      s0->addcmul_(g, g, 1);
      auto std = s0->sqrt().add_(p.eps);
      w.add_(g / std, -c.clr);
      return;
    }
    case CT_OPT_ROWWISE_ADAGRAD: {
      s0->add_(g.to(at::kDouble).pow(2).mean(1, true).to(at::kFloat));
      auto denom = s0->sqrt().add_(p.eps);
      w.add_(g / denom, -c.clr);
      return;
    }
    case CT_OPT_SPARSE_ADAM: {
      auto mu = (g - *s0).mul_(1 - p.beta1);
      auto vu = (g * g - *s1).mul_(1 - p.beta2);
      auto numer = mu + *s0;
      auto denom = (vu + *s1).sqrt_().add_(p.eps);
      s0->add_(mu);
      s1->add_(vu);
      w.add_(numer / denom, -c.step_size);
      return;
    }
    case CT_OPT_ADAMW: {
      w.mul_(1 - p.lr * p.weight_decay);
      s0->mul_(p.beta1).add_(g, 1 - p.beta1);
      s1->mul_(p.beta2).addcmul_(g, g, 1 - p.beta2);
      auto denom = (s1->sqrt() / c.bc2_sqrt).add_(p.eps);
      w.addcdiv_(*s0, denom, -c.step_size);
      return;
    }
    case CT_OPT_FTRL: {
      const double alpha = p.lr, beta = p.beta, l1 = p.l1, l2 = p.l2;
      auto gd = g.to(at::kDouble), wd = w.to(at::kDouble);
      auto n0 = s1->to(at::kDouble), n1 = n0 + gd * gd;
      auto sigma = (n1.sqrt() - n0.sqrt()) / alpha;
      auto z = s0->to(at::kDouble) + gd - sigma * wd;
      auto wn = -(z - z.sign() * l1) / ((n1.sqrt() + beta) / alpha + l2);
      wn = at::where(z.abs() > l1, wn, at::zeros_like(wn));
      s0->copy_(z);
      s1->copy_(n1);
      w.copy_(wn);
      return;
    }
    default:
      throw arg_error("the table has no optimizer");
  }
}

}  // namespace table
}  // namespace ct
