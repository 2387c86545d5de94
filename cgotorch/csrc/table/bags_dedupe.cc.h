// bags_dedupe.cc.h: the distinct ids of a feature's bags (bags.cc.h): Dedupe's result (uids in
// order of first occurrence, inverse, the padding id left out as -1), from a hash table sized
// by the distinct ids rather than by the occurrences. Included by bags.cc.h, after
// bags_scratch.cc.h.
//
// Why: a call's bags hold many occurrences of few ids (SVD++'s per-user bags: about 51k ids of
// 7.5k distinct a batch). Dedupe sizes its table for every id distinct (4 slots per id: 4 MiB
// for 51k ids, allocated, zeroed and faulted in per call, and larger than the L2 cache); this
// one starts at the size the thread's last call ended with (4,096 slots at first), doubles
// (re-inserting the distinct ids found so far) whenever the distinct ids pass a quarter of it,
// and is kept per thread, stamped, between calls.

namespace ct {
namespace table {
namespace {

struct BagIds {
  std::vector<int64_t> uids;
  LongArray inverse;
  int64_t size() const { return static_cast<int64_t>(uids.size()); }
};

// A slot: an id and its call's stamp with the id's place among the distinct ids.
struct BagIdSlot {
  int64_t key;
  uint64_t word;
};
constexpr int kBagPlaceBits = 40;
constexpr uint64_t kBagPlaceMask = (uint64_t{1} << kBagPlaceBits) - 1;
// Stamps wrap after this many tables (all slots zeroed then); the sanitizer build sets a small
// value (as for Dedupe) so that its tests wrap it often.
#ifdef CT_DEDUPE_MAX_STAMP
constexpr uint64_t kBagMaxStamp = CT_DEDUPE_MAX_STAMP;
#else
constexpr uint64_t kBagMaxStamp = (uint64_t{1} << (64 - kBagPlaceBits)) - 1;
#endif
// The table of a call has at least this many slots, and at least 4 per distinct id.
constexpr size_t kBagFirstSlots = size_t{1} << 12;
// A thread keeps its table up to this many slots (4 MiB); a larger one is freed after the call.
constexpr size_t kBagKeptSlots = size_t{1} << 18;

struct BagIdTable {
  std::vector<BagIdSlot> slots;
  uint64_t stamp = 0;
  size_t last_cap = 0;  // the slots the last call used
  // Every slot of [0, cap) free under the returned stamp.
  uint64_t begin(size_t cap) {
    if (slots.size() < cap) {
      slots.assign(cap, BagIdSlot{0, 0});
      stamp = 0;
    }
    if (stamp == kBagMaxStamp) {
      std::fill(slots.begin(), slots.end(), BagIdSlot{0, 0});
      stamp = 0;
    }
    return ++stamp;
  }
  void shrink() {
    if (slots.size() > kBagKeptSlots) {
      std::vector<BagIdSlot>().swap(slots);
      stamp = 0;
      last_cap = kBagKeptSlots;
    }
  }
};
thread_local BagIdTable bag_id_table;

// The distinct ids of ids[0, n) (skip, if not nullptr: the padding id, left out as -1).
BagIds bag_ids(const int64_t *ids, int64_t n, const int64_t *skip) {
  if (static_cast<uint64_t>(n) > kBagPlaceMask) throw arg_error("a batch of " + std::to_string(n) + " ids is too large");
  BagIds r;
  r.inverse = LongArray(n);
  BagIdTable &tb = bag_id_table;
  // From the size the thread's last call ended with (a model's batches are alike: no doubling),
  // at most the 4 slots per id that every id distinct would need.
  size_t most = kBagFirstSlots;
  while (most < 4 * static_cast<size_t>(n)) most *= 2;
  size_t cap = std::min(std::max(tb.last_cap, kBagFirstSlots), most);
  uint64_t stamp = tb.begin(cap);
  size_t mask = cap - 1;
  int64_t *inv = r.inverse.p, *up = scratch(bag_scratch.uids, n);
  uint64_t nu = 0;
  // Places id (the nu-th distinct one) in a free slot from its home on.
  auto put = [&](int64_t id, uint64_t place) {
    size_t j = id_home(id, mask);
    while ((tb.slots[j].word >> kBagPlaceBits) == stamp) j = (j + 1) & mask;
    tb.slots[j] = BagIdSlot{id, stamp << kBagPlaceBits | place};
  };
  constexpr int64_t ahead = 16;
  for (int64_t i = 0; i < n; i++) {
    const int64_t id = ids[i];
    if (i + ahead < n) __builtin_prefetch(&tb.slots[id_home(ids[i + ahead], mask)], 1);
    if (skip != nullptr && id == *skip) {
      inv[i] = -1;
      continue;
    }
    size_t j = id_home(id, mask);
    for (;;) {
      BagIdSlot &s = tb.slots[j];
      if ((s.word >> kBagPlaceBits) != stamp) {  // free: the id's first occurrence
        s = BagIdSlot{id, stamp << kBagPlaceBits | nu};
        up[nu] = id;
        inv[i] = static_cast<int64_t>(nu++);
        break;
      }
      if (s.key == id) {
        inv[i] = static_cast<int64_t>(s.word & kBagPlaceMask);
        break;
      }
      j = (j + 1) & mask;
    }
    if (4 * nu > cap) {  // grow: the distinct ids so far into a table twice as large
      cap *= 2;
      stamp = tb.begin(cap);
      mask = cap - 1;
      for (uint64_t q = 0; q < nu; q++) put(up[q], q);
    }
  }
  tb.last_cap = cap;
  tb.shrink();
  r.uids.assign(up, up + nu);
  trim_scratch(bag_scratch.uids);
  return r;
}

}  // namespace
}  // namespace table
}  // namespace ct
