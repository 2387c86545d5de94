// table.cc.h: dynamic hash embedding tables (the RecIS design) behind the C ABI's ct_table_*.
//
// Structure
//   - An id map (csrc/idmap/) turns raw int64 ids into contiguous row indices 0, 1, 2, ... and
//     hands the indices of deleted ids back for reuse.
//   - Rows live in fixed-size blocks of block_rows rows, appended as the indices grow: old rows
//     never move. Row i is at block i / block_rows, offset i % block_rows. A row's embedding and
//     its optimizer states (slots) are row-aligned. Two layouts: separate (one block array per
//     slot, the default) and interleaved (one block array; a block row is
//     [embedding | state 0 | state 1], so one row's data is adjacent in memory). Measured with
//     BenchmarkLayout (embedding/bench_test.go), separate is the faster one for Adam on random
//     rows and for lookups (see the report there); both stay selectable.
//   - A new row (a new id, or a deleted id's reused index) is fully written before it is used:
//     its embedding by the initializer (a function of seed and id), its states by their initial
//     values. That is how deletion resets all state before an index is reused.
//   - Kernels: CPU tables use raw loops over rows (at::parallel_for for large batches; rows are
//     independent, so results do not depend on the thread count). CUDA tables (and CPU tables
//     created with CT_TABLE_TENSOR_KERNELS, which is how the CUDA code path is tested on CPU)
//     keep their blocks in chunks (one tensor per array for each growth, see chunk_growth),
//     gather the touched rows of each slot per chunk with index_select, run the optimizer as
//     tensor ops and scatter back with index_copy_.
//
// Atomicity: every input is validated (dtype, rank, contiguity, sizes, finiteness) and every
// allocation the batch needs is made before the id map changes. The storage is grown before a
// find-or-insert of n ids so that indices up to high_water + n fit (blocks that end up unused
// are harmless). After the id map changed, the raw kernels cannot fail; the tensor kernels can
// (a CUDA error): then the ids this batch inserted are erased again.
//
// Locking
//   - Each table has one std::shared_mutex `mu_`. Shared: lookups whose ids are all present
//     (the common case; a lookup that must insert drops the shared lock, retakes it
//     exclusively and inserts only the ids it missed unless remaps_ moved), read, indices
//     without insert, export, stats, an eviction's choice of rows. Exclusive: lookups that
//     insert, indices with insert, write, update, delete, clear, close, an eviction's removal
//     (see Table::evict). Every operation checks `closed_` after taking the lock.
//   - close sets `closed_` and then takes `mu_` exclusively: it waits for the operations in
//     flight, and every operation that takes the lock afterwards fails with "closed: ". The
//     table object is reference counted (std::shared_ptr): handles, the registry and queued
//     prefetches keep it alive, so a closed table is never freed under a caller.
//   - `prefetches_.mu` guards the table's pending prefetches (never held while taking `mu_`).
//     A prefetch's own mutex may be taken under it (discard of a prefetch being waited for),
//     never the other way round.
//   - The registry's mutex guards the name -> table map; it is never held while taking a
//     table's lock.
//   - Prefetches run on a process-wide pool of two worker threads.
//
// Files (in csrc/table/; one translation unit, unity_table.cc, includes them in this order)
//   table.cc.h       the helpers every part uses (key and row checks, slabs) and class Table
//   sort.cc.h        radix sort of ids; rows in index order (each_row_by_index)
//   storage.cc.h     construction, row storage and its growth, inserting new rows
//   gather.cc.h      rows between table and batch (row plans, gathers, scatters)
//   ops.cc.h         lookup, indices, read, write, update, erase, clear, stats, snapshot, close
//   gradients.cc.h   the table's side of autograd (forward rows, max_norm, pending gradients)
//   prefetch.cc.h    prefetches and their worker pool
//   capi.cc.h        the registry and the ct_table_* entry points of the operations above
//   metadata.cc.h    per-row metadata (last step, frequency, delta epoch)
//   checkpoint.cc.h  the checkpoint stream, imports, the step counter, swap (loads)
//   admission.cc.h   admission: counts of ids without a row
//   counted.cc.h     lookups counting each key a given number of times
//   compact.cc.h     compaction
//   evict.cc.h       eviction and removal
//   delta.cc.h       deltas and the deletions they carry
//   check.cc.h       the table's invariants checked on demand (ct_table_check)
//   lr.cc.h          learning-rate changes (ct_table_set_lr)
//   autograd.cc.h    the tables inside libtorch's autograd graph
//   bags.cc.h        embedding bags pooled in raw loops, several tables' in one call
//   batch.cc.h       per batch: distinct ids (a stamped per-thread hash set), finiteness
//   math.cc.h        initializers and the optimizers' rules (their row kernels: optim_rows.h)
//   seed.cc.h        a table's seed derived from its name (CT_TABLE_SEED_FROM_NAME)
//   read_state.cc.h  the rows and optimizer states of a few ids (ct_table_read_state)
// The files after capi.cc.h each hold one concern's members of class Table and its ct_table_*
// entry points.
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "../idmap/idmap.h"
#include "admission.h"
#include "delta.h"
#include "internal.h"
#include "lanes.h"
#include "meta.h"
#include "optim_avx512.cc.h"

