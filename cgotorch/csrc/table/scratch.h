// scratch.h: the per-call vectors of the tables' hot paths (a batch's distinct ids and their
// places, rows, occurrence counts, gradient pointers), reused per thread instead of allocated
// and freed by every call.
//
// Why: at batch 1,024 these vectors are 8 KiB each, beyond glibc's per-thread tcache, and a CTR
// step made about a hundred of them per worker (8 tables, a lookup and an update each), every one
// under the one malloc arena's lock (the library keeps one arena: tensor/allocator.cc.h). With two
// Hogwild workers, glibc's malloc and that lock's futex waits and wakes were about a third of the
// samples two workers add over one synchronous step, and these vectors half of the mallocs
// (docs/performance.md, "Two Hogwild workers: where the extra CPU goes").
//
// Bounds: a thread keeps, per element type, at most kScratchKept vectors of kScratchBytes
// together; a vector given back beyond that (or a bigger one) is freed as before. So a thread
// that runs table calls holds at most 4 x 256 KiB (the four element types of scratch_stats),
// and a batch of more than 32K ids takes and frees its vectors as it did before.
#ifndef CGOTORCH_TABLE_SCRATCH_H
#define CGOTORCH_TABLE_SCRATCH_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ct {
namespace table {

constexpr size_t kScratchBytes = size_t{256} << 10;
constexpr size_t kScratchKept = 16;

template <class T>
class ScratchPool {
 public:
  // A vector of n elements whose values are unspecified (a kept vector's old ones, or zeros).
  std::vector<T> take(size_t n) {
    std::vector<T> v;
    if (!kept_.empty()) {
      v = std::move(kept_.back());
      kept_.pop_back();
      bytes_ -= v.capacity() * sizeof(T);
    }
    if (v.capacity() < n) {  // a power of two, so that the kept vectors soon fit every call
      allocated_++;
      size_t cap = 64;
      while (cap < n) cap *= 2;
      v.reserve(cap);
    }
    v.resize(n);
    return v;
  }

  // Keeps v for a later take, within the bounds; frees it otherwise.
  void give(std::vector<T> &&v) {
    const size_t b = v.capacity() * sizeof(T);
    if (b == 0 || kept_.size() >= kScratchKept || bytes_ + b > kScratchBytes) {
      std::vector<T>().swap(v);
      return;
    }
    if (kept_.capacity() == 0) kept_.reserve(kScratchKept);
    kept_.push_back(std::move(v));
    bytes_ += b;
  }

  // The bytes this thread keeps, and the takes that allocated (ct_table_scratch_stats).
  size_t bytes() const { return bytes_; }
  int64_t allocated() const { return allocated_; }

 private:
  std::vector<std::vector<T>> kept_;
  size_t bytes_ = 0;
  int64_t allocated_ = 0;
};

// The calling thread's pool of vectors of T.
template <class T>
ScratchPool<T> &scratch_pool() {
  thread_local ScratchPool<T> pool;
  return pool;
}

// A vector of n elements from the thread's pool, given back to it when the Scratch ends (a
// Scratch lives within one call, on one thread). The values are unspecified: a caller that reads
// an element before it writes it fills the vector first.
template <class T>
struct Scratch {
  std::vector<T> v;
  explicit Scratch(size_t n) : v(scratch_pool<T>().take(n)) {}
  // n elements, each set to fill.
  Scratch(size_t n, T fill) : Scratch(n) { std::fill(v.begin(), v.end(), fill); }
  ~Scratch() { scratch_pool<T>().give(std::move(v)); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  T *data() { return v.data(); }
  size_t size() const { return v.size(); }
};

// The calling thread's kept bytes and allocating takes, over the pools of every element type.
inline void scratch_stats(int64_t *kept_bytes, int64_t *allocated) {
  *kept_bytes = static_cast<int64_t>(scratch_pool<int64_t>().bytes() + scratch_pool<int32_t>().bytes() +
                                     scratch_pool<uint8_t>().bytes() + scratch_pool<const float *>().bytes());
  *allocated = scratch_pool<int64_t>().allocated() + scratch_pool<int32_t>().allocated() +
               scratch_pool<uint8_t>().allocated() + scratch_pool<const float *>().allocated();
}

}  // namespace table
}  // namespace ct

#endif
