// allocator.cc.h: the CPU allocator installed in front of libtorch's. It counts the bytes of live
// tensor memory, so that the Go side can see them (the Go GC cannot), and caches freed tensor
// buffers per thread, so that threads training side by side do not serialize on glibc's single
// malloc arena (see "The tensor-buffer cache" below and docs/design.md, "Ownership and memory").
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include <malloc.h>

#include "internal.h"

namespace {

// Every block starts with a header; the data follows, 64-byte aligned.
constexpr size_t kAlign = 64;
struct Header {
  size_t n;      // the bytes asked for: what the live-bytes counter counts
  int32_t cls;   // size class, or -1: not cached (freed with free())
  Header *next;  // the next block of a free list, while cached
};
static_assert(sizeof(Header) <= kAlign, "the header must fit before the aligned data");

alignas(64) std::atomic<int64_t> live_bytes{0};
static_assert(sizeof(std::atomic<int64_t>) == sizeof(int64_t), "counter must be a plain int64");

// ---- The tensor-buffer cache ------------------------------------------------------------------
//
// glibc 2.36's posix_memalign takes the arena lock on every call (its per-thread tcache serves
// plain malloc only), and the library keeps one arena (see Install), so every tensor buffer of
// every thread went through one lock. Freed buffers of 64 B to 4 MiB are kept instead, in size
// classes of 4 per power of two (a block holds up to 25% more than asked), in a free list per
// class and thread: allocating and freeing on the same thread takes no lock. Bounds, from the
// CTR step of BenchmarkCTRStep (batch 1,024: about 113 buffers and 4.6 MiB a step, all alive
// until the step's scope ends): a thread keeps up to kThreadBytes, a step's buffers with room to
// spare; beyond it, the older half of the freed block's class and then whole classes, largest
// first, go to a central pool (one mutex, whole lists at a time), down to 3/4 of the bound. The
// central pool is where blocks freed on other threads (Go's cleanup goroutine) come back to the
// threads that allocate: a thread whose list of a class is empty takes a batch from it (up to
// 256 KiB, at least one block) before it mallocs. The central pool holds up to kCentralBytes;
// what comes beyond is freed. A thread's cache goes to the central pool when the thread exits.
// All threads' caches together hold up to kAllThreadsBytes (a free past it goes to the central
// pool), since a Go program runs its goroutines on many threads and each would keep its cache.
// So the memory held beyond the live bytes is bounded by kAllThreadsBytes + kCentralBytes,
// whatever the number of threads, and ct_tensor_cache_release (the tables' Compact too) frees it.
//
// GOREC_TENSOR_CACHE=0 in the environment at load turns the cache off (every block is malloc'd
// and freed as before).
constexpr int kMinShift = 6, kMaxShift = 22;  // classes from 64 B to 4 MiB
constexpr int kClasses = (kMaxShift - kMinShift) * 4 + 1;
constexpr size_t kMaxCached = size_t(1) << kMaxShift;
constexpr int64_t kThreadBytes = int64_t(8) << 20, kCentralBytes = int64_t(32) << 20;
constexpr int64_t kAllThreadsBytes = int64_t(64) << 20;
constexpr size_t kBatchBytes = size_t(256) << 10;
constexpr uint32_t kBatchMax = 32;

// The class of n bytes, n in [1, kMaxCached]: class 0 holds 64 B; for 2^k < n <= 2^(k+1) (k >= 6)
// the classes hold 2^k + j 2^(k-2), j = 1..4.
inline int size_class(size_t n) {
  if (n <= (size_t(1) << kMinShift)) return 0;
  const int k = 63 - __builtin_clzll(static_cast<unsigned long long>(n - 1));
  const size_t j = (n - (size_t(1) << k) + (size_t(1) << (k - 2)) - 1) >> (k - 2);
  return (k - kMinShift) * 4 + static_cast<int>(j);
}
inline size_t class_size(int c) {
  if (c == 0) return size_t(1) << kMinShift;
  const int k = kMinShift + (c - 1) / 4;
  return (size_t(1) << k) + (static_cast<size_t>((c - 1) % 4 + 1) << (k - 2));
}

bool cache_on = true;  // set once at load (Install), before any allocation

// Every member has an initializer, so that the thread_local below is constant-initialized (no
// guard on its accesses) and trivially destructible (its memory outlives the thread's other
// thread_local destructors, which may still free tensors).
enum : int { kNew = 0, kLive = 1, kDead = 2 };
struct ThreadCache {
  Header *head[kClasses] = {};
  uint32_t count[kClasses] = {};
  int64_t bytes = 0;                 // the owner's figure
  std::atomic<int64_t> shown{0};     // the same, for ct_tensor_cache_bytes (owner stores)
  uint64_t epoch = 0;                // the release epoch this thread's cache has seen
  int state = kNew;
  ThreadCache *prev = nullptr, *next = nullptr;  // the registry, under its mutex
};
thread_local ThreadCache tcache;

// Bumped by each release: a thread seeing a new value frees its cache at its next allocation or
// free (a release cannot touch another thread's lists).
alignas(64) std::atomic<uint64_t> release_epoch{0};

struct Central {
  std::mutex mu;
  Header *head[kClasses] = {};
  uint32_t count[kClasses] = {};
  int64_t bytes = 0;
};
struct Registry {
  std::mutex mu;
  ThreadCache *first = nullptr;
};
// Never destroyed: threads may free tensors while the process exits.
Central &central() {
  static Central *c = new Central;
  return *c;
}
Registry &registry() {
  static Registry *r = new Registry;
  return *r;
}

void free_list(Header *h) {
  while (h != nullptr) {
    Header *next = h->next;
    std::free(h);
    h = next;
  }
}

// The bytes in all threads' caches (each changes it with its own).
alignas(64) std::atomic<int64_t> threads_bytes{0};

void publish(ThreadCache &t) { t.shown.store(t.bytes, std::memory_order_relaxed); }

// Changes t's figure and the all-threads total by delta bytes.
inline void account(ThreadCache &t, int64_t delta) {
  t.bytes += delta;
  threads_bytes.fetch_add(delta, std::memory_order_relaxed);
}

// Gives the k blocks first..last of class c to the central pool; frees what passes its bound.
void central_put(int c, Header *first, Header *last, uint32_t k) {
  const int64_t size = static_cast<int64_t>(class_size(c));
  Header *excess = nullptr;
  Central &p = central();
  {
    std::lock_guard<std::mutex> lock(p.mu);
    last->next = p.head[c];
    p.head[c] = first;
    p.count[c] += k;
    p.bytes += size * k;
    while (p.bytes > kCentralBytes) {  // the blocks just given go first
      Header *h = p.head[c];
      p.head[c] = h->next;
      p.count[c]--;
      p.bytes -= size;
      h->next = excess;
      excess = h;
    }
  }
  free_list(excess);
}

// Moves a batch of class c from the central pool into t's (empty) list; false if it has none.
bool central_take(ThreadCache &t, int c) {
  const size_t size = class_size(c);
  const uint32_t want = static_cast<uint32_t>(std::max<size_t>(1, std::min<size_t>(kBatchMax, kBatchBytes / size)));
  Central &p = central();
  std::lock_guard<std::mutex> lock(p.mu);
  Header *first = p.head[c], *last = nullptr, *h = first;
  uint32_t k = 0;
  for (; h != nullptr && k < want; k++) {
    last = h;
    h = h->next;
  }
  if (k == 0) return false;
  last->next = t.head[c];
  t.head[c] = first;
  p.head[c] = h;
  p.count[c] -= k;
  p.bytes -= static_cast<int64_t>(size) * k;
  t.count[c] += k;
  account(t, static_cast<int64_t>(size) * k);
  return true;
}

// Gives all but the first keep blocks of t's class c to the central pool.
void give(ThreadCache &t, int c, uint32_t keep) {
  if (t.count[c] <= keep) return;
  Header **link = &t.head[c];
  for (uint32_t i = 0; i < keep; i++) link = &(*link)->next;
  Header *first = *link, *last = first;
  uint32_t k = 1;
  while (last->next != nullptr) {
    last = last->next;
    k++;
  }
  *link = nullptr;
  t.count[c] -= k;
  account(t, -static_cast<int64_t>(class_size(c)) * k);
  central_put(c, first, last, k);
}

void free_cache(ThreadCache &t) {
  for (int c = 0; c < kClasses; c++) {
    free_list(t.head[c]);
    t.head[c] = nullptr;
    t.count[c] = 0;
  }
  account(t, -t.bytes);
  publish(t);
}

// At the exit of a thread that used its cache: the cache goes to the central pool, and the
// thread's later frees (other thread_local destructors) go there directly.
struct ThreadExit {
  ~ThreadExit() {
    ThreadCache &t = tcache;
    if (t.state != kLive) return;
    for (int c = 0; c < kClasses; c++) give(t, c, 0);
    publish(t);
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    (t.prev != nullptr ? t.prev->next : r.first) = t.next;
    if (t.next != nullptr) t.next->prev = t.prev;
    t.state = kDead;
  }
};
thread_local ThreadExit thread_exit;

// The slow path of a thread's cache: registers it on first use, frees it after a release.
// False once the thread is exiting.
bool refresh(ThreadCache &t) {
  if (t.state == kDead) return false;
  const uint64_t e = release_epoch.load(std::memory_order_acquire);
  if (t.state == kNew) {
    (void)&thread_exit;  // constructs it, so that its destructor runs at the thread's exit
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    t.next = r.first;
    if (r.first != nullptr) r.first->prev = &t;
    r.first = &t;
    t.state = kLive;
  } else {
    free_cache(t);
  }
  t.epoch = e;
  return true;
}

inline bool ready(ThreadCache &t) {
  return (t.state == kLive && t.epoch == release_epoch.load(std::memory_order_relaxed)) || refresh(t);
}

// A cached block of class c, or nullptr (the caller mallocs one).
Header *cache_take(int c) {
  ThreadCache &t = tcache;
  if (!ready(t)) return nullptr;
  Header *h = t.head[c];
  if (h == nullptr) {
    if (!central_take(t, c)) return nullptr;
    h = t.head[c];
  }
  t.head[c] = h->next;
  t.count[c]--;
  account(t, -static_cast<int64_t>(class_size(c)));
  publish(t);
  return h;
}

void cache_put(Header *h) {
  const int c = h->cls;
  ThreadCache &t = tcache;
  const int64_t size = static_cast<int64_t>(class_size(c));
  if (!ready(t) || threads_bytes.load(std::memory_order_relaxed) + size > kAllThreadsBytes) {
    central_put(c, h, h, 1);
    return;
  }
  h->next = t.head[c];
  t.head[c] = h;
  t.count[c]++;
  account(t, size);
  if (t.bytes > kThreadBytes) {
    give(t, c, t.count[c] / 2);
    for (int d = kClasses - 1; d >= 0 && t.bytes > kThreadBytes / 4 * 3; d--) give(t, d, 0);
  }
  publish(t);
}

void counted_free(void *data) {
  if (data == nullptr) return;
  Header *h = reinterpret_cast<Header *>(static_cast<char *>(data) - kAlign);
  live_bytes.fetch_sub(static_cast<int64_t>(h->n), std::memory_order_relaxed);
  if (h->cls < 0) {
    std::free(h);
  } else {
    cache_put(h);
  }
}

// libtorch 1.x declares `allocate(size_t) const`; 2.x made it non-const and added the pure virtual
// copy_data. Both allocate overloads are declared (each version overrides the one it has and sees
// the other as a plain overload), and copy_data is a harmless extra member on 1.x. (So only some
// members can say `override`; Clang's warning about that is silenced here.)
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Winconsistent-missing-override"
#endif
struct CountingAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) { return allocate_counted(n); }
  c10::DataPtr allocate(size_t n) const { return allocate_counted(n); }
  void copy_data(void *dst, const void *src, std::size_t n) const { std::memcpy(dst, src, n); }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_free; }

 private:
  static c10::DataPtr allocate_counted(size_t n) {
    if (n == 0) return {nullptr, nullptr, &counted_free, c10::Device(c10::DeviceType::CPU)};
    const int c = cache_on && n <= kMaxCached ? size_class(n) : -1;
    Header *h = c >= 0 ? cache_take(c) : nullptr;
    if (h == nullptr) {
      const size_t size = c >= 0 ? class_size(c) : n;
      void *base = nullptr;
      if (size > SIZE_MAX - kAlign || posix_memalign(&base, kAlign, size + kAlign) != 0) {
        throw std::bad_alloc();
      }
      h = static_cast<Header *>(base);
    }
    h->n = n;
    h->cls = c;
    live_bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
    void *data = reinterpret_cast<char *>(h) + kAlign;
    return {data, data, &counted_free, c10::Device(c10::DeviceType::CPU)};
  }
};
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