namespace ct {
namespace table {

namespace {

constexpr int64_t kDefaultBlockRows = 4096;
// On a GPU a batch costs kernels per chunk it touches (index_select, index_copy_), and a table
// grown from nothing has about log2(rows / block_rows) chunks: bigger blocks, fewer chunks.
constexpr int64_t kDefaultCudaBlockRows = 65536;
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxBlockRows = int64_t{1} << 24;
// The largest capacity a table takes (about 1.1e12 ids: 32 TiB of id map alone), and the host
// bytes a row's id takes in the id map and the per-row bookkeeping when a capacity is reserved
// (29 for the map at its sizing load, see idmap.h; a pointer, a stamp), at least.
constexpr int64_t kMaxCapacity = int64_t{1} << 40;
constexpr double kBytesPerId = 32;
// How many rows ahead the raw kernels prefetch.
constexpr int64_t kAhead = 16;
// Asks the CPU to bring the bytes at p into the cache, to read or to write. Always inlined: as a
// function of its own, GCC finds it has no side effects (prefetches do not count) and deletes
// every call to it, which it did before (no prefetch was issued).
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
inline void prefetch_lines(const void *p, size_t bytes, bool write) {
  const char *c = static_cast<const char *>(p);
  for (size_t off = 0; off < bytes; off += 64) {
    if (write) {
      __builtin_prefetch(c + off, 1, 3);
    } else {
      __builtin_prefetch(c + off, 0, 3);
    }
  }
}
// Runs body(begin, end) over rows [0, n): in this thread for small batches, else split by
// at::parallel_for in chunks of at least 16K rows (fewer for rows of over 1K floats touched:
// width), about a millisecond of random rows. A parallel region costs tens of microseconds on
// the 2-core VM (waking OpenMP's threads): with chunks of 32K floats of work (64 rows at dim 64
// for an update) 2 threads made lookups and SGD updates of 2K to 8K rows at dims 16 and 64 up to
// 1.8x slower than one in a throwaway benchmark (noisy: libtorch's own parallel operators
// within a call cost as much at times), and only from 32K rows were they faster (up to 1.9x).
template <class F>
void for_rows(int64_t n, int64_t width, const F &body) {
  const int64_t grain = std::clamp<int64_t>((int64_t{1} << 24) / std::max<int64_t>(width, 1), 1024, 16384);
  if (n < grain) {
    body(int64_t{0}, n);
  } else {
    at::parallel_for(0, n, grain, body);
  }
}

// Runs body(begin, end) over elements [0, n) of `per` floats each to read and write (a step's
// row: its slots and its gradient): in this thread while the work n * per is below
// kSerialWork (8 MiB of floats), else split by at::parallel_for in chunks of at least half of
// it. The elements are independent (the rows of a step, or the parts of a maximum, which does
// not depend on the order it is taken in), so results do not depend on the thread count.
//
// Why by work, not by rows as for_rows does for gathers: SVD++'s implicit table steps about
// 7.5k rows of 128 floats a batch with SparseAdam (3.8M floats of work, 0.3-0.4 ms on one core
// of the 2-core VM, bound by memory), far below for_rows' 16k rows, while a step of a CTR
// model's fields (1k rows of 16) must stay in the calling thread (a parallel region costs tens
// of microseconds, see for_rows).
constexpr int64_t kSerialWork = int64_t{1} << 21;
template <class F>
void for_work(int64_t n, int64_t per, const F &body) {
  if (n * per < kSerialWork) {
    body(int64_t{0}, n);
  } else {
    at::parallel_for(0, n, std::max<int64_t>(1, kSerialWork / (2 * per)), body);
  }
}

// Raises most to m (the threads of a for_work combining their maxima).
inline void raise_atomic(std::atomic<int32_t> &most, int32_t m) {
  int32_t cur = most.load(std::memory_order_relaxed);
  while (m > cur && !most.compare_exchange_weak(cur, m, std::memory_order_relaxed)) {
  }
}

// ---- huge-page backed row storage (CPU tables) ---------------------------------------------
//
// Random rows of a large table miss the TLB on almost every access, and on a virtual machine a
// page walk is itself a chain of cache misses: with 4 KiB pages a lookup of random rows spent
// most of its time walking page tables, not moving rows. Once an array of a CPU table holds
// kSlabMin bytes, its blocks are carved out of 2 MiB-aligned anonymous mappings ("slabs")
// advised for transparent huge pages (MADV_HUGEPAGE: used where the system allows it, else
// ordinary pages). A slab is zero-filled by the kernel and its pages are only backed when first
// written (rows are written when their ids are inserted), so a slab's unused tail costs address
// space, not memory; each block is a tensor over its part of a slab, holding the slab alive.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kSlabMin = 2 * kHugePage;
constexpr size_t kSlabMax = size_t{256} << 20;
// Tensor-kernel tables: the most bytes (all arrays) a growth reserves beyond what it needs.
constexpr size_t kChunkGrowMax = size_t{1} << 30;

}  // namespace

// A slab's mapping (named, not in the anonymous namespace: class Table holds it, and this file is
// compiled as part of unity_table.cc).
struct Mapping {
  void *p = nullptr;
  size_t bytes = 0;
  Mapping(void *p_, size_t b) : p(p_), bytes(b) {}
  Mapping(const Mapping &) = delete;
  Mapping &operator=(const Mapping &) = delete;
  ~Mapping() { munmap(p, bytes); }
};

namespace {

// A zero-filled mapping of bytes (a multiple of kHugePage), kHugePage-aligned.
std::shared_ptr<Mapping> map_slab(size_t bytes) {
  const size_t len = bytes + kHugePage;
  void *raw = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t al = (a + kHugePage - 1) & ~static_cast<uintptr_t>(kHugePage - 1);
  if (al > a) munmap(raw, al - a);
  const uintptr_t end = al + bytes;
  if (a + len > end) munmap(reinterpret_cast<void *>(end), a + len - end);
  void *p = reinterpret_cast<void *>(al);
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without huge pages everything still works
#endif
  try {
    return std::make_shared<Mapping>(p, bytes);
  } catch (...) {
    munmap(p, bytes);
    throw;
  }
}

// Gives the memory of a block that lives in a slab back to the system (its pages read as zeros
// again) when compaction drops the block: the slab itself stays mapped while other blocks use it.
// Blocks of ordinary tensors (small or CUDA tables) are freed with the tensor instead.
void release_slab_block(const at::Tensor &b) {
  if (!b.defined() || b.storage().allocator() != nullptr) return;  // from_blob: a slab block
  const uintptr_t page = 4096, lo = reinterpret_cast<uintptr_t>(b.data_ptr());
  const uintptr_t hi = lo + b.nbytes(), alo = (lo + page - 1) & ~(page - 1), ahi = hi & ~(page - 1);
  if (ahi > alo) madvise(reinterpret_cast<void *>(alo), ahi - alo, MADV_DONTNEED);
}

// Keys checked and copied to the host (if needed) for the id map.
struct Keys {
  at::Tensor host;  // int64 [N], CPU, contiguous
  at::Device device = at::kCPU;  // where the caller's keys live: results go there
  int64_t n = 0;
  // Occurrences of each key in the caller's batch, or nullptr (one each): an autograd lookup
  // looks up a batch's distinct ids, and a training lookup counts each occurrence (frequency,
  // admission) as a lookup of the whole batch would.
  const int64_t *counts = nullptr;
  // The keys are distinct (the ids of one backward pass's gradients): an update need not
  // deduplicate them.
  bool distinct = false;
  const int64_t *ptr() const { return host.data_ptr<int64_t>(); }
};

// keys (or another int64 vector: what names it in errors).
Keys check_keys(ct_tensor h, const char *what = "keys") {
  const at::Tensor &k = get(h);
  const std::string w(what);
  if (k.scalar_type() != at::kLong) throw arg_error(w + " must be int64, got " + c10::toString(k.scalar_type()));
  if (k.dim() != 1) throw arg_error(w + " must be one-dimensional, got " + std::to_string(k.dim()) + " dimensions");
  if (!k.is_contiguous()) throw arg_error(w + " must be contiguous");
  Keys r;
  r.device = k.device();
  r.host = k.device().is_cpu() ? k.detach() : k.detach().to(at::kCPU);
  r.n = k.size(0);
  return r;
}

// A values or gradients tensor [n, dim]: float32, two-dimensional, contiguous.
at::Tensor check_rows(const at::Tensor &v, const char *what, int64_t n, int64_t dim) {
  if (v.scalar_type() != at::kFloat) {
    throw arg_error(std::string(what) + " must be float32, got " + c10::toString(v.scalar_type()));
  }
  if (v.dim() != 2) {
    throw arg_error(std::string(what) + " must be two-dimensional, got " + std::to_string(v.dim()) + " dimensions");
  }
  if (!v.is_contiguous()) throw arg_error(std::string(what) + " must be contiguous");
  if (v.size(0) != n) {
    throw arg_error(std::string(what) + " has " + std::to_string(v.size(0)) + " rows for " +
                    std::to_string(n) + " keys");
  }
  if (v.size(1) != dim) {
    throw arg_error(std::string(what) + " has width " + std::to_string(v.size(1)) +
                    ", the table's dim is " + std::to_string(dim));
  }
  return v.detach();
}

// Host memory for a copy to device d: page-locked when d is a GPU, so that the copy is queued
// behind the GPU's work instead of waiting for it (a copy from pageable memory synchronizes).
// The caching host allocator keeps such a buffer until its copy is done.
at::Tensor staging(at::IntArrayRef shape, at::ScalarType type, at::Device d) {
  return at::empty(shape, at::TensorOptions(type).pinned_memory(!d.is_cpu()));
}

at::Tensor upload(const at::Tensor &host, at::Device d) {
  return d.is_cpu() ? host : host.to(d, host.scalar_type(), /*non_blocking=*/true);
}

// The largest |element| of v (float32, any device): +Inf or NaN when one is Inf or NaN, 0
// when v is empty. Vectorised on the CPU (max_abs_bits, sixteen lanes with AVX-512), and split
// over the threads as a step's rows are (for_work).
double max_abs(const at::Tensor &v) {
  if (v.numel() == 0) return 0;
  if (v.device().is_cpu() && v.is_contiguous()) {
    const float *p = v.data_ptr<float>();
    std::atomic<int32_t> most{0};
    for_work(v.numel(), 1, [&](int64_t begin, int64_t end) {
#ifdef CT_TABLE_AVX512
      const int64_t k = end - begin;
      const int32_t m = use_avx512() ? max_abs_bits_avx512(p + begin, k) : max_abs_bits(p + begin, k);
#else
      const int32_t m = max_abs_bits(p + begin, end - begin);
#endif
      raise_atomic(most, m);
    });
    const int32_t b = most.load();
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  }
  return v.abs().max().item<double>();
}

// max_abs, refusing NaN and Inf.
double max_abs_finite(const at::Tensor &v, const char *what) {
  const double m = max_abs(v);
  if (!std::isfinite(m)) throw arg_error(std::string(what) + " contain NaN or Inf: the batch is rejected");
  return m;
}

// Values a write may store: finite and of magnitude below 2^64 (about 1.8e19), the floats whose
// square is a finite float32. The optimizers square values and norms take squares of rows, so a
// row written beyond the bound could overflow at its next step (which an update rejects, see
// step_raw); a value written below it cannot by its square alone.
// Returns the largest magnitude.
double check_writable(const at::Tensor &v) {
  const double m = max_abs(v);
  if (!(m < 0x1p64)) {
    throw arg_error("values contain NaN or Inf, or magnitudes of 2^64 (1.8446744e19) or more: the batch is rejected");
  }
  return m;
}

std::string check_name(const char *name) {
  if (name == nullptr) throw arg_error("table name is NULL");
  std::string s(name);
  if (s.empty()) throw arg_error("table name is empty");
  if (s.size() > 255) throw arg_error("table name is longer than 255 bytes");
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) throw arg_error("table name contains a control character");
  }
  return s;
}

// A new delta lineage: random, never 0 (std::random_device mixed with a process-wide counter
// and the clock, so that two tables of one process never share one even if the device repeats).
uint64_t fresh_lineage() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  uint64_t x = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ (counter.fetch_add(1) * 0x9e3779b97f4a7c15ULL) ^
               static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  x ^= x >> 31;  // (splitmix64's finaliser)
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  return x != 0 ? x : 1;
}

