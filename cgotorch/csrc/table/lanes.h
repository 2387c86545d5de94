// lanes.h: the raw optimizer kernels' arithmetic, written once for a lane type: one float,
// or (x86-64 with GCC or Clang) four floats in an SSE register, which every x86-64 CPU has.
// for_lanes(d, body) runs body(j, lane) over elements [0, d): four at a time, then one at a time.
//
// Why not leave it to the compiler: at -O2, GCC 12 vectorizes a loop only when its trip count is
// a known multiple of the vector width (the row width is known at run time), and it compiles
// std::sqrt as a call that may set errno; cgo does not allow -fno-math-errno in #cgo flags. Four
// lanes took 20-25% off SGD updates and up to half off Adagrad and SparseAdam ones, whose scalar
// sqrt and division had bound them (figures in docs/performance.md).
//
// Results do not change: every element goes through the same IEEE single-precision operations in
// the same order either way (SSE's add, mul, div and sqrt round exactly as the scalar ones do, and
// the baseline x86-64 target has no FMA to contract into), and the kernels' arrays (a row, its
// states, its gradient) never overlap.
#ifndef CT_TABLE_LANES_H
#define CT_TABLE_LANES_H

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#define CT_TABLE_LANES4 1
#endif

namespace ct {
namespace table {

// A lane of element type T (float, or four floats): unaligned loads and stores (movups for four).
template <class T>
struct Lane {
  static T load(const float *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float *p, T v) { std::memcpy(p, &v, sizeof v); }
};
using Lane1 = Lane<float>;
inline float lane_sqrt(float x) { return std::sqrt(x); }

#ifdef CT_TABLE_LANES4
typedef float float4 __attribute__((vector_size(16)));
using Lane4 = Lane<float4>;
inline float4 lane_sqrt(float4 x) { return reinterpret_cast<float4>(_mm_sqrt_ps(reinterpret_cast<__m128>(x))); }
#endif

// body(j, Lane4{}) for j = 0, 4, 8, ... while four elements remain, then body(j, Lane1{}) for
// the rest; body is a generic lambda: [&](int64_t j, auto L) { L.store(w + j, L.load(w + j) * 2); }
template <class F>
inline void for_lanes(int64_t d, const F &body) {
  int64_t j = 0;
#ifdef CT_TABLE_LANES4
  for (; j + 4 <= d; j += 4) body(j, Lane4{});
#endif
  for (; j < d; j++) body(j, Lane1{});
}

}  // namespace table
}  // namespace ct

#endif  // CT_TABLE_LANES_H
