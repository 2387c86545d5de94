// optim_rows.h: the raw optimizer kernels (the rules of math.cc.h's header) as one row's step:
// with_row_kernel(o, c, f) calls f(kernel) once, where kernel(g, w, s0, s1) is rule o.kind's
// step of one row (g the row's summed gradient, w the row, s0/s1 its states, nullptr when
// absent) with the step's constants (c) converted to float and the kernel chosen (AVX-512 or
// four lanes) before the rows.
//
// Why: a step of many rows (SVD++'s implicit bags: about 7.5k rows of 128 a step) called
// Optim::apply per row, which switched on the rule, converted its parameters from double and
// checked for AVX-512 every row. f is a generic lambda whose loop over the rows is compiled
// once per rule with the kernel inline (Table::step_raw); Optim::apply is the same kernel for
// one row.
//
// The kernels mirror PyTorch's float32 operation order so that results agree to rounding; they
// run four elements at a time where they can (lanes.h), or sixteen (optim_avx512.cc.h): the
// results are the same. In each body, L is the lane (L.load, L.store: one float, or four).
#ifndef CT_TABLE_OPTIM_ROWS_H
#define CT_TABLE_OPTIM_ROWS_H

#include <cmath>
#include <cstdint>

#include "internal.h"
#include "lanes.h"
#include "optim_avx512.cc.h"

namespace ct {
namespace table {

template <class F>
void with_row_kernel(const Optim &o, const StepConsts &c, const F &f) {
  const int64_t d = o.dim;
  const OptimParams &p = o.p;
  switch (o.kind) {
    case CT_OPT_SGD: {
      const float nlr = static_cast<float>(-p.lr);
      if (!o.has_momentum()) {
        return f([=](const float *g, float *w, float *, float *) {
          for_lanes(d, [&](int64_t j, auto L) { L.store(w + j, L.load(w + j) + nlr * L.load(g + j)); });
        });
      }
      const float m = static_cast<float>(p.momentum), a = static_cast<float>(1 - p.dampening);
      const bool first = c.t == 1, nesterov = p.nesterov != 0;
      return f([=](const float *g, float *w, float *s0, float *) {
        for_lanes(d, [&](int64_t j, auto L) {
          const auto gj = L.load(g + j);
          const auto b = first ? gj : L.load(s0 + j) * m + a * gj;
          L.store(s0 + j, b);
          L.store(w + j, L.load(w + j) + nlr * (nesterov ? gj + m * b : b));
        });
      });
    }
    case CT_OPT_ADAGRAD: {
      const float nclr = static_cast<float>(-c.clr), eps = static_cast<float>(p.eps);
#ifdef CT_TABLE_AVX512
      if (use_avx512()) {  // (the same numbers)
        return f([=](const float *g, float *w, float *s0, float *) { adagrad_avx512(d, g, w, s0, nclr, eps); });
      }
#endif
      return f([=](const float *g, float *w, float *s0, float *) {
        for_lanes(d, [&](int64_t j, auto L) {
          const auto gj = L.load(g + j), s = L.load(s0 + j) + gj * gj;
          L.store(s0 + j, s);
          L.store(w + j, L.load(w + j) + nclr * (gj / (lane_sqrt(s) + eps)));
        });
      });
    }
    case CT_OPT_ROWWISE_ADAGRAD: {
      const float nclr = static_cast<float>(-c.clr), eps = static_cast<float>(p.eps);
      return f([=](const float *g, float *w, float *s0, float *) {
        double ss = 0;
        for (int64_t j = 0; j < d; j++) ss += static_cast<double>(g[j]) * g[j];  // in order
        s0[0] += static_cast<float>(ss / static_cast<double>(d));
        const float denom = std::sqrt(s0[0]) + eps;
        for_lanes(d, [&](int64_t j, auto L) { L.store(w + j, L.load(w + j) + nclr * (L.load(g + j) / denom)); });
      });
    }
    case CT_OPT_SPARSE_ADAM: {
      const float a1 = static_cast<float>(1 - p.beta1), a2 = static_cast<float>(1 - p.beta2);
      const float eps = static_cast<float>(p.eps), nss = static_cast<float>(-c.step_size);
#ifdef CT_TABLE_AVX512
      if (use_avx512()) {  // (the same numbers)
        return f([=](const float *g, float *w, float *s0, float *s1) {
          sparse_adam_avx512(d, g, w, s0, s1, a1, a2, eps, nss);
        });
      }
#endif
      return f([=](const float *g, float *w, float *s0, float *s1) {
        for_lanes(d, [&](int64_t j, auto L) {
          const auto gj = L.load(g + j), m0 = L.load(s0 + j), v0 = L.load(s1 + j);
          const auto mu = (gj - m0) * a1;
          const auto vu = (gj * gj - v0) * a2;
          L.store(s0 + j, m0 + mu);
          L.store(s1 + j, v0 + vu);
          const auto numer = mu + m0;
          const auto denom = lane_sqrt(vu + v0) + eps;
          L.store(w + j, L.load(w + j) + nss * (numer / denom));
        });
      });
    }
    case CT_OPT_ADAMW: {
      const float b1 = static_cast<float>(p.beta1), b2 = static_cast<float>(p.beta2);
      const float a1 = static_cast<float>(1 - p.beta1), a2 = static_cast<float>(1 - p.beta2);
      const float eps = static_cast<float>(p.eps), decay = static_cast<float>(1 - p.lr * p.weight_decay);
      const float nss = static_cast<float>(-c.step_size), bc2s = static_cast<float>(c.bc2_sqrt);
      return f([=](const float *g, float *w, float *s0, float *s1) {
        for_lanes(d, [&](int64_t j, auto L) {
          const auto gj = L.load(g + j), wd = L.load(w + j) * decay;
          const auto m = L.load(s0 + j) * b1 + a1 * gj;
          const auto v = L.load(s1 + j) * b2 + a2 * (gj * gj);
          L.store(s0 + j, m);
          L.store(s1 + j, v);
          const auto denom = lane_sqrt(v) / bc2s + eps;
          L.store(w + j, wd + nss * (m / denom));
        });
      });
    }
    case CT_OPT_FTRL: {
      const double alpha = p.lr, beta = p.beta, l1 = p.l1, l2 = p.l2;
      return f([=](const float *g, float *w, float *s0, float *s1) {
        for (int64_t j = 0; j < d; j++) {
          const double gj = g[j], n0 = s1[j];
          const double n1 = n0 + gj * gj;
          const double sigma = (std::sqrt(n1) - std::sqrt(n0)) / alpha;
          const double z = s0[j] + gj - sigma * w[j];
          s0[j] = static_cast<float>(z);
          s1[j] = static_cast<float>(n1);
          double wn = 0;
          if (std::fabs(z) > l1) wn = -(z - std::copysign(l1, z)) / ((beta + std::sqrt(n1)) / alpha + l2);
          w[j] = static_cast<float>(wn);
        }
      });
    }
    default:
      throw arg_error("the table has no optimizer");
  }
}

}  // namespace table
}  // namespace ct

#endif  // CT_TABLE_OPTIM_ROWS_H