void check_mode(int32_t mode) {
  if (mode != CT_READ_ZEROS && mode != CT_READ_INITIAL) {
    throw arg_error("unknown read default " + std::to_string(mode));
  }
}

}  // namespace

struct Prefetch {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool claimed = false;  // a waiter is waiting (guarded by the table's prefetches_.mu)
  // Discarded while a waiter held it (Table::discard): written under both the table's
  // prefetches_.mu and mu, so read under either; the waiter wakes and fails with "unknown
  // prefetch: ".
  bool discarded = false;
  at::Tensor rows, found;
  std::string error;
  int32_t error_code = CT_OK;  // error's code (CT_ERR_*)
};

// A table's pending prefetches (prefetch.cc.h), owned by class Table as prefetches_. mu guards
// them (never held while taking the table's lock).
struct Prefetches {
  std::mutex mu;
  std::unordered_map<int64_t, std::shared_ptr<Prefetch>> pending;
  int64_t next = 1;
  int64_t tasks = 0;  // prefetch tasks queued or running (close waits for them)
  std::condition_variable cv;
};

// The rows a lookup found for a batch's ids, and the table's remaps_ then: they stay valid while
// remaps_ stays at it (see remaps_).
struct FoundRows {
  std::vector<int64_t> rows;
  uint64_t remaps = 0;
  bool valid = false;
};

