// bags_repeats.cc.h: bags that repeat an earlier bag of the same feature in a call (the same
// ids, the same per-sample weights), pooled once (bags.cc.h). Models whose bags depend on part
// of a sample only (a user's history, repeated for each of the user's samples in a batch: SVD++,
// DIN-style features) pay for each distinct bag once instead of once per sample.
// Included by bags.cc.h.
//
// Design
//   Each bag of a feature whose call holds long bags (kRepeatMinMean ids on average) gets a
//   hash of its length and a few of its ids and weights; a bag whose hash matches an earlier
//   one's, and whose ids and weights then compare equal, is a repeat of it. Only the first bag
//   of each kind is deduplicated, looked up and pooled; a repeat's output row is a copy of its
//   first's (the same numbers bit for bit), and backward, the gradients of a first bag's
//   repeats are first added to its own (in bag order), then pooled back once: the same sums up
//   to float rounding. A training lookup still counts every occurrence of an id (repeats too).

namespace ct {
namespace table {
namespace {

// Average bag length (ids) from which a feature's bags are checked for repeats: below it, the
// check would cost a noticeable part of the pooling it could save.
constexpr int64_t kRepeatMinMean = 16;
// Ids (and weights) a bag's hash samples, evenly spaced.
constexpr int64_t kRepeatSample = 8;

uint64_t repeat_mix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9E3779B97F4A7C15ULL;
  return h ^ (h >> 29);
}

// The bags [b0, b0 + batch) of bounds that repeat an earlier one of them: same[b] is the first
// bag equal to bag b (b itself for a first), or same is left empty when no bag repeats or the
// bags are too short to check.
std::vector<int64_t> find_repeats(const std::vector<int64_t> &bounds, int64_t b0, int64_t batch,
                                  const int64_t *ids, const float *weights) {
  std::vector<int64_t> same;
  const int64_t n = bounds[static_cast<size_t>(b0 + batch)] - bounds[static_cast<size_t>(b0)];
  if (batch < 2 || n < kRepeatMinMean * batch) return same;
  size_t cap = 16;
  while (cap < 2 * static_cast<size_t>(batch)) cap *= 2;
  std::vector<int64_t> table(cap, -1);  // bags (firsts), by hash
  std::vector<uint64_t> hash(static_cast<size_t>(batch));
  same.resize(static_cast<size_t>(batch));
  bool any = false;
  for (int64_t b = 0; b < batch; b++) {
    const int64_t p0 = bounds[static_cast<size_t>(b0 + b)], len = bounds[static_cast<size_t>(b0 + b) + 1] - p0;
    same[static_cast<size_t>(b)] = b;
    uint64_t h = repeat_mix(0, static_cast<uint64_t>(len));
    for (int64_t s = 0; s < kRepeatSample && len > 0; s++) {
      const int64_t p = p0 + s * (len - 1) / (kRepeatSample - 1);
      h = repeat_mix(h, static_cast<uint64_t>(ids[p]));
      if (weights != nullptr) {
        uint32_t bits;
        std::memcpy(&bits, weights + p, sizeof bits);
        h = repeat_mix(h, bits);
      }
    }
    hash[static_cast<size_t>(b)] = h;
    size_t j = static_cast<size_t>(h) & (cap - 1);
    for (; table[j] >= 0; j = (j + 1) & (cap - 1)) {
      const int64_t c = table[j], q0 = bounds[static_cast<size_t>(b0 + c)];
      if (hash[static_cast<size_t>(c)] != h || bounds[static_cast<size_t>(b0 + c) + 1] - q0 != len) continue;
      const size_t l = static_cast<size_t>(len);
      if (std::memcmp(ids + q0, ids + p0, l * sizeof(int64_t)) == 0 &&
          (weights == nullptr || std::memcmp(weights + q0, weights + p0, l * sizeof(float)) == 0)) {
        same[static_cast<size_t>(b)] = c;
        any = true;
        break;
      }
    }
    if (same[static_cast<size_t>(b)] == b) table[j] = b;
  }
  if (!any) same.clear();
  return same;
}

}  // namespace
}  // namespace table
}  // namespace ct
