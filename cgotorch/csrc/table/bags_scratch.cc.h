// bags_scratch.cc.h: memory of the bags' calls (bags.cc.h) that must not come from malloc
// afresh each call: LongArray, an int64 array in a tensor's buffer (the tensor-buffer cache,
// allocator.cc.h). (Their per-call vectors are Scratch vectors from the thread's pool,
// scratch.h, given back when a call ends or throws.) Included by bags.cc.h.
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

}  // namespace
}  // namespace table
}  // namespace ct