// Pending gradients of the autograd path (gradients.cc.h: accept_grad .. step_pending), owned by
// class Table as grads_: chunks of distinct ids (int64, CPU) and their gradients (on the storage
// device). any also covers an empty batch (a step with no rows still counts, as with update).
// mu is taken before the table's lock, never while holding it.
//
// The step of a single chunk takes its ids' rows from the training lookup that found them
// instead of finding the ids again in the id map (half of the id map's time in SVD++'s step,
// 7.5k ids): looked_up is the last training lookup's ids tensor (held, so that its identity
// names that batch) and last its rows (kept only when admission left none out); first gets them
// when the first chunk's ids are that tensor, and update uses them while remaps_ has not moved.
struct PendingGrads {
  std::mutex mu;
  std::vector<at::Tensor> ids, grads;
  bool any = false;
  at::Tensor looked_up;
  FoundRows last, first;
};

struct Snapshot {
  at::Tensor ids, rows;
  std::vector<at::Tensor> states;
  int64_t step = 0;
};

// A batch's rows grouped by chunk for the tensor kernels: off (row offsets within the chunk) and
// pos (indices into the batch; not needed, so not made, when there is one chunk), in chunk
// order, on the storage device; chunks[k] covers [begin[k], begin[k + 1]) of them. One
// host-to-device copy for the whole batch, however many chunks it touches (a copy per block had
// made a GPU lookup of 4,096 random rows take 10 ms); an update makes one plan for all its
// gathers and scatters.
struct RowPlan {
  at::Tensor pos, off;
  std::vector<int64_t> chunks, begin;
  int64_t n = 0;
  // One chunk: the batch order is kept (pos would be 0, 1, ..., n-1).
  bool one_chunk() const { return chunks.size() == 1; }
};

class Table : public std::enable_shared_from_this<Table> {
 public:
  Table(std::string name, const ct_table_config &cfg);
  ~Table();
  Table(const Table &) = delete;
  Table &operator=(const Table &) = delete;

  const std::string &name() const { return name_; }
  uint64_t serial() const { return serial_; }

  // rows_out (may be nullptr): each key's row index, -1 for an id admission kept out;
  // remaps_out (may be nullptr): remaps_ when they were found (they stay valid while it stays).
  at::Tensor lookup(const Keys &k, std::vector<int64_t> *rows_out = nullptr, uint64_t *remaps_out = nullptr);
  // lookup and read into out [N, dim] on the storage device (read: found[N] may be NULL)
  void lookup_into(const Keys &k, at::Tensor &out, std::vector<int64_t> *rows_out = nullptr,
                   uint64_t *remaps_out = nullptr);
  void read_into(const Keys &k, int32_t mode, at::Tensor &out, uint8_t *found);
  at::Tensor indices(const Keys &k, bool insert);
  std::pair<at::Tensor, at::Tensor> read(const Keys &k, int32_t mode);
  void write(const Keys &k, const at::Tensor &values);
  // found (may be nullptr): the rows of k's ids, if a lookup found them (see FoundRows).
  void update(const Keys &k, const at::Tensor &grads, const FoundRows *found = nullptr);
  int64_t erase(const Keys &k);
  void clear();
  ct_table_stats stats();
  Snapshot snapshot();
  // rows and states of k as snapshot gives them, zeros for absent ids (read_state.cc.h)
  std::vector<at::Tensor> read_state(const Keys &k, uint8_t *found);
  void export_chunks(int64_t chunk_rows, ct_table_sink sink, uintptr_t ctx);
  void close();

  int64_t prefetch(const Keys &k, int32_t mode);

