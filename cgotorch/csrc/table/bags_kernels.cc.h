// bags_kernels.cc.h: the pooling kernel of the bags (bags.cc.h), forward and backward: dst =
// the sum of w[i] * src[i] over a list of rows, in order. Three forms of the same IEEE
// operations: plain C++, AVX2 (64 columns in registers a pass) and AVX-512 (up to 256 columns
// a pass), chosen once at run time (GOREC_NO_AVX512=1 turns the AVX-512 one off, as for the
// optimizer kernels: optim_avx512.cc.h). Included by bags.cc.h.
//
// Why AVX-512: at dim 128 the AVX2 kernel walks a bag's rows twice (64 columns a pass, 8 ymm
// accumulators), so each row's 8 cache lines come into the L1 cache twice; sixteen-lane
// accumulators hold the 128 columns in 8 zmm registers and read each row once. A standalone
// loop over SVD++'s bags (51k rows of 128 from 6.9k distinct): forward 275 -> 165 us, backward
// 288 -> 181 us (docs/performance.md, "Large-bag kernels, third round"). Earlier attempts had kept
// the accumulators in an array, which GCC at -O2 leaves in memory: they are unrolled here.
//
// Results do not depend on the kernel: each output element is 0, then one fused multiply-add
// (Fused) or one product rounded and then one add (not Fused) per row, in row order, whichever
// the lanes; tests compare the paths bit for bit.
#include <cstdlib>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CT_BAGS_AVX2 1
#endif

namespace ct {
namespace table {

// Whether the AVX-512 kernels run here (optim_avx512.cc.h, compiled later in the same unit:
// the CPU has AVX-512F and GOREC_NO_AVX512 is unset or 0).
inline bool use_avx512();

namespace {

// How many rows ahead the pooling prefetches (the rows are scattered over more than the L2 cache).
constexpr int64_t kBagsAhead = 8;

// dst[0, d) = the sum of w[i] * src[i][0, d) over i < m, in order, from zero (w nullptr:
// weights 1). Fused: each term a fused multiply-add (one rounding); otherwise a product rounded,
// then added (PyTorch's CPU embedding_bag takes that path for weighted bags with a padding
// index).
template <bool Fused>
float madd(float w, float x, float a) {
  if constexpr (Fused) {
    return std::fma(w, x, a);
  } else {
    volatile float p = w * x;  // (rounded apart: never contracted into an fma)
    return p + a;
  }
}
template <bool Fused>
void sum_rows_plain(float *dst, int64_t d, const float *const *src, const float *w, int64_t m) {
  std::fill(dst, dst + d, 0.f);
  for (int64_t i = 0; i < m; i++) {
    const float wi = w != nullptr ? w[i] : 1.f;
    for (int64_t j = 0; j < d; j++) dst[j] = madd<Fused>(wi, src[i][j], dst[j]);
  }
}
#ifdef CT_BAGS_AVX2
template <bool Fused>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 madd8(__m256 w, const float *x, __m256 a) {
  if constexpr (Fused) {
    return _mm256_fmadd_ps(w, _mm256_loadu_ps(x), a);
  } else {
    // The product rounded apart: GCC contracts _mm256_mul_ps then _mm256_add_ps (vector
    // operators in its headers) into an FMA under -ffp-contract=fast, C++'s default; the empty
    // asm hides the product from it.
    __m256 p = _mm256_mul_ps(w, _mm256_loadu_ps(x));
    __asm__("" : "+x"(p));
    return _mm256_add_ps(p, a);
  }
}
template <bool Fused>
__attribute__((target("avx2,fma"))) void sum_rows_avx2(float *dst, int64_t d, const float *const *src,
                                                        const float *w, int64_t m) {
  const size_t bytes = sizeof(float) * static_cast<size_t>(d);
  for (int64_t i = 0; i < m && i < kBagsAhead; i++) prefetch_lines(src[i], bytes, false);
  int64_t c = 0;
  for (; c + 64 <= d; c += 64) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int64_t i = 0; i < m; i++) {
      if (c == 0 && i + kBagsAhead < m) prefetch_lines(src[i + kBagsAhead], bytes, false);
      const __m256 vw = _mm256_set1_ps(w != nullptr ? w[i] : 1.f);
      const float *r = src[i] + c;
      a0 = madd8<Fused>(vw, r, a0);
      a1 = madd8<Fused>(vw, r + 8, a1);
      a2 = madd8<Fused>(vw, r + 16, a2);
      a3 = madd8<Fused>(vw, r + 24, a3);
      a4 = madd8<Fused>(vw, r + 32, a4);
      a5 = madd8<Fused>(vw, r + 40, a5);
      a6 = madd8<Fused>(vw, r + 48, a6);
      a7 = madd8<Fused>(vw, r + 56, a7);
    }
    float *o = dst + c;
    _mm256_storeu_ps(o, a0);
    _mm256_storeu_ps(o + 8, a1);
    _mm256_storeu_ps(o + 16, a2);
    _mm256_storeu_ps(o + 24, a3);
    _mm256_storeu_ps(o + 32, a4);
    _mm256_storeu_ps(o + 40, a5);
    _mm256_storeu_ps(o + 48, a6);
    _mm256_storeu_ps(o + 56, a7);
  }
  for (; c + 8 <= d; c += 8) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t i = 0; i < m; i++) a = madd8<Fused>(_mm256_set1_ps(w != nullptr ? w[i] : 1.f), src[i] + c, a);
    _mm256_storeu_ps(dst + c, a);
  }
  for (; c < d; c++) {
    float a = 0.f;
    for (int64_t i = 0; i < m; i++) a = madd<Fused>(w != nullptr ? w[i] : 1.f, src[i][c], a);
    dst[c] = a;
  }
}
bool cpu_has_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

