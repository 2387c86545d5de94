// kernels.c: the floor kernels (kernelfloor.h), each in an AVX-512, an AVX2 and a portable form,
// chosen by the caller (kf_supported). Compiled as ISO C (-std=c11, kernelfloor.go), whose
// default is -ffp-contract=off (cgo refuses that flag itself): a product is rounded before it is
// added, as SparseAdam and the tests' Go reference compute it (GNU C's default would fuse them).
#include "kernelfloor.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KF_X86 1
#define KF_ADAM_AHEAD 1024  // floats: the Adam streams are prefetched 4 KiB ahead
#endif

int kf_supported(int isa) {
  switch (isa) {
    case KF_PORTABLE:
      return 1;
#ifdef KF_X86
    case KF_AVX2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2");
    case KF_AVX512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f");
#endif
    default:
      return 0;
  }
}

static void weighted_sum_portable(float *out, const float *src, int64_t dim, const int32_t *start, const int32_t *idx,
                                  const float *w, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; r++) {
    float *o = out + r * dim;
    for (int64_t j = 0; j < dim; j++) o[j] = 0.f;
    for (int32_t q = start[r]; q < start[r + 1]; q++) {
      const float *s = src + (int64_t)idx[q] * dim;
      const float c = w[q];
      for (int64_t j = 0; j < dim; j++) o[j] += c * s[j];
    }
  }
}

static void sparse_adam_portable(float *p, float *m, float *v, const float *g, int64_t i0, int64_t i1, float a1,
                                 float a2, float eps, float nss) {
  for (int64_t i = i0; i < i1; i++) {
    const float gi = g[i], m0 = m[i], v0 = v[i];
    const float mu = (gi - m0) * a1, vu = (gi * gi - v0) * a2;
    m[i] = m0 + mu;
    v[i] = v0 + vu;
    p[i] = p[i] + nss * ((mu + m0) / (sqrtf(vu + v0) + eps));
  }
}

#ifdef KF_X86
// The line KF_ADAM_AHEAD floats ahead of i in each of SparseAdam's four streams: the hardware's
// own prefetchers left the step at 0.37-0.44 ms a batch against 0.16-0.17 with this on Zen 5
// (4 KiB ahead; 2 and 8 KiB were slower). A macro, expanded inside the kernels' target
// functions: GCC emits no prefetch instruction in a function of this file's default target.
#define PREFETCH_ADAM(p, m, v, g, i, i1)                                        \
  do {                                                                          \
    if ((i) + KF_ADAM_AHEAD < (i1)) {                                           \
      _mm_prefetch((const char *)((p) + (i) + KF_ADAM_AHEAD), _MM_HINT_T0);     \
      _mm_prefetch((const char *)((m) + (i) + KF_ADAM_AHEAD), _MM_HINT_T0);     \
      _mm_prefetch((const char *)((v) + (i) + KF_ADAM_AHEAD), _MM_HINT_T0);     \
      _mm_prefetch((const char *)((g) + (i) + KF_ADAM_AHEAD), _MM_HINT_T0);     \
    }                                                                           \
  } while (0)

// weighted_sum_avx512 and weighted_sum_avx2: rows of dim floats (a multiple of the W floats of a
// register), 8 registers of columns at a time (128 or 64) in 8 accumulators, then W at a time.
// One macro writes both widths. The accumulators are an array whose loops are fully unrolled,
// so GCC keeps them in registers. (Prefetching the rows 8 ids ahead gained nothing measurable on
// Zen 5.)
#define KF_WEIGHTED_SUM(NAME, TARGET, VEC, W, ZERO, SET1, LOAD, ADD, MUL, STORE)                                   \
  __attribute__((target(TARGET))) static void NAME(float *out, const float *src, int64_t dim,                   \
                                                   const int32_t *start, const int32_t *idx, const float *w,   \
                                                   int64_t r0, int64_t r1) {                                    \
    for (int64_t r = r0; r < r1; r++) {                                                                         \
      const int32_t q0 = start[r], q1 = start[r + 1];                                                           \
      int64_t j = 0;                                                                                            \
      for (; j + 8 * (W) <= dim; j += 8 * (W)) {                                                                \
        VEC a[8];                                                                                               \
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) a[k] = ZERO();                                      \
        for (int32_t q = q0; q < q1; q++) {                                                                     \
          const float *s = src + (int64_t)idx[q] * dim + j;                                                     \
          const VEC c = SET1(w[q]);                                                                             \
          _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) a[k] = ADD(a[k], MUL(c, LOAD(s + k * (W))));       \
        }                                                                                                       \
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) STORE(out + r * dim + j + k * (W), a[k]);           \
      }                                                                                                         \
      for (; j < dim; j += (W)) {                                                                               \
        VEC a = ZERO();                                                                                         \
        for (int32_t q = q0; q < q1; q++) a = ADD(a, MUL(SET1(w[q]), LOAD(src + (int64_t)idx[q] * dim + j)));   \
        STORE(out + r * dim + j, a);                                                                            \
      }                                                                                                         \
    }                                                                                                           \
  }