  // ---- autograd (gradients.cc.h; used by autograd.cc.h)
  int64_t dim() const { return dim_; }
  at::Device device() const { return device_; }
  // An uninitialised [n, dim] tensor on the storage device: what lookups and reads fill.
  at::Tensor new_rows(int64_t n) const { return at::empty({n, dim_}, float_opts()); }
  int32_t num_states() const { return nstates_; }  // fixed at creation (swap requires equal)
  bool has_optimizer() const { return opt_.kind != CT_OPT_NONE; }
  // lookup, then the rows whose norm exceeds max_norm are renormalised in the table.
  at::Tensor lookup_renorm(const Keys &k, double max_norm, std::vector<int64_t> *rows_out = nullptr,
                           uint64_t *remaps_out = nullptr);
  // Rows [u, dim] of the distinct ids uids (int64 [u], CPU, contiguous), on device. train:
  // find-or-insert, and with max_norm > 0 the rows over it are renormalised in the table (as
  // PyTorch does to its weight). Otherwise a read: absent ids get the default row (default_mode),
  // nothing is inserted, and max_norm renormalises the returned copy only. counts: the
  // occurrences of each id in the batch (a training lookup counts them all), or nullptr.
  // admitted (training lookups; may be nullptr): the positions in uids of the ids that have a row
  // after the lookup (with admission on, those not admitted yet have none: zero rows).
  at::Tensor autograd_rows(const at::Tensor &uids, at::Device device, bool train, int32_t default_mode,
                           double max_norm, const int64_t *counts, std::vector<int64_t> *admitted = nullptr);
  // The gradient of the rows of uids (grads [u, dim], uids distinct): kept as a pending gradient
  // until step_pending (accept_grad), or applied as one optimizer step (fused: at the end of the
  // backward pass, see FusedSum).
  // (distinct: uids are distinct, as one lookup's are.)
  void autograd_grad(const at::Tensor &uids, const at::Tensor &grads, bool fused, bool distinct);
  void accept_grad(const at::Tensor &uids, const at::Tensor &grads);
  // Keeps the rows a training lookup found for uids (PendingGrads: last), for their step.
  void keep_found(const at::Tensor &uids, const std::vector<int64_t> &rows, uint64_t remaps);
  void drop_pending();  // (grads_.mu held)
  // One optimizer step from the pending gradients (duplicates across passes summed), which are
  // then dropped; false (and nothing done) when there are none. On failure they are kept.
  bool step_pending();
  void zero_grad();
  // The pending gradients coalesced: ids ascending [m] and their summed gradients [m, dim].
  std::pair<at::Tensor, at::Tensor> pending();

  bool wait(int64_t id, int64_t timeout_us, at::Tensor *rows, at::Tensor *found);
  void discard(int64_t id);

  // ---- per-row metadata (metadata.cc.h)
  // Every row's id, last step and frequency: sorted by id, or in no particular order.
  void metadata(at::Tensor *ids, at::Tensor *last, at::Tensor *freq, bool sorted);

  // ---- checkpoints (checkpoint.cc.h)
  ct_table_config config();
  void save(int64_t chunk_rows, ct_table_sink sink, uintptr_t ctx);
  void import(int64_t n, const int64_t *ids, const float *rows, const float *s0, const float *s1,
              const int64_t *last, const int64_t *freq, const int64_t *stamp);
  void set_step(int64_t step);
  void swap_contents(Table &o);

  // ---- admission (admission.cc.h)
  void set_admission(int64_t k);
  std::pair<int64_t, int64_t> admission();
  void import_counts(int64_t n, const int64_t *ids, const int64_t *counts);

  // ---- compaction (compact.cc.h) and eviction (evict.cc.h)
  void compact();
  std::pair<at::Tensor, at::Tensor> evict(int32_t policy, int64_t param);
  // Removes k's present ids; with last and freq (one each per key), only those whose row's last
  // step and frequency still equal them (the first occurrence of a repeated id decides).
  std::pair<at::Tensor, at::Tensor> remove(const Keys &k, const Keys *last = nullptr, const Keys *freq = nullptr);

  // ---- deltas (delta.cc.h)
  struct Delta {
    Snapshot snap;
    at::Tensor meta, deleted;
    ct_table_delta_info info{};  // (its count pointers unset)
    at::Tensor count_ids, counts;
  };
  Delta delta(bool mark);
  // A delta from the table this one copies (see ct_table_apply_delta), all or nothing.
  void apply_delta(int64_t step, int64_t nd, const int64_t *deleted, int64_t n, const int64_t *ids,
                   const float *rows, const float *s0, const float *s1, const int64_t *last,
                   const int64_t *freq, const int64_t *stamp, const ct_table_delta_info *info);
  void set_delta_chain(uint64_t lineage, int64_t seq);

  // ---- the rest
  // The table's invariants (ct_table_check); throws arg_error naming the first one broken.
  void check();
#ifdef CT_TEST_HOOKS
  void test_break(int what);  // (check.cc.h)
#endif
  // The optimizer's learning rate from the next step on (lr.cc.h).
  void set_lr(double lr);

