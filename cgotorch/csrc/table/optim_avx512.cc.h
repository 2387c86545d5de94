// optim_avx512.cc.h: the raw SparseAdam and Adagrad steps of one row sixteen floats at a time
// (AVX-512), and the largest magnitude of an update's gradients, for CPUs that have it
// (optim_rows.h's row kernels and table.cc.h's max_abs call them first).
//
// Why: a step of large sparse batches (SVD++'s implicit bags: about 7.5k distinct rows of 128
// a step) was bound by the four-lane kernel's square roots and divisions (lanes.h), not by
// memory: sixteen lanes took the SparseAdam step of those rows from about 0.86 to 0.4 ms on a
// Zen 5 core (docs/performance.md).
//
// Results do not change: each element goes through the same IEEE single-precision operations,
// in the same order, as in optim_rows.h's four-lane kernels (AVX-512's add, sub, mul, div and
// sqrt round as the scalar ones do, and no product is fused into an add: see add16). The
// row's tail (dim not a multiple of 16) runs in masked lanes. GOREC_NO_AVX512=1 in the
// environment (read once) turns these kernels off: tests compare both paths bit for bit.
#ifndef CT_TABLE_OPTIM_AVX512_H
#define CT_TABLE_OPTIM_AVX512_H

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CT_TABLE_AVX512 1
#endif

namespace ct {
namespace table {

// Whether the AVX-512 kernels run here: the CPU has AVX-512F and GOREC_NO_AVX512 is unset/0.
inline bool use_avx512() {
#ifdef CT_TABLE_AVX512
  static const bool on = [] {
    const char *e = std::getenv("GOREC_NO_AVX512");
    if (e != nullptr && e[0] != '\0' && std::strcmp(e, "0") != 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return on;
#else
  return false;
#endif
}

#ifdef CT_TABLE_AVX512
namespace {

// Lanes [j, min(j + 16, d)) of a row: the mask of the last, short group.
__attribute__((target("avx512f"))) inline __mmask16 lanes16(int64_t j, int64_t d) {
  const int64_t k = d - j;
  return k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << k) - 1);
}

// add, sub and mul through the rounding-mode builtins, which the compiler never contracts
// into a fused multiply-add (it does contract _mm512_mul_ps and _mm512_add_ps, plain vector
// operators in GCC's headers, under -ffp-contract=fast, C++'s default: one rounding instead of
// two, other numbers).
__attribute__((target("avx512f"))) inline __m512 add16(__m512 a, __m512 b) {
  return _mm512_add_round_ps(a, b, _MM_FROUND_CUR_DIRECTION);
}
__attribute__((target("avx512f"))) inline __m512 sub16(__m512 a, __m512 b) {
  return _mm512_sub_round_ps(a, b, _MM_FROUND_CUR_DIRECTION);
}
__attribute__((target("avx512f"))) inline __m512 mul16(__m512 a, __m512 b) {
  return _mm512_mul_round_ps(a, b, _MM_FROUND_CUR_DIRECTION);
}

}  // namespace

// SparseAdam (optim_rows.h's four-lane body, the same operations): a1 = 1 - b1, a2 = 1 - b2,
// nss = -step size.
__attribute__((target("avx512f"))) inline void sparse_adam_avx512(int64_t d, const float *g, float *w, float *s0,
                                                                   float *s1, float a1, float a2, float eps, float nss) {
  const __m512 A1 = _mm512_set1_ps(a1), A2 = _mm512_set1_ps(a2), E = _mm512_set1_ps(eps), N = _mm512_set1_ps(nss);
  for (int64_t j = 0; j < d; j += 16) {
    const __mmask16 k = lanes16(j, d);
    const __m512 gj = _mm512_maskz_loadu_ps(k, g + j), m0 = _mm512_maskz_loadu_ps(k, s0 + j);
    const __m512 v0 = _mm512_maskz_loadu_ps(k, s1 + j);
    const __m512 mu = mul16(sub16(gj, m0), A1);
    const __m512 vu = mul16(sub16(mul16(gj, gj), v0), A2);
    _mm512_mask_storeu_ps(s0 + j, k, add16(m0, mu));
    _mm512_mask_storeu_ps(s1 + j, k, add16(v0, vu));
    const __m512 numer = add16(mu, m0);
    const __m512 denom = add16(_mm512_sqrt_ps(add16(vu, v0)), E);
    const __m512 wj = _mm512_maskz_loadu_ps(k, w + j);
    _mm512_mask_storeu_ps(w + j, k, add16(wj, mul16(N, _mm512_div_ps(numer, denom))));
  }
}

// Adagrad (the same operations as optim_rows.h's): nclr = -clr.
__attribute__((target("avx512f"))) inline void adagrad_avx512(int64_t d, const float *g, float *w, float *s0, float nclr,
                                                               float eps) {
  const __m512 N = _mm512_set1_ps(nclr), E = _mm512_set1_ps(eps);
  for (int64_t j = 0; j < d; j += 16) {
    const __mmask16 k = lanes16(j, d);
    const __m512 gj = _mm512_maskz_loadu_ps(k, g + j);
    const __m512 s = add16(_mm512_maskz_loadu_ps(k, s0 + j), mul16(gj, gj));
    _mm512_mask_storeu_ps(s0 + j, k, s);
    const __m512 q = _mm512_div_ps(gj, add16(_mm512_sqrt_ps(s), E));
    _mm512_mask_storeu_ps(w + j, k, add16(_mm512_maskz_loadu_ps(k, w + j), mul16(N, q)));
  }
}

// max_abs_bits (internal.h) sixteen floats at a time: with the sign cleared, a float's bits as an
// int32 order floats by magnitude, NaN and Inf above every finite one, so one integer max per
// sixteen floats finds both (above kFltMaxBits: a NaN's or an Inf's bits). An update's check of
// its gradients: half the time of the SSE2 loop, which needs a compare for NaN besides its max.
__attribute__((target("avx512f"))) inline int32_t max_abs_bits_avx512(const float *p, int64_t n) {
  const __m512i abs = _mm512_set1_epi32(0x7fffffff);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = _mm512_max_epi32(m0, _mm512_and_si512(_mm512_loadu_si512(p + i), abs));
    m1 = _mm512_max_epi32(m1, _mm512_and_si512(_mm512_loadu_si512(p + i + 16), abs));
    m2 = _mm512_max_epi32(m2, _mm512_and_si512(_mm512_loadu_si512(p + i + 32), abs));
    m3 = _mm512_max_epi32(m3, _mm512_and_si512(_mm512_loadu_si512(p + i + 48), abs));
  }
  for (; i < n; i += 16) {
    const __m512i x = _mm512_maskz_loadu_epi32(lanes16(i, n), p + i);
    m0 = _mm512_max_epi32(m0, _mm512_and_si512(x, abs));
  }
  return _mm512_reduce_max_epi32(_mm512_max_epi32(_mm512_max_epi32(m0, m1), _mm512_max_epi32(m2, m3)));
}
#endif

}  // namespace table
}  // namespace ct

#endif  // CT_TABLE_OPTIM_AVX512_H