KF_WEIGHTED_SUM(weighted_sum_avx512, "avx512f", __m512, 16, _mm512_setzero_ps, _mm512_set1_ps, _mm512_loadu_ps,
                _mm512_add_ps, _mm512_mul_ps, _mm512_storeu_ps)
KF_WEIGHTED_SUM(weighted_sum_avx2, "avx2", __m256, 8, _mm256_setzero_ps, _mm256_set1_ps, _mm256_loadu_ps,
                _mm256_add_ps, _mm256_mul_ps, _mm256_storeu_ps)

__attribute__((target("avx512f"))) static void sparse_adam_avx512(float *p, float *m, float *v, const float *g,
                                                                   int64_t i0, int64_t i1, float a1, float a2, float eps,
                                                                   float nss) {
  const __m512 A1 = _mm512_set1_ps(a1), A2 = _mm512_set1_ps(a2), E = _mm512_set1_ps(eps), N = _mm512_set1_ps(nss);
  for (int64_t i = i0; i < i1; i += 16) {
    PREFETCH_ADAM(p, m, v, g, i, i1);
    const __mmask16 k = i1 - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (i1 - i)) - 1);
    const __m512 gi = _mm512_maskz_loadu_ps(k, g + i), m0 = _mm512_maskz_loadu_ps(k, m + i);
    const __m512 v0 = _mm512_maskz_loadu_ps(k, v + i);
    const __m512 mu = _mm512_mul_ps(_mm512_sub_ps(gi, m0), A1);
    const __m512 vu = _mm512_mul_ps(_mm512_sub_ps(_mm512_mul_ps(gi, gi), v0), A2);
    _mm512_mask_storeu_ps(m + i, k, _mm512_add_ps(m0, mu));
    _mm512_mask_storeu_ps(v + i, k, _mm512_add_ps(v0, vu));
    const __m512 q = _mm512_div_ps(_mm512_add_ps(mu, m0), _mm512_add_ps(_mm512_sqrt_ps(_mm512_add_ps(vu, v0)), E));
    _mm512_mask_storeu_ps(p + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, p + i), _mm512_mul_ps(N, q)));
  }
}

__attribute__((target("avx2"))) static void sparse_adam_avx2(float *p, float *m, float *v, const float *g, int64_t i0,
                                                             int64_t i1, float a1, float a2, float eps, float nss) {
  const __m256 A1 = _mm256_set1_ps(a1), A2 = _mm256_set1_ps(a2), E = _mm256_set1_ps(eps), N = _mm256_set1_ps(nss);
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8) {
    if ((i & 15) == 0) PREFETCH_ADAM(p, m, v, g, i, i1);
    const __m256 gi = _mm256_loadu_ps(g + i), m0 = _mm256_loadu_ps(m + i), v0 = _mm256_loadu_ps(v + i);
    const __m256 mu = _mm256_mul_ps(_mm256_sub_ps(gi, m0), A1);
    const __m256 vu = _mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(gi, gi), v0), A2);
    _mm256_storeu_ps(m + i, _mm256_add_ps(m0, mu));
    _mm256_storeu_ps(v + i, _mm256_add_ps(v0, vu));
    const __m256 q = _mm256_div_ps(_mm256_add_ps(mu, m0), _mm256_add_ps(_mm256_sqrt_ps(_mm256_add_ps(vu, v0)), E));
    _mm256_storeu_ps(p + i, _mm256_add_ps(_mm256_loadu_ps(p + i), _mm256_mul_ps(N, q)));
  }
  sparse_adam_portable(p, m, v, g, i, i1, a1, a2, eps, nss);
}
#endif

void kf_weighted_sum(int isa, float *out, const float *src, int64_t dim, const int32_t *start, const int32_t *idx,
                     const float *w, int64_t r0, int64_t r1) {
#ifdef KF_X86
  if (isa == KF_AVX512 && dim % 16 == 0) {
    weighted_sum_avx512(out, src, dim, start, idx, w, r0, r1);
    return;
  }
  if (isa >= KF_AVX2 && dim % 8 == 0) {
    weighted_sum_avx2(out, src, dim, start, idx, w, r0, r1);
    return;
  }
#endif
  weighted_sum_portable(out, src, dim, start, idx, w, r0, r1);
}

void kf_sparse_adam(int isa, float *p, float *m, float *v, const float *g, int64_t i0, int64_t i1, float a1, float a2,
                    float eps, float nss) {
#ifdef KF_X86
  if (isa == KF_AVX512) {
    sparse_adam_avx512(p, m, v, g, i0, i1, a1, a2, eps, nss);
    return;
  }
  if (isa == KF_AVX2) {
    sparse_adam_avx2(p, m, v, g, i0, i1, a1, a2, eps, nss);
    return;
  }
#endif
  sparse_adam_portable(p, m, v, g, i0, i1, a1, a2, eps, nss);
}