 private:
  // ---- storage
  int nslots() const { return 1 + nstates_; }
  int64_t slot_width(int s) const { return width_[s]; }
  // Where slot s of row r lives (raw CPU tables), from copies of the table's fields: a kernel
  // that copies rows with memcpy (which may write any object) holds one in a local, so the
  // fields are not loaded again for every row.
  struct SlotAddr {
    float *const *ptrs;  // the slot's array of block 0; block b's is b * narr further
    int shift;
    int64_t block_rows, narr, stride, off;
#if defined(__GNUC__)
    __attribute__((always_inline))
#endif
    float *operator()(int64_t r) const {
      // A shift and a mask for power-of-two block sizes (the default): a 64-bit division costs
      // tens of cycles and is not pipelined, which made it the bottleneck of gathers (~2x on
      // lookups).
      int64_t b, o;
      if (shift >= 0) {
        b = r >> shift;
        o = r & (block_rows - 1);
      } else {
        b = r / block_rows;
        o = r - b * block_rows;
      }
      return ptrs[narr == 1 ? b : b * narr] + o * stride + off;
    }
  };
  SlotAddr slot_addr(int s) const {
    return {ptr_.data() + arr_[s], block_shift_, block_rows_, narr_, stride_[s], off_[s]};
  }
  float *slot_ptr(int s, int64_t r) const { return slot_addr(s)(r); }
  int64_t capacity() const { return nblocks_ * block_rows_; }
  // Asks the CPU to bring slots [s0, s1) of row r into the cache (raw kernels): random rows of
  // a large table are memory-latency bound, and the hardware prefetchers do not follow rows.
  // Always inlined, as prefetch_lines is.
#if defined(__GNUC__)
  __attribute__((always_inline))
#endif
  void prefetch(int64_t r, int s0, int s1, bool write) const {
    for (int s = s0; s < s1; s++) prefetch_lines(slot_ptr(s, r), sizeof(float) * static_cast<size_t>(width_[s]), write);
  }
  void ensure_rows(int64_t need);
  // Refuses (arg_error) a capacity beyond kMaxCapacity or needing more than physical memory.
  void check_capacity(int64_t cap) const;
  // ensure_rows' two ways to reach `want` blocks: raw tables add block tensors (carved from
  // slabs once large), tensor-kernel tables one chunk; both grow the per-row state last.
  void add_blocks(int64_t want);
  void add_chunk(int64_t want);
  void grow_row_state(int64_t want);
  void free_storage();
  at::TensorOptions float_opts() const { return at::TensorOptions().dtype(at::kFloat).device(device_); }
  at::Tensor to_caller(const at::Tensor &t, const Keys &k) const {
    return t.device() == k.device ? t : t.to(k.device);
  }
  void check_open() const {
    if (closed_.load(std::memory_order_acquire)) throw closed_error("table \"" + name_ + "\" is closed");
  }

  // Grows the storage and inserts the ids absent from the map: rows[] gets every id's index
  // and is_new[] marks the ids this call inserted (their rows are written by init_rows, inside
  // guarded). Called with mu_ held exclusively. On failure nothing has changed.
  void insert_ids(const int64_t *ids, int64_t n, int64_t *rows, uint8_t *is_new);
  // The id map's find (rows[i]: the row of ids[i], or -1; returns how many were found), split
  // over at::parallel_for's threads for large batches: the map is only read, under either lock.
  size_t find_rows(const int64_t *ids, int64_t n, int64_t *rows) const;
  // insert_ids for distinct ids that are mostly present already (an update's, whose ids were
  // looked up first): a find, then insert_ids of the ids it missed. Same results; on ids that
  // are present a find costs about two thirds of a find-or-insert (which claims as it probes).
  void find_then_insert(const int64_t *ids, int64_t n, int64_t *rows, uint8_t *is_new);
  // insert_ids for the ids whose rows[i] a find left at -1 (the others keep theirs).
  void insert_missing(const int64_t *ids, int64_t n, int64_t *rows, uint8_t *is_new);
  // Runs f, the work after insert_ids; if it throws, the ids insert_ids added are removed.
  // Otherwise those ids stop being counted for admission: whatever gave them their rows (a
  // lookup's admission, a write, an import, Indices), an id has a row or a count, never both.
  template <class F>
  void guarded(const int64_t *ids, const uint8_t *is_new, int64_t n, F f) {
    try {
      f();
    } catch (...) {
      rollback(ids, is_new, n);
      throw;
    }
    for (int64_t i = 0; i < n && !adm_.seen.empty(); i++) {
      if (is_new[i] && adm_.seen.erase(ids[i]) != 0) adm_.count_changed(ids[i], meta_.tracked());
    }
  }
  void rollback(const int64_t *ids, const uint8_t *is_new, int64_t n);
  // Writes the initial values of the rows insert_ids created: the embedding (unless
  // skip_embedding), the optimizer states and the momentum stamps.
  void init_rows(const int64_t *ids, const int64_t *rows, const uint8_t *is_new, int64_t n,
                 bool skip_embedding) {
    if (raw_) {
      init_rows_raw(ids, rows, is_new, n, skip_embedding);
    } else {
      init_rows_tensor(ids, rows, is_new, n, skip_embedding);
    }
    init_meta(rows, is_new, n);
  }
  void init_rows_raw(const int64_t *ids, const int64_t *rows, const uint8_t *is_new, int64_t n,
                     bool skip_embedding);
  void init_rows_tensor(const int64_t *ids, const int64_t *rows, const uint8_t *is_new, int64_t n,
                        bool skip_embedding);
  // Sets the embedding of rows[i] to row src[i] of vals (src nullptr: row i); vals is on the
  // host for raw tables, on the storage device otherwise. With SGD momentum the buffer decays
  // to the current step (the weight is replaced, not moved). Called with mu_ held exclusively.
  void assign(const std::vector<int64_t> &rows, const at::Tensor &vals, const int64_t *src);

