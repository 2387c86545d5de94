// batch.cc.h: per-batch preparation shared by the table's ops: distinct ids (Dedupe) and
// the finiteness check of values and gradients. Both run on every update, so both avoid
// per-batch work that does not depend on the batch: the distinct ids' hash table is kept per
// thread and sized by the distinct ids (no clearing of a table sized by the batch), and the
// finiteness check is vectorised.
#include <algorithm>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <cmath>
#include <cstring>
#include <string>

#include "internal.h"

namespace ct {
namespace table {

namespace {

// The distinct-id table of a thread: open addressing, linear probing, a slot per 4 bytes
// (an id's place among the distinct ids + 1; 0: free), the ids themselves compared through
// uids. All slots are free between calls (a call frees those it used), so a call neither
// allocates nor clears a table; each call sizes its part of the table by the distinct ids
// it finds (at most a quarter full), from the size the thread's last call of like length
// ended with (per bit length of n), doubling as they pass a quarter. The slots are kept with
// the thread's scratch (scratch.h: take_distinct_slots), so that releasing the cached memory
// frees every thread's; a call after that grows them afresh.
//
// Why: Dedupe's table had 4 slots of 16 bytes per occurrence, and a separate one for the bags
// (bags_dedupe.cc.h) stamped slots of 16 bytes per 4 distinct ids. SVD++'s bags hold about 51k
// ids of 7.5k distinct: 4-byte slots put the table in 128 KiB instead of 512 KiB (the bags') or
// 4 MiB (Dedupe's), in the L2 cache, and probes stall far less (a standalone loop: 100 -> 58 us
// warm, 140 -> 58 us with the table evicted; docs/performance.md, "Large-bag kernels, third
// round").
// Per bit length of n: log2 of the slots its last call used; 0: none yet.
thread_local uint8_t distinct_log_cap[65] = {};

// A call's first table has at most this many slots (a class of n's first call: it doubles from there).
constexpr size_t kFirstSlots = size_t{1} << 12;
// A thread keeps up to this many slots (1 MiB); a call that needs more frees them after it.
constexpr size_t kKeptSlots = size_t{1} << 18;

// The thread's slots for one call, given back (every slot free) when it ends, or freed when
// there are more than kKeptSlots.
struct DistinctSlots {
  std::vector<uint32_t> slots = take_distinct_slots();
  DistinctSlots() = default;
  DistinctSlots(const DistinctSlots &) = delete;
  DistinctSlots &operator=(const DistinctSlots &) = delete;
  ~DistinctSlots() {
    if (slots.size() <= kKeptSlots) give_distinct_slots(std::move(slots));
  }
};
// Slots are prefetched this many ids ahead (the table can be larger than the L1 cache).
constexpr int64_t kAheadIds = 16;

}  // namespace

DistinctCount distinct_ids(const int64_t *ids, int64_t n, const int64_t *skip, int64_t *uids, int64_t *inverse) {
  if (n < 0 || static_cast<uint64_t>(n) >= UINT32_MAX) {
    throw arg_error("a batch of " + std::to_string(n) + " ids is too large");
  }
  DistinctSlots tb;
  uint8_t *const log_cap = distinct_log_cap;
  const int cls = 64 - __builtin_clzll(static_cast<unsigned long long>(n) | 1);
  size_t most = 16;  // 4 slots per id: every id distinct fits
  while (most < 4 * static_cast<size_t>(n)) most *= 2;
  size_t cap = log_cap[cls] != 0 ? size_t{1} << log_cap[cls] : kFirstSlots;
  cap = std::min(std::max(cap, size_t{16}), most);
  DistinctCount c{0, 0};
  uint32_t nu = 0;
  try {
    if (tb.slots.size() < cap) tb.slots.resize(cap, 0);
    uint32_t *t = tb.slots.data();
    int bits = __builtin_ctzll(cap);
    auto home = [&bits](int64_t id) { return id_home(id, bits); };
    for (int64_t i = 0; i < n; i++) {
      const int64_t id = ids[i];
      if (i + kAheadIds < n) __builtin_prefetch(&t[home(ids[i + kAheadIds])], 1);
      if (skip != nullptr && id == *skip) {
        inverse[i] = -1;
        c.skipped++;
        continue;
      }
      const size_t mask = cap - 1;
      size_t j = home(id);
      for (;;) {
        const uint32_t p = t[j];
        if (p == 0) {  // free: the id's first occurrence
          t[j] = ++nu;
          uids[nu - 1] = id;
          inverse[i] = nu - 1;
          break;
        }
        if (uids[p - 1] == id) {
          inverse[i] = p - 1;
          break;
        }
        j = (j + 1) & mask;
      }
      if (4 * static_cast<size_t>(nu) > cap) {  // grow: the distinct ids so far into twice the slots
        std::memset(t, 0, cap * sizeof(uint32_t));
        cap *= 2;
        bits++;
        if (tb.slots.size() < cap) tb.slots.resize(cap, 0);
        t = tb.slots.data();
        for (uint32_t q = 0; q < nu; q++) {
          size_t k = home(uids[q]);
          while (t[k] != 0) k = (k + 1) & (cap - 1);
          t[k] = q + 1;
        }
      }
    }
    // Free the slots used: a memset of the call's slots (a fraction of a nanosecond a slot), or
    // where they are many against the distinct ids, each distinct id's slot (a probe of a few
    // nanoseconds; freeing every used slot leaves all free, whatever the order).
    if (cap <= 32 * static_cast<size_t>(nu)) {
      std::memset(t, 0, cap * sizeof(uint32_t));
    } else {
      for (uint32_t q = 0; q < nu; q++) {
        size_t k = home(uids[q]);
        while (t[k] != q + 1) k = (k + 1) & (cap - 1);
        t[k] = 0;
      }
    }
  } catch (...) {  // (an allocation failed: leave every slot free)
    std::fill(tb.slots.begin(), tb.slots.end(), 0u);
    throw;
  }
  log_cap[cls] = static_cast<uint8_t>(__builtin_ctzll(cap));
  c.distinct = nu;
  return c;
}

Dedupe::Dedupe(const int64_t *ids, int64_t n, const int64_t *skip)
    : uids(scratch_pool<int64_t>().take(static_cast<size_t>(std::max<int64_t>(n, 0)))),
      inverse(scratch_pool<int64_t>().take(static_cast<size_t>(std::max<int64_t>(n, 0)))) {
  const DistinctCount c = distinct_ids(ids, n, skip, uids.data(), inverse.data());
  uids.resize(static_cast<size_t>(c.distinct));
  skipped = c.skipped;
}

Dedupe::Dedupe(const int64_t *ids, int64_t n, DistinctIds)
    : uids(scratch_pool<int64_t>().take(static_cast<size_t>(n))),
      inverse(scratch_pool<int64_t>().take(static_cast<size_t>(n))) {
  if (n > 0) std::memcpy(uids.data(), ids, sizeof(int64_t) * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) inverse[static_cast<size_t>(i)] = i;
}

int32_t max_abs_bits(const float *p, int64_t n) {
  // With the sign cleared, a float's bits as an int32 order floats by magnitude, NaN and Inf
  // (exponent bits all ones) above every finite one. SSE2 has no int32 max (pmaxsd is SSE4.1):
  // the vector loop takes the float max of |x| (maxps) and flags NaN apart (cmpunordps), about
  // the cost of the NaN check alone; eight floats a step, no early exit.
  int32_t m = 0;
  int64_t i = 0;
#ifdef __SSE2__
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 m0 = _mm_setzero_ps(), m1 = m0, nan = m0;
  for (; i + 8 <= n; i += 8) {
    const __m128 a = _mm_loadu_ps(p + i), b = _mm_loadu_ps(p + i + 4);
    m0 = _mm_max_ps(m0, _mm_and_ps(a, abs_mask));
    m1 = _mm_max_ps(m1, _mm_and_ps(b, abs_mask));
    nan = _mm_or_ps(nan, _mm_or_ps(_mm_cmpunord_ps(a, a), _mm_cmpunord_ps(b, b)));
  }
  alignas(16) float mx[4];
  _mm_store_ps(mx, _mm_max_ps(m0, m1));
  if (_mm_movemask_ps(nan) != 0) return 0x7fc00000;  // a NaN's bits
  for (float f : mx) {
    int32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    m = std::max(m, bits);
  }
#endif
  for (; i < n; i++) {
    int32_t bits;
    std::memcpy(&bits, p + i, sizeof bits);
    m = std::max(m, bits & 0x7fffffff);
  }
  return m;
}

bool all_within(const float *p, int64_t n, int32_t max_bits) { return max_abs_bits(p, n) <= max_bits; }

bool all_finite(const float *p, int64_t n) { return all_within(p, n, kFltMaxBits); }

}  // namespace table
}  // namespace ct