#ifdef CT_BAGS_AVX2
// One term of sixteen lanes: a + w * x, fused or with the product rounded apart (through the
// rounding-mode builtins, which GCC never contracts into an fma, as optim_avx512.cc.h's add16).
template <bool Fused>
__attribute__((target("avx512f"), always_inline)) inline __m512 madd16(__m512 w, __m512 x, __m512 a) {
  if constexpr (Fused) {
    return _mm512_fmadd_ps(w, x, a);
  } else {
    return _mm512_add_round_ps(_mm512_mul_round_ps(w, x, _MM_FROUND_CUR_DIRECTION), a, _MM_FROUND_CUR_DIRECTION);
  }
}

// Columns [c, c + 16 K) of dst (the last group masked by last: d may end inside it), in one pass
// over the m rows, K zmm accumulators. The loops over K are unrolled (GCC keeps an array of
// accumulators in memory otherwise); Prefetch: the first pass prefetches the rows ahead.
template <bool Fused, int K, bool Prefetch>
__attribute__((target("avx512f"), always_inline)) inline void sum_pass16(float *dst, int64_t c, __mmask16 last,
                                                                          size_t bytes, const float *const *src,
                                                                          const float *w, int64_t m) {
  __m512 a[K];
#pragma GCC unroll 16
  for (int k = 0; k < K; k++) a[k] = _mm512_setzero_ps();
  for (int64_t i = 0; i < m; i++) {
    if (Prefetch && i + kBagsAhead < m) prefetch_lines(src[i + kBagsAhead], bytes, false);
    const __m512 vw = _mm512_set1_ps(w != nullptr ? w[i] : 1.f);
    const float *r = src[i] + c;
#pragma GCC unroll 16
    for (int k = 0; k < K - 1; k++) a[k] = madd16<Fused>(vw, _mm512_loadu_ps(r + 16 * k), a[k]);
    a[K - 1] = madd16<Fused>(vw, _mm512_maskz_loadu_ps(last, r + 16 * (K - 1)), a[K - 1]);
  }
#pragma GCC unroll 16
  for (int k = 0; k < K - 1; k++) _mm512_storeu_ps(dst + c + 16 * k, a[k]);
  _mm512_mask_storeu_ps(dst + c + 16 * (K - 1), last, a[K - 1]);
}

// The pass over the last columns [c, d) (fewer than 256): K = ceil((d - c) / 16) accumulators.
template <bool Fused, bool Prefetch, int K = 1>
__attribute__((target("avx512f"))) void sum_tail16(float *dst, int64_t d, int64_t c, size_t bytes,
                                                    const float *const *src, const float *w, int64_t m) {
  if constexpr (K < 16) {
    if ((d - c + 15) / 16 > K) return sum_tail16<Fused, Prefetch, K + 1>(dst, d, c, bytes, src, w, m);
  }
  const int64_t last = d - c - 16 * (K - 1);  // (1 to 16 columns)
  sum_pass16<Fused, K, Prefetch>(dst, c, static_cast<__mmask16>((1u << last) - 1), bytes, src, w, m);
}

template <bool Fused>
__attribute__((target("avx512f"))) void sum_rows_avx512(float *dst, int64_t d, const float *const *src,
                                                          const float *w, int64_t m) {
  const size_t bytes = sizeof(float) * static_cast<size_t>(d);
  for (int64_t i = 0; i < m && i < kBagsAhead; i++) prefetch_lines(src[i], bytes, false);
  if (d == 128) return sum_pass16<Fused, 8, true>(dst, 0, 0xFFFF, bytes, src, w, m);  // (the common width)
  int64_t c = 0;
  for (; c + 256 <= d; c += 256) {
    if (c == 0) {
      sum_pass16<Fused, 16, true>(dst, c, 0xFFFF, bytes, src, w, m);
    } else {
      sum_pass16<Fused, 16, false>(dst, c, 0xFFFF, bytes, src, w, m);
    }
  }
  if (c == d) return;
  if (c == 0) return sum_tail16<Fused, true>(dst, d, c, bytes, src, w, m);
  sum_tail16<Fused, false>(dst, d, c, bytes, src, w, m);
}
#endif

using SumRows = void (*)(float *, int64_t, const float *const *, const float *, int64_t);
// The kernel of this CPU: fused (every term an fma) or not (products rounded apart).
SumRows sum_rows_kernel(bool fused) {
#ifdef CT_BAGS_AVX2
  if (use_avx512()) return fused ? sum_rows_avx512<true> : sum_rows_avx512<false>;
#endif
#ifdef CT_BAGS_AVX2
  static const bool avx2 = cpu_has_fma();
  if (avx2) return fused ? sum_rows_avx2<true> : sum_rows_avx2<false>;
#endif
  return fused ? sum_rows_plain<true> : sum_rows_plain<false>;
}

}  // namespace
}  // namespace table
}  // namespace ct