  // The current value of slot s of rows[0, n) (rows[i] >= 0) into out [n, width] on the storage
  // device, with SGD momentum brought up to date (without changing the table).
  void gather(const int64_t *rows, int64_t n, int s, at::Tensor &out) const;
  std::vector<std::pair<int64_t, int64_t>> rows_by_id() const;  // (id, row index), by id
  // gather's raw kernel without momentum catch-up: out [n, width_[s]] on the host.
  void gather_plain(const int64_t *rows, int64_t n, int s, float *out) const;
  at::Tensor gather_slot_tensor(const std::vector<int64_t> &rows, int s) const;
  void scatter_slot_tensor(const std::vector<int64_t> &rows, int s, const at::Tensor &src);
  RowPlan plan(const std::vector<int64_t> &rows) const;
  at::Tensor gather_slot_tensor(const RowPlan &p, int s) const;
  void scatter_slot_tensor(const RowPlan &p, int s, const at::Tensor &src);
  // Tensor kernels: the block count that ensure_rows grows to when `want` blocks are needed.
  int64_t chunk_growth(int64_t want) const;
  // Compaction of a tensor-kernel table: slot values of rows[0, m) into a new chunk of nb blocks
  // (rows m and above zero), which set_chunk then makes the table's only storage.
  std::vector<at::Tensor> gather_chunk(const std::vector<int64_t> &rows, int64_t nb) const;
  void set_chunk(std::vector<at::Tensor> one, int64_t nb);
  // Rows of rows[0, n) with defaults for rows[i] < 0 (ids[i] gives the initial value).
  void gather_rows(const int64_t *ids, const int64_t *rows, int64_t n, int32_t mode, at::Tensor &out) const;
  // Tensor-kernel momentum factors of rows: lr * S(k) and m^k as [n, 1] tensors.
  void momentum_factors(const std::vector<int64_t> &rows, int64_t now, at::Tensor *move,
                        at::Tensor *decay) const;
  // One optimizer step on the (unique) rows: raw kernels with g[i] the summed gradient of
  // rows[i] (dim floats on the host), or tensor kernels over g [u, dim]. safe: the step cannot
  // overflow (see update); otherwise each result is checked and an overflow rejected, the rows
  // put back (the tensor kernels check always). Both keep vmax_ a bound of what the table
  // holds (bounds: step_bound's bounds of the step, which a safe step of a rule that
  // tracks_bounds takes as they are).
  void step_raw(const StepConsts &c, const float *const *g, const int64_t *rows, int64_t u, bool safe,
                const double bounds[3]);
  void step_tensor(const StepConsts &c, const at::Tensor &g, const std::vector<int64_t> &rows);
  // Raises vmax_[s] to m (a magnitude; NaN counts as +Inf), or to the float whose bits are bits.
  void raise_max(int s, double m) {
    if (std::isnan(m)) m = std::numeric_limits<double>::infinity();
    if (m > vmax_[s]) vmax_[s] = m;
  }
  void note_max(int s, int32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    raise_max(s, f);
  }

  const std::string name_;
  // Distinct for every table of the process (ct_table_serial): it tells a table closed from
  // another opened under its name, for callers that find tables by name.
  const uint64_t serial_ = [] {
    static std::atomic<uint64_t> next{0};
    return ++next;
  }();
  const int64_t dim_;
  const int64_t block_rows_;
  int block_shift_ = -1;  // log2(block_rows_) if a power of two, else -1
  const at::Device device_;
  const bool raw_;  // raw CPU kernels (else tensor kernels)
  Init init_;
  Optim opt_;
  int nstates_ = 0;
  int narr_ = 1;  // block arrays per block: 1 (interleaved) or nslots (separate)
  int64_t width_[3] = {0, 0, 0}, arr_[3] = {0, 0, 0}, stride_[3] = {0, 0, 0}, off_[3] = {0, 0, 0};
  float sinit_[3] = {0, 0, 0};
  std::vector<int64_t> arr_width_;

  mutable std::shared_mutex mu_;
  std::atomic<bool> closed_{false};
  bool freed_ = false;
  ct_idmap *map_ = nullptr;
  // Bumped (mu_ held exclusively) by everything that may take an id's row away or give it
  // another: erase, clear, load (swap_contents), compaction. Inserts never do (rows never move),
  // nor does a rollback (it removes only ids its own call inserted, which no find made outside
  // the lock saw), so rows found under the shared lock stay valid while it is unchanged
  // (lookup's insert path).
  uint64_t remaps_ = 0;
  std::vector<at::Tensor> blocks_;  // raw tables: blocks_[b * narr_ + a]: [block_rows, arr_width_[a]]
  std::shared_ptr<Mapping> slab_[3];  // CPU tables: the slab of array a that new blocks come from
  size_t slab_used_[3] = {0, 0, 0};   // bytes of it handed out
  std::vector<float *> ptr_;        // their data pointers (CPU tables)
  // Tensor-kernel tables (CUDA, or CPU with CT_TABLE_TENSOR_KERNELS) have no block tensors: each
  // growth allocates one tensor per array, a chunk, holding its new blocks, so that a batch
  // costs kernel launches per chunk it touches rather than per block (see chunk_growth).
  std::vector<at::Tensor> chunks_;    // chunks_[c * narr_ + a]: [rows of chunk c, arr_width_[a]]
  std::vector<int64_t> chunk_row0_;   // the first row of chunk c
  std::vector<int32_t> block_chunk_;  // the chunk of block b
  std::vector<int64_t> stamp_;      // SGD momentum: the step each row is up to date with
  int64_t nblocks_ = 0;
  int64_t step_ = 0;
  // Per slot (the row, state 0, state 1), an upper bound on the magnitude of every value stored
  // (the initializer's bound and the initial states to start with; raised by every update,
  // write, import and catch-up): with the largest gradient of a batch it tells whether the
  // batch's step can overflow at all (Optim::step_bound), and only then does update check it.
  double vmax_[3] = {0, 0, 0};

  // ---- per-concern state
  ct_table_config cfg_{};
  // per row: last step and frequency (CT_TABLE_TRACK_ACCESS), delta epoch (meta.h)
  RowMeta meta_{block_rows_, (cfg_.flags & CT_TABLE_TRACK_ACCESS) != 0};
  Admission adm_;    // admission (admission.cc.h)
  DeltaLog deltas_;  // deltas: deletions since the mark, the chain (delta.cc.h)

