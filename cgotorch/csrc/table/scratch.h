// scratch.h: the per-call vectors of the tables' hot paths (a batch's distinct ids and their
// places, rows, occurrence counts, gradient pointers) and of the bags' calls (row pointers,
// weights, ids: bags_scratch.cc.h), reused per thread instead of allocated and freed by every
// call.
//
// Why: at batch 1,024 these vectors are 8 KiB each, beyond glibc's per-thread tcache, and a CTR
// step made about a hundred of them per worker (8 tables, a lookup and an update each), every one
// under the one malloc arena's lock (the library keeps one arena: tensor/allocator.cc.h). With two
// Hogwild workers, glibc's malloc and that lock's futex waits and wakes were about a third of the
// samples two workers add over one synchronous step, and these vectors half of the mallocs
// (docs/performance.md, "Two Hogwild workers: where the extra CPU goes"). A call over large bags
// (SVD++'s: 51k ids) needs hundreds of kilobytes a vector: past glibc's mmap threshold, such a
// block was mapped and page-faulted afresh each call (docs/performance.md, "Large-bag kernels").
//
// Bounds (size-aware): a thread keeps at most kScratchKept vectors per element type, and
// kScratchThreadBytes (8 MiB) over all its vectors; a vector over kScratchMaxBytes (4 MiB: a call
// of more than half a million ids) is never kept. A take gets the smallest kept vector that holds
// its n elements (a batch's small vectors and a bag call's large ones share a pool without
// trading places); a give beyond the bounds drops smaller kept vectors of its type to make room,
// or frees the given one.
//
// A thread's distinct-id table (distinct_ids' slots, batch.cc.h: up to 1 MiB, every slot free
// between calls) is kept here too, apart from the pools: a call takes it and gives it back.
//
// Release: every thread's pools are listed in a registry. release_scratch_pools (called through
// release_table_scratch by the tensor cache's release: ct_tensor_cache_release and the tables'
// Compact) frees the kept vectors and distinct-id tables of every thread at once, under each
// thread's lock (a vector or table in use is its call's: it goes back after, and stays). A lock, not
// an epoch each thread checks at its next take (as the tensor cache does): Go keeps OS threads
// that may never run a table call again, and an epoch would leave their scratch with them. The
// owner takes its lock (uncontended but for a release: an atomic exchange, then a store) once per
// take and per give.
#ifndef CGOTORCH_TABLE_SCRATCH_H
#define CGOTORCH_TABLE_SCRATCH_H

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace ct {
namespace table {

constexpr size_t kScratchKept = 16;
constexpr size_t kScratchThreadBytes = size_t{8} << 20;
constexpr size_t kScratchMaxBytes = size_t{4} << 20;

// A lock held for a few instructions by one thread nearly always (a pool's owner; a release
// rarely): a spin on one flag.
class ScratchLock {
 public:
  void lock() {
    while (f_.test_and_set(std::memory_order_acquire)) {
      for (int spins = 0; f_.test(std::memory_order_relaxed); spins++) {
        if (spins >= 64) std::this_thread::yield();  // (the holder may be off its core)
      }
    }
  }
  void unlock() { f_.clear(std::memory_order_release); }

 private:
  std::atomic_flag f_ = ATOMIC_FLAG_INIT;
};

// One element type's kept vectors of a thread (ThreadScratch holds them; its lock guards them).
template <class T>
class ScratchPool {
 public:
  // The smallest kept vector of at least n elements' capacity (its size and values as left);
  // an empty one (capacity 0) when none fits. bytes: the thread's kept total.
  std::vector<T> take_kept(size_t n, size_t &bytes) {
    size_t best = kept_.size();
    for (size_t i = 0; i < kept_.size(); i++) {
      const size_t c = kept_[i].capacity();
      if (c >= n && (best == kept_.size() || c < kept_[best].capacity())) best = i;
    }
    std::vector<T> v;
    if (best == kept_.size()) return v;
    v = std::move(kept_[best]);
    kept_[best] = std::move(kept_.back());
    kept_.pop_back();
    bytes -= v.capacity() * sizeof(T);
    return v;
  }

  // Keeps v if the bounds allow, once smaller kept vectors are dropped for it (into dropped,
  // freed by the caller outside the lock); otherwise leaves it in v.
  void keep(std::vector<T> &v, size_t &bytes, std::vector<std::vector<T>> &dropped) {
    const size_t b = v.capacity() * sizeof(T);
    if (b == 0 || b > kScratchMaxBytes) return;
    while (kept_.size() >= kScratchKept || bytes + b > kScratchThreadBytes) {
      size_t small = kept_.size();
      for (size_t i = 0; i < kept_.size(); i++) {
        if (kept_[i].capacity() < v.capacity() && (small == kept_.size() || kept_[i].capacity() < kept_[small].capacity())) {
          small = i;
        }
      }
      if (small == kept_.size()) return;  // (nothing smaller to drop: v goes)
      bytes -= kept_[small].capacity() * sizeof(T);
      dropped.push_back(std::move(kept_[small]));
      kept_[small] = std::move(kept_.back());
      kept_.pop_back();
    }
    if (kept_.capacity() == 0) kept_.reserve(kScratchKept);
    kept_.push_back(std::move(v));
    bytes += b;
  }

 private:
  std::vector<std::vector<T>> kept_;
};

// The element types of the pools (a Scratch of another type does not compile).
using ScratchTypes = std::tuple<ScratchPool<int64_t>, ScratchPool<int32_t>, ScratchPool<uint8_t>,
                                ScratchPool<const float *>, ScratchPool<float>>;

// A thread's pools, listed in the registry from its first take to its exit.
struct ThreadScratch {
  ScratchLock mu;
  size_t bytes = 0;        // kept, over every type
  int64_t allocated = 0;   // takes that allocated (ct_table_scratch_stats)
  ScratchTypes pools;
  std::vector<uint32_t> slots;  // distinct_ids' table, every slot free (empty while a call has it)
  ThreadScratch *prev = nullptr, *next = nullptr;  // the registry's list, under its mutex
  ThreadScratch();
  ~ThreadScratch();
};

struct ScratchRegistry {
  std::mutex mu;
  ThreadScratch *first = nullptr;
};
// Never destroyed: threads may exit while the process does.
inline ScratchRegistry &scratch_registry() {
  static ScratchRegistry *r = new ScratchRegistry();
  return *r;
}

inline ThreadScratch::ThreadScratch() {
  ScratchRegistry &r = scratch_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  next = r.first;
  if (r.first != nullptr) r.first->prev = this;
  r.first = this;
}

// Set once the thread's ThreadScratch is destroyed (its exit): a vector given back later is
// freed, a take allocates. Constant-initialized and trivially destructible, so readable then.
inline thread_local bool scratch_thread_gone = false;

inline ThreadScratch::~ThreadScratch() {
  {
    ScratchRegistry &r = scratch_registry();
    std::lock_guard<std::mutex> lock(r.mu);
    (prev != nullptr ? prev->next : r.first) = next;
    if (next != nullptr) next->prev = prev;
  }
  scratch_thread_gone = true;  // (the pools' vectors are freed with the members)
}

inline ThreadScratch &thread_scratch() {
  thread_local ThreadScratch s;
  return s;
}

// The calling thread's pool of vectors of T: take and give.
template <class T>
struct scratch_pool_ref {
  // A vector of n elements whose values are unspecified (a kept vector's old ones, or zeros:
  // only the elements past its last size are written).
  std::vector<T> take(size_t n) const {
    std::vector<T> v = fitting(n);
    v.resize(n);
    return v;
  }
  // An empty vector of at least n elements' capacity.
  std::vector<T> reserve(size_t n) const {
    std::vector<T> v = fitting(n);
    v.clear();
    return v;
  }
  // A vector of at least n elements' capacity: a kept one (its size and values as left), or a
  // new empty one.
  std::vector<T> fitting(size_t n) const {
    std::vector<T> v;
    if (!scratch_thread_gone) {
      ThreadScratch &s = thread_scratch();
      std::lock_guard<ScratchLock> lock(s.mu);
      v = std::get<ScratchPool<T>>(s.pools).take_kept(n, s.bytes);
      if (v.capacity() != 0) return v;
      s.allocated++;
    }
    size_t cap = 64;  // a power of two, so that the kept vectors soon fit every call
    while (cap < n) cap *= 2;
    v.reserve(cap);
    return v;
  }
  // Keeps v for a later take, within the bounds; frees it otherwise.
  void give(std::vector<T> &&v) const {
    std::vector<T> own(std::move(v));
    std::vector<std::vector<T>> dropped;
    if (own.capacity() != 0 && !scratch_thread_gone) {  // (nothing to keep of an empty one)
      ThreadScratch &s = thread_scratch();
      std::lock_guard<ScratchLock> lock(s.mu);
      std::get<ScratchPool<T>>(s.pools).keep(own, s.bytes, dropped);
    }
  }  // (own, if not kept, and dropped freed here, outside the lock)
};
template <class T>
scratch_pool_ref<T> scratch_pool() {
  return scratch_pool_ref<T>{};
}

// A vector of n elements from the thread's pool, given back to it when the Scratch ends (a
// Scratch lives within one call, on one thread). The values are unspecified: a caller that reads
// an element before it writes it fills the vector first.
template <class T>
struct Scratch {
  std::vector<T> v;
  // None yet (no take; a vector taken into v later goes back at the end).
  Scratch() = default;
  explicit Scratch(size_t n) : v(scratch_pool<T>().take(n)) {}
  // n elements, each set to fill.
  Scratch(size_t n, T fill) : Scratch(n) { std::fill(v.begin(), v.end(), fill); }
  ~Scratch() { give_back(); }
  // Gives the vector back now (the Scratch has none after).
  void give_back() { scratch_pool<T>().give(std::move(v)); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  T *data() { return v.data(); }
  size_t size() const { return v.size(); }
};

// The calling thread's distinct-id table (every slot free), for one call: empty when the thread
// keeps none (a release freed it, or no call made it yet). One lock, as a take.
inline std::vector<uint32_t> take_distinct_slots() {
  std::vector<uint32_t> v;
  if (scratch_thread_gone) return v;
  ThreadScratch &s = thread_scratch();
  std::lock_guard<ScratchLock> lock(s.mu);
  v.swap(s.slots);
  return v;
}
// Keeps the table of a call that took it (every slot free again) for the thread's next call.
inline void give_distinct_slots(std::vector<uint32_t> &&v) {
  std::vector<uint32_t> own(std::move(v));
  if (own.capacity() == 0 || scratch_thread_gone) return;
  ThreadScratch &s = thread_scratch();
  std::lock_guard<ScratchLock> lock(s.mu);
  own.swap(s.slots);  // (s.slots was empty: the call had it)
}

// The calling thread's kept bytes (its pools' vectors and its distinct-id table) and allocating
// takes, over the pools of every element type.
inline void scratch_stats(int64_t *kept_bytes, int64_t *allocated) {
  *kept_bytes = 0;
  *allocated = 0;
  if (scratch_thread_gone) return;
  ThreadScratch &s = thread_scratch();
  std::lock_guard<ScratchLock> lock(s.mu);
  *kept_bytes = static_cast<int64_t>(s.bytes + s.slots.capacity() * sizeof(uint32_t));
  *allocated = s.allocated;
}

// Frees the kept vectors of every thread's pools and its distinct-id table (those in use stay
// with their calls, and go back to their threads after).
inline void release_scratch_pools() noexcept {
  ScratchRegistry &r = scratch_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (ThreadScratch *s = r.first; s != nullptr; s = s->next) {
    ScratchTypes drained;  // (both freed when this iteration ends, outside the thread's lock)
    std::vector<uint32_t> slots;
    std::lock_guard<ScratchLock> tl(s->mu);
    std::swap(drained, s->pools);
    slots.swap(s->slots);
    s->bytes = 0;
  }
}

}  // namespace table
}  // namespace ct

#endif
