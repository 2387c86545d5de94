// bags_dedupe.cc.h: the distinct ids of a feature's bags (bags.cc.h): Dedupe's result (uids in
// order of first occurrence, inverse, the padding id left out as -1) through the same
// distinct-id table (distinct_ids, batch.cc.h), with the inverse in a tensor buffer (it lives
// until the backward) and uids from the thread's scratch pool. Included by bags.cc.h, after
// bags_scratch.cc.h.

namespace ct {
namespace table {
namespace {

struct BagIds {
  std::vector<int64_t> uids;
  LongArray inverse;
  int64_t size() const { return static_cast<int64_t>(uids.size()); }
};

// The distinct ids of ids[0, n) (skip, if not nullptr: the padding id, left out as -1).
BagIds bag_ids(const int64_t *ids, int64_t n, const int64_t *skip) {
  BagIds r;
  r.inverse = LongArray(n);
  Scratch<int64_t> up(static_cast<size_t>(n));
  const DistinctCount c = distinct_ids(ids, n, skip, up.data(), r.inverse.p);
  r.uids.assign(up.data(), up.data() + c.distinct);
  return r;
}

}  // namespace
}  // namespace table
}  // namespace ct