CountingAllocator counting_allocator;

// Installed when the library loads, before any Go code runs. Priority 1 wins over libtorch's
// default CPU allocator (registered with priority 0).
//
// glibc gives each thread that allocates its own arena and keeps freed blocks in the arena they
// came from. Go moves a goroutine between OS threads and frees unreachable tensors from its
// cleanup goroutine, so with the default arena count the resident size of a training loop drifts
// to several times its live tensor bytes (measured: 1.3-1.8 GiB resident for 0.3 GiB live). One
// arena keeps it near the live figure (0.6 GiB) and was also faster in that loop; the cache above
// keeps threads from waiting on its lock. A process that sets MALLOC_ARENA_MAX itself keeps its
// own choice.
struct Install {
  Install() {
    if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 1);
    const char *cache = std::getenv("GOREC_TENSOR_CACHE");
    cache_on = cache == nullptr || std::strcmp(cache, "0") != 0;
    c10::SetAllocator(c10::DeviceType::CPU, &counting_allocator, 1);
  }
} install;

}  // namespace

namespace ct {

void release_table_scratch() noexcept;  // table/compact.cc.h

// Frees the central pool and the calling thread's cache, has every other thread free its cache
// at its next allocation or free, and frees every thread's table scratch (table/scratch.h); then
// hands the heap's free memory back to the system.
void release_tensor_cache() noexcept {
  release_epoch.fetch_add(1, std::memory_order_acq_rel);
  ThreadCache &t = tcache;
  if (t.state == kLive) {
    free_cache(t);
    t.epoch = release_epoch.load(std::memory_order_acquire);
  }
  Header *all = nullptr;
  {
    Central &p = central();
    std::lock_guard<std::mutex> lock(p.mu);
    for (int c = 0; c < kClasses; c++) {
      while (Header *h = p.head[c]) {
        p.head[c] = h->next;
        h->next = all;
        all = h;
      }
      p.count[c] = 0;
    }
    p.bytes = 0;
  }
  free_list(all);
  release_table_scratch();
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace ct

extern "C" {

int64_t ct_live_bytes(void) { return live_bytes.load(std::memory_order_relaxed); }

const volatile int64_t *ct_live_bytes_counter(void) {
  return reinterpret_cast<const volatile int64_t *>(&live_bytes);
}

int64_t ct_tensor_cache_bytes(void) {
  int64_t sum = 0;
  {
    Central &p = central();
    std::lock_guard<std::mutex> lock(p.mu);
    sum += p.bytes;
  }
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const ThreadCache *t = r.first; t != nullptr; t = t->next) sum += t->shown.load(std::memory_order_relaxed);
  return sum;
}

ct_error ct_tensor_cache_release(void) {
  return ct::guard([] { ct::release_tensor_cache(); });
}

}  // extern "C"
