// bags_scratch.cc.h: memory of the bags' calls (bags.cc.h) that must not come from malloc
// afresh each call: per-thread scratch buffers reused from call to call, and LongArray, an int64
// array in a tensor's buffer (the tensor-buffer cache, allocator.cc.h). Included by bags.cc.h.
//
// Why: a call over large bags (SVD++'s: 51k ids) needs megabytes of index arrays. glibc maps a
// block past its mmap threshold, which is dynamic (it rises to the largest mapped block freed),
// so such blocks were mapped and page-faulted in afresh whenever the threshold stood below them
// (docs/performance.md, "Large-bag kernels": 4.7% of a step in page faults).

namespace ct {
namespace table {
namespace {

// An int64 array in a tensor's buffer (kept until the backward: the inverse of the ids).
struct LongArray {
  at::Tensor t;
  int64_t *p = nullptr;
  int64_t n = 0;
  LongArray() = default;
  explicit LongArray(int64_t len) : t(at::empty({len}, at::kLong)), p(t.data_ptr<int64_t>()), n(len) {}
  int64_t size() const { return n; }
  int64_t &operator[](size_t i) { return p[i]; }
  int64_t operator[](size_t i) const { return p[i]; }
  const int64_t *begin() const { return p; }
  const int64_t *end() const { return p + n; }
};

// Per-thread buffers of the bags' calls, reused from call to call; each is used within one step
// of a call (deduplication, pooling forward, pooling backward), never across them.
struct BagScratch {
  std::vector<int64_t> kept, uids;
  std::vector<const float *> src;
  std::vector<float> w;
};
thread_local BagScratch bag_scratch;
// A scratch buffer of at least n elements.
template <class T>
T *scratch(std::vector<T> &v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}
// Frees a scratch buffer past 4 MiB (a call of more than half a million ids) rather than keep
// it: every OS thread that runs bag calls keeps its own buffers, and Go may run many.
template <class T>
void trim_scratch(std::vector<T> &v) {
  if (v.capacity() * sizeof(T) > (size_t{4} << 20)) std::vector<T>().swap(v);
}

}  // namespace
}  // namespace table
}  // namespace ct