  // ---- lookups and gathers (ops.cc.h, gather.cc.h)
  // The insert path of a training lookup (mu_ held exclusively): inserts k's absent ids (with
  // found, only those rows[] marks -1: rows[] holds a still valid find), initialises the new
  // rows, gathers every row into out, then runs then(); if anything throws, the ids this
  // call inserted are removed. rows[] ends with every id's row (-1: not admitted).
  template <class F>
  void lookup_inserting(const Keys &k, std::vector<int64_t> &rows, bool found, at::Tensor &out, F then);
  // Slot s of rows (rows[i] >= 0) to and from host memory [n, width]: saves, imports, deltas.
  void read_raw(const std::vector<int64_t> &rows, int s, float *out) const;
  void write_raw(const std::vector<int64_t> &rows, int s, const float *src);
  // SGD momentum: rows brought up to a step, in place (raw) or gathered (tensor kernels);
  // catch_up_all: every row up to the current step (see set_lr).
  void catch_up_raw(int64_t r, int64_t now, float *w, float *buf) const;
  void catch_up_tensor(const std::vector<int64_t> &rows, int64_t now, at::Tensor &w, at::Tensor &buf) const;
  void catch_up_all();

  // ---- per-row metadata (metadata.cc.h)
  // New rows: last step now, frequency 0, changed in this epoch.
  void init_meta(const int64_t *rows, const uint8_t *is_new, int64_t n);
  // Training accesses of rows, counts[i] times each (nullptr: once; shared lock: relaxed atomic
  // stores, increments may be lost).
  void touch(const int64_t *rows, int64_t n, int64_t step, const int64_t *counts = nullptr) {
    meta_.touch(rows, n, step, counts);
  }
  // The metadata a save or delta carries for row r: last step, frequency, momentum stamp.
  void saved_meta(int64_t r, int64_t *last, int64_t *freq, int64_t *stamp) const;
  // Throws unless the table keeps last steps and frequencies (what needs them: `what`).
  void need_access(const char *what) const;
  void modified(const int64_t *rows, int64_t n);
  // Every change of step_ goes through here (mu_ held exclusively): the metadata's base follows.
  void set_step_locked(int64_t step) {
    meta_.advance(step);
    step_ = step;
  }

  // ---- checkpoints (checkpoint.cc.h)
  // What a table may hold (check_values: finite rows and states, the states a rule keeps >= 0
  // non-negative): fail(why) on the first violation. Imports and saves check every chunk.
  template <class F>
  void check_values(int64_t n, const float *rows, const float *const st[2], F fail) const;
  // import and apply_delta: their checks before the lock (sizes, pointers, check_values,
  // metadata >= 0, distinct ids); then, locked, the rows inserted or overwritten (nothing stays
  // inserted if that throws; r: the rows) and the metadata written (cannot fail).
  void check_import(int64_t n, const int64_t *ids, const float *rows, const float *const st[2],
                    const int64_t *last, const int64_t *freq, const int64_t *stamp) const;
  std::vector<int64_t> write_rows(int64_t n, const int64_t *ids, const float *rows, const float *const st[2]);
  void write_meta(const std::vector<int64_t> &r, const int64_t *last, const int64_t *freq,
                  const int64_t *stamp);

  // ---- admission (admission.cc.h)
  // Admission on: a training lookup of k (mu_ held exclusively); rows[] gets -1 for ids not
  // admitted, whose rows in the result are zeros. found: rows[] holds a find of k's ids that is
  // still valid (see remaps_); else they are looked up here.
  void lookup_admitting(const Keys &k, std::vector<int64_t> &rows, bool found, at::Tensor &out);
  // Admission on: keeps the ids (and their gradient rows) present in the table; rows gets
  // theirs.
  void drop_unadmitted(std::vector<int64_t> &uids, at::Tensor &g, std::vector<const float *> &gptr,
                       std::vector<int64_t> &rows);

  // ---- compaction (compact.cc.h) and eviction (evict.cc.h)
  // Compaction (mu_ held exclusively); shrink_map: rebuild the id map at the size its ids need
  // whenever that is smaller.
  void compact_locked(bool shrink_map);
  // An eviction's choice (see evict): the rows it takes and the rule that checks them again.
  struct EvictPlan {
    std::vector<std::pair<int64_t, int64_t>> victims;  // (id, index), by id
    uint64_t cut = 0;     // keep-N: a victim's rank is at most this
    uint64_t remaps = 0;  // remaps_ and the metadata's base when chosen
    int64_t base = 0;
  };
  // Chooses the rows policy(param) evicts (mu_ held, shared or exclusive).
  EvictPlan plan_eviction(int32_t policy, int64_t param) const;
  // Keep-N eviction's victims: every row but the keep first by rank; *cut gets the keep-th
  // rank (mu_ held).
  std::vector<std::pair<int64_t, int64_t>> keep_n_victims(int64_t keep, bool lfu, uint64_t *cut) const;
  // The ids and current rows of rows[] (ids on the table's device), which are then erased.
  std::pair<at::Tensor, at::Tensor> take(const std::vector<int64_t> &ids, const std::vector<int64_t> &rows);

  // ---- deltas (delta.cc.h)
  // Removes ids (present or not) from the map, logging them for deltas; returns how many.
  int64_t erase_ids(const int64_t *ids, int64_t n);
  // erase_ids in two parts: reserve_erase makes every allocation the erase of n ids needs
  // (freed: its scratch), after which erase_reserved cannot fail.
  void reserve_erase(int64_t n, std::vector<int64_t> &freed);
  int64_t erase_reserved(const int64_t *ids, int64_t n, std::vector<int64_t> &freed);
  // apply_delta's part for info: checks (the chain, the parameters, the counts against the
  // delta's rows and deletions) before anything changes, then sets.
  void check_delta_info(const ct_table_delta_info &info, int64_t n, const int64_t *ids,
                        const std::vector<int64_t> &del) const;
  void set_delta_info(const ct_table_delta_info &info);

  // ---- invariants (check.cc.h)
  // check()'s pass over the rows' values.
  void check_values(const std::vector<int64_t> &rows) const;

  PendingGrads grads_;       // (gradients.cc.h)
  Prefetches prefetches_;    // (prefetch.cc.h)
};

}  // namespace table
}  // namespace ct
