// bags_scratch.cc.h: memory of the bags' calls (bags.cc.h) that must not come from malloc
// afresh each call: per-call buffers from the thread's scratch pool (scratch.h), and LongArray,
// an int64 array in a tensor's buffer (the tensor-buffer cache, allocator.cc.h). Included by
// bags.cc.h.
//
// Why: a call over large bags (SVD++'s: 51k ids) needs megabytes of index arrays. glibc maps a
// block past its mmap threshold, which is dynamic (it rises to the largest mapped block freed),
// so such blocks were mapped and page-faulted in afresh whenever the threshold stood below them
// (docs/performance.md, "Large-bag kernels": 4.7% of a step in page faults). The pool keeps them
// (up to 4 MiB a vector, 8 MiB a thread) and frees them when the cached memory is released.

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

// The buffers a bag call holds between scratch (or reserve_scratch) and trim_scratch: each is
// used within one step of a call (deduplication, pooling forward, pooling backward), never
// across them, and is the pool's again after trim_scratch. (A call that throws in between leaves
// its buffer here until the thread's next call of that step takes it over.)
struct BagScratch {
  std::vector<int64_t> kept, uids;
  std::vector<const float *> src;
  std::vector<float> w;
};
thread_local BagScratch bag_scratch;
// v's data, at least n elements, from the thread's pool.
template <class T>
T *scratch(std::vector<T> &v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) {
    scratch_pool<T>().give(std::move(v));
    v = scratch_pool<T>().take(static_cast<size_t>(n));
  }
  return v.data();
}
// v emptied, with room for n elements, from the thread's pool.
template <class T>
void reserve_scratch(std::vector<T> &v, int64_t n) {
  v.clear();
  if (v.capacity() < static_cast<size_t>(n)) {
    scratch_pool<T>().give(std::move(v));
    v = scratch_pool<T>().reserve(static_cast<size_t>(n));
  }
}
// Gives v back to the thread's pool.
template <class T>
void trim_scratch(std::vector<T> &v) {
  scratch_pool<T>().give(std::move(v));
  v = std::vector<T>();
}

}  // namespace
}  // namespace table
}  // namespace ct
