// batch.cc.h: per-batch preparation shared by the table's ops: distinct ids (Dedupe) and
// the finiteness check of values and gradients. Both run on every update, so both avoid
// per-batch work that does not depend on the batch: Dedupe's hash table is scratch kept per
// thread and never cleared between batches, and the finiteness check is vectorised.
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

// One slot of Dedupe's open-addressing table: an id, and its batch's stamp with the id's place
// in uids (stamp << kPlaceBits | place). A slot is occupied only when its stamp is the
// current batch's, so a batch starts without clearing the table.
struct DedupeSlot {
  int64_t key;
  uint64_t word;
};
constexpr int kPlaceBits = 40;  // batches of up to 2^40 ids (8 TiB of ids)
constexpr uint64_t kPlaceMask = (uint64_t{1} << kPlaceBits) - 1;
// Stamps wrap after this many batches (the table is zeroed then). The sanitizer build sets a
// small value so that tests wrap it often.
#ifndef CT_DEDUPE_MAX_STAMP
#define CT_DEDUPE_MAX_STAMP ((uint64_t{1} << (64 - 40)) - 1)
#endif
constexpr uint64_t kMaxStamp = CT_DEDUPE_MAX_STAMP;
static_assert(kMaxStamp >= 1 && kMaxStamp < (uint64_t{1} << (64 - kPlaceBits)), "stamp bits");
// At least 4 slots per id: at load 1/2 the probes' unpredictable branches cost a third of the
// time (on a batch of 4,096: 13 ns/id at 2 slots per id, 9 at 4).
constexpr size_t kSlotsPerId = 4;
// Slots are prefetched this many ids ahead (a batch's table is larger than the L1 cache).
constexpr int64_t kAheadIds = 16;
// A thread keeps its scratch up to this many slots (1 MiB: batches of up to 16K ids); bigger
// batches use scratch of their own, freed with them.
constexpr size_t kKeptSlots = size_t{1} << 16;

struct DedupeScratch {
  std::vector<DedupeSlot> slots;
  uint64_t stamp = 0;
  // A table of at least cap slots in which every slot is free for the returned stamp.
  uint64_t begin(size_t cap) {
    if (slots.size() < cap) {
      slots.assign(cap, DedupeSlot{0, 0});
      stamp = 0;
    }
    if (stamp == kMaxStamp) {
      std::fill(slots.begin(), slots.end(), DedupeSlot{0, 0});
      stamp = 0;
    }
    return ++stamp;
  }
};

thread_local DedupeScratch kept_scratch;

}  // namespace

Dedupe::Dedupe(const int64_t *ids, int64_t n, const int64_t *skip) {
  if (static_cast<uint64_t>(n) > kPlaceMask) throw arg_error("a batch of " + std::to_string(n) + " ids is too large");
  inverse = scratch_pool<int64_t>().take(static_cast<size_t>(n));
  size_t cap = 16;
  while (cap < kSlotsPerId * static_cast<size_t>(n)) cap *= 2;
  DedupeScratch own;
  DedupeScratch &scratch = cap <= kKeptSlots ? kept_scratch : own;
  const uint64_t stamp = scratch.begin(cap);
  DedupeSlot *t = scratch.slots.data();
  const size_t mask = cap - 1;
  auto home = [mask](int64_t id) { return id_home(id, mask); };
  uids = scratch_pool<int64_t>().take(static_cast<size_t>(n));
  int64_t *inv = inverse.data(), *up = uids.data();
  uint64_t nu = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t id = ids[i];
    if (i + kAheadIds < n) __builtin_prefetch(&t[home(ids[i + kAheadIds])], 1);
    if (skip != nullptr && id == *skip) {
      inv[i] = -1;
      skipped++;
      continue;
    }
    size_t j = home(id);
    for (;;) {
      DedupeSlot &s = t[j];
      if ((s.word >> kPlaceBits) != stamp) {  // free: the id's first occurrence
        s.key = id;
        s.word = stamp << kPlaceBits | nu;
        up[nu] = id;
        inv[i] = static_cast<int64_t>(nu++);
        break;
      }
      if (s.key == id) {
        inv[i] = static_cast<int64_t>(s.word & kPlaceMask);
        break;
      }
      j = (j + 1) & mask;
    }
  }
  uids.resize(nu);
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
