// table.hxx: dynamic hash embedding tables (the RecIS design) behind the C ABI's ct_table_*.
//
// Structure
//   - An id map (idmap.c) turns raw int64 ids into contiguous row indices 0, 1, 2, ... and
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
//     without insert, export, stats. Exclusive: lookups that insert, indices with insert, write,
//     update, delete, clear, close. Every operation checks `closed_` after taking the lock.
//   - close sets `closed_` and then takes `mu_` exclusively: it waits for the operations in
//     flight, and every operation that takes the lock afterwards fails with "closed: ". The
//     table object is reference counted (std::shared_ptr): handles, the registry and queued
//     prefetches keep it alive, so a closed table is never freed under a caller.
//   - `prefetch_mu_` guards the table's pending prefetches (never held while taking `mu_`).
//   - The registry's mutex guards the name -> table map; it is never held while taking a
//     table's lock.
//   - Prefetches run on a process-wide pool of two worker threads.
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
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
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "idmap.h"
#include "table_internal.h"
#include "table_lanes.h"
#include "table_meta.h"

namespace ct {
namespace table {

namespace {

constexpr int64_t kDefaultBlockRows = 4096;
// On a GPU a batch costs kernels per chunk it touches (index_select, index_copy_), and a table
// grown from nothing has about log2(rows / block_rows) chunks: bigger blocks, fewer chunks.
constexpr int64_t kDefaultCudaBlockRows = 65536;
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxBlockRows = int64_t{1} << 24;
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
// Runs body(begin, end) over rows [0, n): in this thread for small batches, else in chunks of
// at::parallel_for of about 32K floats of work each (width: floats touched per row).
template <class F>
void for_rows(int64_t n, int64_t width, const F &body) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(width, 1));
  if (n < grain) {
    body(int64_t{0}, n);
  } else {
    at::parallel_for(0, n, grain, body);
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
  const int64_t *ptr() const { return host.data_ptr<int64_t>(); }
};

Keys check_keys(ct_tensor h) {
  const at::Tensor &k = get(h);
  if (k.scalar_type() != at::kLong) {
    throw arg_error(std::string("keys must be int64, got ") + c10::toString(k.scalar_type()));
  }
  if (k.dim() != 1) throw arg_error("keys must be one-dimensional, got " + std::to_string(k.dim()) + " dimensions");
  if (!k.is_contiguous()) throw arg_error("keys must be contiguous");
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

void check_finite(const float *p, int64_t n, const char *what) {
  if (!all_finite(p, n)) throw arg_error(std::string(what) + " contain NaN or Inf: the batch is rejected");
}

void check_finite(const at::Tensor &v, const char *what) {
  if (v.device().is_cpu()) return check_finite(v.data_ptr<float>(), v.numel(), what);
  if (!at::isfinite(v).all().item<bool>()) {
    throw arg_error(std::string(what) + " contain NaN or Inf: the batch is rejected");
  }
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

void check_mode(int32_t mode) {
  if (mode != CT_READ_ZEROS && mode != CT_READ_INITIAL) {
    throw arg_error("unknown read default " + std::to_string(mode));
  }
}

// ---- the prefetch worker pool ---------------------------------------------------------------

class Pool {
 public:
  static Pool &get() {
    static Pool *p = new Pool();  // never destroyed: its threads outlive static destructors
    // At exit (this static is destroyed before libtorch's, which were built earlier), let the
    // tasks in flight finish, so that no worker touches libtorch while it is being torn down.
    static struct Drain {
      Pool *p;
      ~Drain() { p->drain(std::chrono::seconds(10)); }
    } drain{p};
    return *p;
  }
  // Waits until no task is queued or running (at most timeout).
  void drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    idle_.wait_for(l, timeout, [this] { return q_.empty() && running_ == 0; });
  }
  void submit(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push_back(std::move(f));
      if (started_ < kThreads) {
        std::thread([this] { run(); }).detach();
        started_++;
      }
    }
    cv_.notify_one();
  }

 private:
  static constexpr int kThreads = 2;
  void run() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return !q_.empty(); });
        f = std::move(q_.front());
        q_.pop_front();
        running_++;
      }
      f();  // never throws: tasks catch everything
      f = nullptr;
      {
        std::lock_guard<std::mutex> l(mu_);
        running_--;
      }
      idle_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> q_;
  int started_ = 0;
  int running_ = 0;
};

}  // namespace

struct Prefetch {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool claimed = false;  // a waiter is waiting (guarded by the table's prefetch_mu_)
  at::Tensor rows, found;
  std::string error;
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

  at::Tensor lookup(const Keys &k);
  at::Tensor indices(const Keys &k, bool insert);
  std::pair<at::Tensor, at::Tensor> read(const Keys &k, int32_t mode);
  void write(const Keys &k, const at::Tensor &values);
  void update(const Keys &k, const at::Tensor &grads);
  int64_t erase(const Keys &k);
  void clear();
  ct_table_stats stats();
  Snapshot snapshot();
  void close();

  int64_t prefetch(const Keys &k, int32_t mode);

  // ---- autograd (see table_rows and the functions after it)
  int64_t dim() const { return dim_; }
  int32_t num_states() const { return nstates_; }  // fixed at creation (swap requires equal)
  bool has_optimizer() const { return opt_.kind != CT_OPT_NONE; }
  // lookup, then the rows whose norm exceeds max_norm are renormalised in the table.
  at::Tensor lookup_renorm(const Keys &k, double max_norm);
  void accept_grad(const at::Tensor &uids, const at::Tensor &grads);
  bool step_pending();
  void zero_grad();
  std::pair<at::Tensor, at::Tensor> pending();

  bool wait(int64_t id, int64_t timeout_us, at::Tensor *rows, at::Tensor *found);
  void discard(int64_t id);

  // ---- lifecycle (table_lifecycle.hxx): checkpoints, metadata, eviction, admission, deltas
  ct_table_config config();
  void save(int64_t chunk_rows, ct_table_sink sink, uintptr_t ctx);
  void import(int64_t n, const int64_t *ids, const float *rows, const float *s0, const float *s1,
              const int64_t *last, const int64_t *freq, const int64_t *stamp);
  void set_step(int64_t step);
  void swap_contents(Table &o);
  void set_admission(int64_t k);
  std::pair<int64_t, int64_t> admission();
  void import_counts(int64_t n, const int64_t *ids, const int64_t *counts);
  void metadata(at::Tensor *ids, at::Tensor *last, at::Tensor *freq);
  std::pair<at::Tensor, at::Tensor> evict(int32_t policy, int64_t param);
  std::pair<at::Tensor, at::Tensor> remove(const Keys &k);
  void compact();
  struct Delta {
    Snapshot snap;
    at::Tensor meta, deleted;
  };
  Delta delta(bool mark);

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
  // Runs f, the work after insert_ids; if it throws, the ids insert_ids added are removed.
  template <class F>
  void guarded(const int64_t *ids, const uint8_t *is_new, int64_t n, F f) {
    try {
      f();
    } catch (...) {
      rollback(ids, is_new, n);
      throw;
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
  at::Tensor gather_rows(const int64_t *ids, const int64_t *rows, int64_t n, int32_t mode) const;
  // Tensor-kernel momentum factors of rows: lr * S(k) and m^k as [n, 1] tensors.
  void momentum_factors(const std::vector<int64_t> &rows, int64_t now, at::Tensor *move,
                        at::Tensor *decay) const;
  // One optimizer step on the (unique) rows: raw kernels with g[i] the summed gradient of
  // rows[i] (dim floats on the host), or tensor kernels over g [u, dim].
  void step_raw(const StepConsts &c, const float *const *g, const int64_t *rows, int64_t u);
  void step_tensor(const StepConsts &c, const at::Tensor &g, const std::vector<int64_t> &rows);

  const std::string name_;
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

  // ---- lifecycle state (table_lifecycle.hxx)
  ct_table_config cfg_{};
  // per row: last step and frequency (CT_TABLE_TRACK_ACCESS), delta epoch (table_meta.h)
  RowMeta meta_{block_rows_, (cfg_.flags & CT_TABLE_TRACK_ACCESS) != 0};
  std::vector<int64_t> deleted_;   // ids deleted since the last mark (logged from the first on)
  int64_t admit_after_ = 0;
  std::unordered_map<int64_t, int64_t> seen_;  // admission counts of absent ids
  // New rows: last step now, frequency 0, changed in this epoch.
  void init_meta(const int64_t *rows, const uint8_t *is_new, int64_t n);
  // Training accesses of rows (shared lock: relaxed atomic stores, increments may be lost).
  void touch(const int64_t *rows, int64_t n, int64_t step) { meta_.touch(rows, n, step); }
  // The metadata a save or delta carries for row r: last step, frequency, momentum stamp.
  void saved_meta(int64_t r, int64_t *last, int64_t *freq, int64_t *stamp) const;
  // Throws unless the table keeps last steps and frequencies (what needs them: `what`).
  void need_access(const char *what) const;
  // Every change of step_ goes through here (mu_ held exclusively): the metadata's base follows.
  void set_step_locked(int64_t step) {
    meta_.advance(step);
    step_ = step;
  }
  void modified(const int64_t *rows, int64_t n);
  // Removes ids (present or not) from the map, logging them for deltas; returns how many.
  int64_t erase_ids(const int64_t *ids, int64_t n);
  // Admission on: a training lookup of k (mu_ held exclusively); rows[] gets -1 for ids not
  // admitted, whose rows in the result are zeros. found: rows[] holds a find of k's ids that is
  // still valid (see remaps_); else they are looked up here.
  at::Tensor lookup_admitting(const Keys &k, std::vector<int64_t> &rows, bool found);
  // The insert path of a training lookup (mu_ held exclusively): inserts k's absent ids (with
  // found, only those rows[] marks -1: rows[] holds a still valid find), initialises the new
  // rows, gathers every row into out, then runs then(); if anything throws, the ids this
  // call inserted are removed. rows[] ends with every id's row (-1: not admitted).
  template <class F>
  void lookup_inserting(const Keys &k, std::vector<int64_t> &rows, bool found, at::Tensor &out, F then);
  // Admission on: keeps the ids (and their gradient rows) present in the table; rows gets
  // theirs.
  void drop_unadmitted(std::vector<int64_t> &uids, at::Tensor &g, std::vector<const float *> &gptr,
                       std::vector<int64_t> &rows);
  void read_raw(const std::vector<int64_t> &rows, int s, float *out) const;
  void write_raw(const std::vector<int64_t> &rows, int s, const float *src);
  // The ids and current rows of rows[] (ids on the table's device), which are then erased.
  std::pair<at::Tensor, at::Tensor> take(const std::vector<int64_t> &ids, const std::vector<int64_t> &rows);

  // Pending gradients of the autograd path (accept_grad .. step_pending): chunks of distinct
  // ids (int64, CPU) and their gradients (on the storage device). has_pending_ also covers an
  // empty batch (a step with no rows still counts, as with update). grad_mu_ is taken before
  // mu_, never while holding it.
  std::mutex grad_mu_;
  std::vector<at::Tensor> pending_ids_, pending_grads_;
  bool has_pending_ = false;

  std::mutex prefetch_mu_;
  std::unordered_map<int64_t, std::shared_ptr<Prefetch>> pending_;
  int64_t next_prefetch_ = 1;
  int64_t tasks_ = 0;  // prefetch tasks queued or running (close waits for them)
  std::condition_variable tasks_cv_;
};

// ---- construction ---------------------------------------------------------------------------

namespace {
at::Device table_device(const ct_table_config &cfg) {
  at::Device d = to_device(cfg.device);
  if (d.is_cuda() && !at::hasCUDA()) throw arg_error("CUDA is not available to this libtorch");
  return d;
}
}  // namespace

Table::Table(std::string name, const ct_table_config &cfg)
    : name_(std::move(name)),
      dim_(cfg.dim),
      block_rows_(cfg.block_rows != 0 ? cfg.block_rows
                  : cfg.device.type == CT_CUDA ? kDefaultCudaBlockRows
                                               : kDefaultBlockRows),
      device_(table_device(cfg)),
      raw_(device_.is_cpu() && (cfg.flags & CT_TABLE_TENSOR_KERNELS) == 0),
      cfg_(cfg) {
  if (dim_ <= 0 || dim_ > kMaxDim) throw arg_error("dim must be in [1, 2^20], got " + std::to_string(dim_));
  if (block_rows_ <= 0 || block_rows_ > kMaxBlockRows) {
    throw arg_error("block_rows must be in [1, 2^24], got " + std::to_string(cfg.block_rows));
  }
  if (cfg.capacity < 0) throw arg_error("capacity must be >= 0");
  if ((block_rows_ & (block_rows_ - 1)) == 0) block_shift_ = __builtin_ctzll(static_cast<uint64_t>(block_rows_));
  if (cfg.layout != CT_LAYOUT_INTERLEAVED && cfg.layout != CT_LAYOUT_SEPARATE) {
    throw arg_error("unknown layout " + std::to_string(cfg.layout));
  }
  if ((cfg.flags & ~(CT_TABLE_TENSOR_KERNELS | CT_TABLE_TRACK_ACCESS)) != 0) throw arg_error("unknown flags");
  init_.kind = cfg.initializer;
  std::copy(cfg.init_params, cfg.init_params + 4, init_.p);
  init_.seed = cfg.seed;
  init_.dim = dim_;
  init_.validate();
  opt_.kind = cfg.optimizer;
  std::copy(cfg.opt_params, cfg.opt_params + 8, opt_.p);
  opt_.dim = dim_;
  opt_.validate();

  nstates_ = opt_.num_states();
  width_[0] = dim_;
  for (int s = 0; s < nstates_; s++) {
    StateSpec st = opt_.state(s);
    width_[s + 1] = st.per_element ? dim_ : 1;
    sinit_[s + 1] = st.init;
  }
  if (cfg.layout == CT_LAYOUT_INTERLEAVED) {
    narr_ = 1;
    int64_t off = 0;
    for (int s = 0; s < nslots(); s++) {
      arr_[s] = 0;
      off_[s] = off;
      off += width_[s];
    }
    for (int s = 0; s < nslots(); s++) stride_[s] = off;
    arr_width_ = {off};
  } else {
    narr_ = nslots();
    for (int s = 0; s < nslots(); s++) {
      arr_[s] = s;
      off_[s] = 0;
      stride_[s] = width_[s];
      arr_width_.push_back(width_[s]);
    }
  }

  const int64_t cap = cfg.capacity;
  map_ = ct_idmap_new(static_cast<size_t>(cap));
  if (map_ == nullptr) throw std::bad_alloc();
  try {
    ensure_rows(cap);
  } catch (...) {
    ct_idmap_free(map_);
    throw;
  }
}

Table::~Table() { ct_idmap_free(map_); }

// Tensor-kernel tables grow at least by the capacity they have (so a table of n blocks grown
// from nothing has about log2(n) chunks, and a table given its capacity up front has one), by
// at most kChunkGrowMax bytes beyond what is asked for: a doubling of a large GPU table could
// otherwise fail for want of memory the rows themselves do not need.
int64_t Table::chunk_growth(int64_t want) const {
  int64_t row_bytes = 0;
  for (int64_t w : arr_width_) row_bytes += w * static_cast<int64_t>(sizeof(float));
  const int64_t max_extra = std::max<int64_t>(1, static_cast<int64_t>(kChunkGrowMax) / (row_bytes * block_rows_));
  return std::max(want, nblocks_ + std::min(nblocks_, max_extra));
}

void Table::ensure_rows(int64_t need) {
  if (need <= capacity()) return;
  const int64_t want = (need + block_rows_ - 1) / block_rows_;
  if (raw_) {
    add_blocks(want);
  } else {
    add_chunk(chunk_growth(want));
  }
}

// Momentum stamps and metadata for `want` blocks. If this throws, the vectors may be longer
// than the rows, which nothing relies on.
void Table::grow_row_state(int64_t want) {
  if (opt_.has_momentum()) stamp_.resize(static_cast<size_t>(want * block_rows_), 0);
  meta_.grow(want);
}

// Raw kernels: blocks of their own while small, then carved out of slabs.
void Table::add_blocks(int64_t want) {
  const size_t total = static_cast<size_t>(want * narr_);
  std::shared_ptr<Mapping> slab_next[3];
  size_t used_next[3] = {0, 0, 0};
  std::vector<at::Tensor> fresh(total - blocks_.size());
  for (int a = 0; a < narr_; a++) {
    const size_t bb = static_cast<size_t>(block_rows_ * arr_width_[a]) * sizeof(float);
    std::shared_ptr<Mapping> slab = slab_[a];
    size_t used = slab_used_[a];
    for (int64_t b = nblocks_; b < want; b++) {
      const size_t k = static_cast<size_t>((b - nblocks_) * narr_ + a);
      if (static_cast<size_t>(want) * bb < kSlabMin) {
        fresh[k] = at::zeros({block_rows_, arr_width_[a]}, float_opts());
        continue;
      }
      if (slab == nullptr || slab->bytes - used < bb) {
        // A new slab: room for the blocks still wanted, and for growth (a quarter of what the
        // array holds), within [kSlabMin, kSlabMax] unless one block is larger.
        const size_t held = static_cast<size_t>(b) * bb, still = static_cast<size_t>(want - b) * bb;
        size_t bytes = std::max(still, std::min(std::max(held / 4, kSlabMin), kSlabMax));
        bytes = std::max(bytes, bb);
        bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
        slab = map_slab(bytes);
        used = 0;
      }
      std::shared_ptr<Mapping> keep = slab;
      fresh[k] = at::from_blob(static_cast<char *>(slab->p) + used, {block_rows_, arr_width_[a]},
                               [keep](void *) {}, float_opts());
      used += (bb + 63) / 64 * 64;
    }
    slab_next[a] = slab;
    used_next[a] = used;
  }
  blocks_.reserve(total);
  ptr_.reserve(total);
  grow_row_state(want);
  // nothing below throws
  for (int a = 0; a < narr_; a++) {
    slab_[a] = std::move(slab_next[a]);
    slab_used_[a] = used_next[a];
  }
  for (auto &t : fresh) {
    ptr_.push_back(t.data_ptr<float>());
    blocks_.push_back(std::move(t));
  }
  nblocks_ = want;
}

// Tensor kernels: one chunk per array holds all the new blocks.
void Table::add_chunk(int64_t want) {
  std::vector<at::Tensor> chunk;
  for (int a = 0; a < narr_; a++) {
    chunk.push_back(at::zeros({(want - nblocks_) * block_rows_, arr_width_[a]}, float_opts()));
  }
  chunks_.reserve(chunks_.size() + chunk.size());
  chunk_row0_.reserve(chunk_row0_.size() + 1);
  block_chunk_.reserve(static_cast<size_t>(want));
  grow_row_state(want);
  // nothing below throws
  block_chunk_.resize(static_cast<size_t>(want), static_cast<int32_t>(chunk_row0_.size()));
  chunk_row0_.push_back(nblocks_ * block_rows_);
  for (auto &c : chunk) chunks_.push_back(std::move(c));
  nblocks_ = want;
}

void Table::free_storage() {
  if (freed_) return;
  freed_ = true;
  std::vector<at::Tensor>().swap(blocks_);
  std::vector<at::Tensor>().swap(chunks_);
  std::vector<int64_t>().swap(chunk_row0_);
  std::vector<int32_t>().swap(block_chunk_);
  std::vector<float *>().swap(ptr_);
  std::vector<int64_t>().swap(stamp_);
  for (auto &sl : slab_) sl.reset();
  meta_.truncate(0);
  std::vector<int64_t>().swap(deleted_);
  std::unordered_map<int64_t, int64_t>().swap(seen_);
  nblocks_ = 0;
  ct_idmap_free(map_);
  map_ = nullptr;
}

// ---- inserting ------------------------------------------------------------------------------

void Table::insert_ids(const int64_t *ids, int64_t n, int64_t *rows, uint8_t *is_new) {
  if (n == 0) return;
  const int64_t hw = ct_idmap_high_water(map_);
  if (n > std::numeric_limits<int64_t>::max() - hw) throw arg_error("too many ids");
  ensure_rows(hw + n);
  if (ct_idmap_find_or_insert(map_, ids, static_cast<size_t>(n), rows, is_new) < 0) {
    throw std::bad_alloc();
  }
}

void Table::rollback(const int64_t *ids, const uint8_t *is_new, int64_t n) {
  std::vector<int64_t> fresh;
  for (int64_t i = 0; i < n; i++) {
    if (is_new[i]) fresh.push_back(ids[i]);
  }
  // If even this fails (out of memory), the ids stay with initialised or stale rows.
  ct_idmap_erase(map_, fresh.data(), fresh.size(), nullptr);
}

void Table::init_rows_raw(const int64_t *ids, const int64_t *rows, const uint8_t *is_new,
                          int64_t n, bool skip_embedding) {
  const int64_t now = step_;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) {
      if (!is_new[i]) continue;
      const int64_t r = rows[i];
      if (!skip_embedding) init_.row(ids[i], slot_ptr(0, r));
      for (int s = 1; s < nslots(); s++) std::fill_n(slot_ptr(s, r), width_[s], sinit_[s]);
      if (!stamp_.empty()) stamp_[static_cast<size_t>(r)] = now;
    }
  };
  for_rows(n, dim_ * 4, body);
}

void Table::init_rows_tensor(const int64_t *ids, const int64_t *rows, const uint8_t *is_new,
                             int64_t n, bool skip_embedding) {
  std::vector<int64_t> fresh_rows, fresh_ids;
  for (int64_t i = 0; i < n; i++) {
    if (is_new[i]) {
      fresh_rows.push_back(rows[i]);
      fresh_ids.push_back(ids[i]);
    }
  }
  const int64_t m = static_cast<int64_t>(fresh_rows.size());
  if (m == 0) return;
  const RowPlan p = plan(fresh_rows);
  if (!skip_embedding) {
    auto host = staging({m, dim_}, at::kFloat, device_);
    float *v = host.data_ptr<float>();
    for (int64_t i = 0; i < m; i++) init_.row(fresh_ids[static_cast<size_t>(i)], v + i * dim_);
    scatter_slot_tensor(p, 0, upload(host, device_));
  }
  for (int s = 1; s < nslots(); s++) {
    scatter_slot_tensor(p, s, at::full({m, width_[s]}, sinit_[s], float_opts()));
  }
  for (int64_t r : fresh_rows) {
    if (!stamp_.empty()) stamp_[static_cast<size_t>(r)] = step_;
  }
}

// ---- gathering and scattering (tensor kernels) --------------------------------------------

namespace {
at::Tensor index_tensor(const std::vector<int64_t> &v, at::Device d) {
  auto t = staging({static_cast<int64_t>(v.size())}, at::kLong, d);
  if (!v.empty()) std::memcpy(t.data_ptr<int64_t>(), v.data(), v.size() * sizeof(int64_t));
  return upload(t, d);
}
}  // namespace

// Rows in one chunk (the usual case: a table given its capacity has one) keep the batch order;
// otherwise a counting sort by chunk, which keeps the batch order within each chunk.
RowPlan Table::plan(const std::vector<int64_t> &rows) const {
  const size_t n = rows.size();
  std::vector<int32_t> ch(n);
  bool mixed = false;
  for (size_t i = 0; i < n; i++) {
    const int64_t b = block_shift_ >= 0 ? rows[i] >> block_shift_ : rows[i] / block_rows_;
    ch[i] = block_chunk_[static_cast<size_t>(b)];
    mixed |= ch[i] != ch[0];
  }
  RowPlan p;
  p.n = static_cast<int64_t>(n);
  auto host = staging({mixed ? 2 : 1, p.n}, at::kLong, device_);
  int64_t *off = host.data_ptr<int64_t>(), *pos = mixed ? off + n : nullptr;
  if (!mixed) {
    if (n > 0) {
      p.chunks.push_back(ch[0]);
      p.begin.push_back(0);
    }
    for (size_t i = 0; i < n; i++) off[i] = rows[i] - chunk_row0_[static_cast<size_t>(ch[0])];
  } else {
    std::vector<int64_t> next(chunk_row0_.size() + 1, 0);  // counts, then where each chunk's rows go
    for (size_t i = 0; i < n; i++) next[static_cast<size_t>(ch[i]) + 1]++;
    for (size_t c = 0; c + 1 < next.size(); c++) {
      if (next[c + 1] > 0) {
        p.chunks.push_back(static_cast<int64_t>(c));
        p.begin.push_back(next[c]);
      }
      next[c + 1] += next[c];
    }
    for (size_t i = 0; i < n; i++) {
      const int64_t j = next[static_cast<size_t>(ch[i])]++;
      pos[j] = static_cast<int64_t>(i);
      off[j] = rows[i] - chunk_row0_[static_cast<size_t>(ch[i])];
    }
  }
  p.begin.push_back(p.n);
  auto dev = upload(host, device_);
  p.off = dev[0];
  if (mixed) p.pos = dev[1];
  return p;
}

at::Tensor Table::gather_slot_tensor(const std::vector<int64_t> &rows, int s) const {
  return gather_slot_tensor(plan(rows), s);
}

void Table::scatter_slot_tensor(const std::vector<int64_t> &rows, int s, const at::Tensor &src) {
  scatter_slot_tensor(plan(rows), s, src);
}

at::Tensor Table::gather_slot_tensor(const RowPlan &p, int s) const {
  auto slot = [&](size_t k) {
    return chunks_[static_cast<size_t>(p.chunks[k] * narr_ + arr_[s])].narrow(1, off_[s], width_[s]);
  };
  if (p.one_chunk()) return slot(0).index_select(0, p.off);
  auto out = at::empty({p.n, width_[s]}, float_opts());
  for (size_t k = 0; k < p.chunks.size(); k++) {
    const int64_t b0 = p.begin[k], m = p.begin[k + 1] - b0;
    out.index_copy_(0, p.pos.narrow(0, b0, m), slot(k).index_select(0, p.off.narrow(0, b0, m)));
  }
  return out;
}

void Table::scatter_slot_tensor(const RowPlan &p, int s, const at::Tensor &src) {
  for (size_t k = 0; k < p.chunks.size(); k++) {
    auto view = chunks_[static_cast<size_t>(p.chunks[k] * narr_ + arr_[s])].narrow(1, off_[s], width_[s]);
    const int64_t b0 = p.begin[k], m = p.begin[k + 1] - b0;
    auto part = p.one_chunk() ? src : src.index_select(0, p.pos.narrow(0, b0, m));
    view.index_copy_(0, p.off.narrow(0, b0, m), part);
  }
}

void Table::momentum_factors(const std::vector<int64_t> &rows, int64_t now, at::Tensor *move,
                             at::Tensor *decay) const {
  const int64_t n = static_cast<int64_t>(rows.size());
  auto mv = staging({n, 1}, at::kFloat, device_), dc = staging({n, 1}, at::kFloat, device_);
  float *pm = mv.data_ptr<float>(), *pd = dc.data_ptr<float>();
  for (int64_t i = 0; i < n; i++) {
    double S = 0, d = 1;
    const int64_t k = now - stamp_[static_cast<size_t>(rows[static_cast<size_t>(i)])];
    if (k > 0) opt_.catch_up_factors(k, &S, &d);
    pm[i] = static_cast<float>(opt_.p[0] * S);
    pd[i] = static_cast<float>(d);
  }
  *move = upload(mv, device_);
  *decay = upload(dc, device_);
}

// out: [n, width_[s]] on the storage device (CPU for raw tables).
void Table::gather(const int64_t *rows, int64_t n, int s, at::Tensor &out) const {
  const bool momentum = opt_.has_momentum();
  if (raw_) {
    float *o = out.data_ptr<float>();
    const int64_t w = width_[s];
    if (!momentum) {
      gather_plain(rows, n, s, o);
      return;
    }
    // SGD with momentum: rows brought up to date on the way.
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end && i < begin + kAhead; i++) prefetch(rows[i], s, s + 1, false);
      for (int64_t i = begin; i < end; i++) {
        if (i + kAhead < end) prefetch(rows[i + kAhead], s, s + 1, false);
        const int64_t r = rows[i];
        float *dst = o + i * w;
        std::memcpy(dst, slot_ptr(s, r), sizeof(float) * static_cast<size_t>(w));
        const int64_t k = step_ - stamp_[static_cast<size_t>(r)];
        if (k <= 0) continue;
        double S, decay;
        opt_.catch_up_factors(k, &S, &decay);
        const float *buf = slot_ptr(1, r);
        // dst + mv * buf for the row, buf * decay for the buffer
        const float mv = s == 0 ? static_cast<float>(-opt_.p[0] * S) : 0.f, dc = static_cast<float>(decay);
        for_lanes(w, [&](int64_t j, auto L) {
          const auto b = L.load(buf + j);
          L.store(dst + j, s == 0 ? L.load(dst + j) + mv * b : b * dc);
        });
      }
    };
    for_rows(n, w, body);
    return;
  }
  std::vector<int64_t> rv(rows, rows + n);
  const RowPlan p = plan(rv);
  auto g = gather_slot_tensor(p, s);
  if (momentum) {
    at::Tensor mv, dc;
    momentum_factors(rv, step_, &mv, &dc);
    if (s == 0) {
      g.sub_(gather_slot_tensor(p, 1) * mv);
    } else {
      g.mul_(dc);
    }
  }
  out.copy_(g);
}

namespace {
// Copies rows[begin, end) of one slot (w floats each, at addr(rows[i])) to out + i * w,
// prefetching rows kAhead ahead. W > 0: w == W, known to the compiler, whose inline copy of a
// short constant size is a few vector moves, where a call to memcpy of a run-time size costs
// about as much again (with the addressing below, lookups got 10-15% faster at D = 16 and 64).
// W == 0: any w, through memcpy (for 512 bytes and more GCC's inline copy is rep movs, slower
// here than the library's).
// (addr by value: a reference would be read again after every copy, as the fields were.)
template <int64_t W, class Addr>
void gather_span(const int64_t *rows, int64_t begin, int64_t end, int64_t w, const Addr addr, float *out) {
  const int64_t width = W > 0 ? W : w;
  const size_t bytes = sizeof(float) * static_cast<size_t>(width);
  for (int64_t i = begin; i < end && i < begin + kAhead; i++) prefetch_lines(addr(rows[i]), bytes, false);
  for (int64_t i = begin; i < end; i++) {
    if (i + kAhead < end) prefetch_lines(addr(rows[i + kAhead]), bytes, false);
    std::memcpy(out + i * width, addr(rows[i]), bytes);
  }
}
}  // namespace

void Table::gather_plain(const int64_t *rows, int64_t n, int s, float *out) const {
  const SlotAddr addr = slot_addr(s);
  const int64_t w = width_[s];
  auto body = [&](int64_t begin, int64_t end) {
    switch (w) {
      case 8: gather_span<8>(rows, begin, end, w, addr, out); break;
      case 16: gather_span<16>(rows, begin, end, w, addr, out); break;
      case 32: gather_span<32>(rows, begin, end, w, addr, out); break;
      case 64: gather_span<64>(rows, begin, end, w, addr, out); break;
      default: gather_span<0>(rows, begin, end, w, addr, out); break;
    }
  };
  for_rows(n, w, body);
}

at::Tensor Table::gather_rows(const int64_t *ids, const int64_t *rows, int64_t n, int32_t mode) const {
  auto out = at::empty({n, dim_}, float_opts());
  if (n == 0) return out;
  std::vector<int64_t> present_pos, present_rows, absent_pos;
  for (int64_t i = 0; i < n; i++) {
    if (rows[i] >= 0) {
      present_pos.push_back(i);
      present_rows.push_back(rows[i]);
    } else {
      absent_pos.push_back(i);
    }
  }
  if (absent_pos.empty()) {
    gather(rows, n, 0, out);
    return out;
  }
  // Defaults first, then the present rows.
  auto defaults = at::zeros({static_cast<int64_t>(absent_pos.size()), dim_}, at::kFloat);
  if (mode == CT_READ_INITIAL) {
    float *p = defaults.data_ptr<float>();
    for (size_t i = 0; i < absent_pos.size(); i++) {
      init_.row(ids[absent_pos[i]], p + static_cast<int64_t>(i) * dim_);
    }
  }
  auto present = at::empty({static_cast<int64_t>(present_rows.size()), dim_}, float_opts());
  gather(present_rows.data(), static_cast<int64_t>(present_rows.size()), 0, present);
  out.index_copy_(0, index_tensor(absent_pos, device_), defaults.to(device_));
  out.index_copy_(0, index_tensor(present_pos, device_), present);
  return out;
}

// ---- operations -----------------------------------------------------------------------------

at::Tensor Table::lookup(const Keys &k) {
  const int64_t n = k.n;
  std::vector<int64_t> rows(static_cast<size_t>(n));
  auto out = at::empty({n, dim_}, float_opts());
  uint64_t remaps;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    check_open();
    if (ct_idmap_find(map_, k.ptr(), static_cast<size_t>(n), rows.data()) == static_cast<size_t>(n)) {
      gather(rows.data(), n, 0, out);
      touch(rows.data(), n, step_);
      lock.unlock();
      return to_caller(out, k);
    }
    remaps = remaps_;
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  lookup_inserting(k, rows, remaps == remaps_, out, [] {});
  lock.unlock();
  return to_caller(out, k);
}

template <class F>
void Table::lookup_inserting(const Keys &k, std::vector<int64_t> &rows, bool found, at::Tensor &out, F then) {
  const int64_t n = k.n;
  const int64_t *ids = k.ptr();
  if (admit_after_ > 1) {
    out = lookup_admitting(k, rows, found);
    then();  // if this throws, the ids admitted stay (initialised; their counts are spent)
    return;
  }
  // Insert the ids the find missed (another thread may have inserted some since), or all.
  if (!found) std::fill(rows.begin(), rows.end(), -1);
  Missing m(ids, rows.data(), n);
  std::vector<uint8_t> mnew(m.ids.size()), is_new(static_cast<size_t>(n), 0);
  insert_ids(m.ids.data(), static_cast<int64_t>(m.ids.size()), m.rows.data(), mnew.data());
  m.put(rows.data());
  for (size_t j = 0; j < m.ids.size(); j++) is_new[static_cast<size_t>(m.pos[j])] = mnew[j];
  guarded(ids, is_new.data(), n, [&] {
    init_rows(ids, rows.data(), is_new.data(), n, false);
    gather(rows.data(), n, 0, out);
    touch(rows.data(), n, step_);
    then();
  });
}

at::Tensor Table::indices(const Keys &k, bool do_insert) {
  const int64_t n = k.n;
  auto out = at::empty({n}, at::kLong);
  int64_t *rows = out.data_ptr<int64_t>();
  if (!do_insert) {
    std::shared_lock<std::shared_mutex> lock(mu_);
    check_open();
    ct_idmap_find(map_, k.ptr(), static_cast<size_t>(n), rows);
  } else {
    std::vector<uint8_t> is_new(static_cast<size_t>(n));
    std::unique_lock<std::shared_mutex> lock(mu_);
    check_open();
    insert_ids(k.ptr(), n, rows, is_new.data());
    guarded(k.ptr(), is_new.data(), n, [&] { init_rows(k.ptr(), rows, is_new.data(), n, false); });
  }
  return out.device() == k.device ? out : out.to(k.device);
}

std::pair<at::Tensor, at::Tensor> Table::read(const Keys &k, int32_t mode) {
  check_mode(mode);
  const int64_t n = k.n;
  std::vector<int64_t> rows(static_cast<size_t>(n));
  auto found = at::empty({n}, at::kBool);
  at::Tensor out;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    check_open();
    ct_idmap_find(map_, k.ptr(), static_cast<size_t>(n), rows.data());
    out = gather_rows(k.ptr(), rows.data(), n, mode);
  }
  bool *f = found.data_ptr<bool>();
  for (int64_t i = 0; i < n; i++) f[i] = rows[static_cast<size_t>(i)] >= 0;
  return {to_caller(out, k), found.device() == k.device ? found : found.to(k.device)};
}

void Table::write(const Keys &k, const at::Tensor &values_in) {
  const int64_t n = k.n;
  at::Tensor values = check_rows(values_in, "values", n, dim_);
  values = raw_ ? values.to(at::kCPU) : values.to(device_);
  check_finite(values, "values");
  // Last occurrence wins: unique ids in first-appearance order with their last position.
  Dedupe dd(k.ptr(), n);
  std::vector<int64_t> &uids = dd.uids;
  std::vector<int64_t> src(uids.size());
  for (int64_t i = 0; i < n; i++) src[static_cast<size_t>(dd.inverse[static_cast<size_t>(i)])] = i;
  const int64_t u = dd.size();
  std::vector<int64_t> rows(static_cast<size_t>(u));
  std::vector<uint8_t> is_new(static_cast<size_t>(u));
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  insert_ids(uids.data(), u, rows.data(), is_new.data());
  guarded(uids.data(), is_new.data(), u, [&] {
    init_rows(uids.data(), rows.data(), is_new.data(), u, /*skip_embedding=*/true);
    assign(rows, values, src.data());
  });
  modified(rows.data(), u);
}

void Table::assign(const std::vector<int64_t> &rows, const at::Tensor &vals, const int64_t *src) {
  const int64_t u = static_cast<int64_t>(rows.size());
  const bool momentum = opt_.has_momentum();
  if (raw_) {
    const float *v = vals.data_ptr<float>();
    for (int64_t i = 0; i < u; i++) {
      const int64_t r = rows[static_cast<size_t>(i)];
      const int64_t from = src != nullptr ? src[i] : i;
      std::memcpy(slot_ptr(0, r), v + from * dim_, sizeof(float) * static_cast<size_t>(dim_));
      if (!momentum) continue;
      // The weight is replaced; the buffer decays to where it is now.
      const int64_t kk = step_ - stamp_[static_cast<size_t>(r)];
      if (kk > 0) {
        double S, decay;
        opt_.catch_up_factors(kk, &S, &decay);
        float *buf = slot_ptr(1, r);
        for (int64_t j = 0; j < dim_; j++) buf[j] *= static_cast<float>(decay);
      }
      stamp_[static_cast<size_t>(r)] = step_;
    }
    return;
  }
  // Tensor kernels: compute everything, then scatter.
  if (u == 0) return;
  auto sel = src == nullptr ? vals : vals.index_select(0, index_tensor(std::vector<int64_t>(src, src + u), device_));
  const RowPlan p = plan(rows);
  at::Tensor buf;
  if (momentum) {
    at::Tensor mv, dc;
    momentum_factors(rows, step_, &mv, &dc);
    buf = gather_slot_tensor(p, 1).mul_(dc);
  }
  scatter_slot_tensor(p, 0, sel);
  if (buf.defined()) scatter_slot_tensor(p, 1, buf);
  for (int64_t r : rows) {
    if (momentum) stamp_[static_cast<size_t>(r)] = step_;
  }
}

void Table::update(const Keys &k, const at::Tensor &grads_in) {
  const int64_t n = k.n;
  at::Tensor grads = check_rows(grads_in, "grads", n, dim_);
  if (opt_.kind == CT_OPT_NONE) throw arg_error("table \"" + name_ + "\" has no optimizer");
  grads = raw_ ? grads.to(at::kCPU) : grads.to(device_);
  // Sum the gradients of repeated ids, index_add style (never a sparse add_): in batch order.
  Dedupe dd(k.ptr(), n);
  int64_t u = dd.size();
  // Raw kernels: the gradient of a distinct id is read where it is (no copy of the batch): the
  // batch's own row for an id that occurs once, else a row of sums (first occurrence, plus the
  // others in batch order) in a small buffer. Before: a zero-filled [u, dim] copy of the whole
  // batch, which cost a third of an update at dim 64 (allocation, page faults, a pass).
  at::Tensor g;
  std::vector<const float *> gptr;
  std::vector<float> sums;
  check_finite(grads, "gradients");
  if (raw_) {
    const float *src = grads.data_ptr<float>();
    gptr.assign(static_cast<size_t>(u), nullptr);
    if (u < n) {
      // Ids occurring more than once get a row of sums.
      std::vector<int32_t> count(static_cast<size_t>(u), 0), slot(static_cast<size_t>(u), -1);
      for (int64_t i = 0; i < n; i++) count[static_cast<size_t>(dd.inverse[static_cast<size_t>(i)])]++;
      int32_t rep = 0;
      for (int64_t j = 0; j < u; j++) {
        if (count[static_cast<size_t>(j)] > 1) slot[static_cast<size_t>(j)] = rep++;
      }
      sums.assign(static_cast<size_t>(rep) * static_cast<size_t>(dim_), 0.f);
      for (int64_t i = 0; i < n; i++) {
        const size_t j = static_cast<size_t>(dd.inverse[static_cast<size_t>(i)]);
        const float *sr = src + i * dim_;
        if (slot[j] < 0) {
          gptr[j] = sr;
          continue;
        }
        float *d = sums.data() + static_cast<size_t>(slot[j]) * static_cast<size_t>(dim_);
        for_lanes(dim_, [&](int64_t c, auto L) { L.store(d + c, L.load(d + c) + L.load(sr + c)); });
        gptr[j] = d;
      }
    } else {
      for (int64_t i = 0; i < n; i++) gptr[static_cast<size_t>(i)] = src + i * dim_;  // inverse[i] == i
    }
  } else {
    g = at::zeros({u, dim_}, grads.options());
    if (n > 0) g.index_add_(0, index_tensor(dd.inverse, device_), grads);
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  std::vector<int64_t> rows(static_cast<size_t>(u));
  const bool admitting = admit_after_ > 1;
  if (admitting) {  // no new ids: the rows of the admitted ones
    drop_unadmitted(dd.uids, g, gptr, rows);
    u = dd.size();
  }
  std::vector<uint8_t> is_new(static_cast<size_t>(u));
  const int64_t t = step_ + 1;
  const StepConsts c = opt_.begin(t);
  const int64_t *ids = dd.uids.data();
  if (!admitting) insert_ids(ids, u, rows.data(), is_new.data());
  guarded(ids, is_new.data(), u, [&] {
    init_rows(ids, rows.data(), is_new.data(), u, false);
    if (raw_) {
      step_raw(c, gptr.data(), rows.data(), u);
    } else {
      step_tensor(c, g, rows);
    }
  });
  set_step_locked(t);
  touch(rows.data(), u, t);
  modified(rows.data(), u);
}

void Table::step_raw(const StepConsts &c, const float *const *gp, const int64_t *rows, int64_t u) {
  const int64_t t = c.t;
  const bool momentum = opt_.has_momentum();
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end && i < begin + kAhead; i++) prefetch(rows[i], 0, nslots(), true);
    for (int64_t i = begin; i < end; i++) {
      if (i + kAhead < end) prefetch(rows[i + kAhead], 0, nslots(), true);
      const int64_t r = rows[i];
      float *w = slot_ptr(0, r);
      float *s0 = nstates_ > 0 ? slot_ptr(1, r) : nullptr;
      float *s1 = nstates_ > 1 ? slot_ptr(2, r) : nullptr;
      if (momentum) {
        // Steps stamp+1 .. t-1 had no gradient for this row.
        const int64_t kk = (t - 1) - stamp_[static_cast<size_t>(r)];
        if (kk > 0) {
          double S, decay;
          opt_.catch_up_factors(kk, &S, &decay);
          const float mv = static_cast<float>(-opt_.p[0] * S), dc = static_cast<float>(decay);
          for_lanes(dim_, [&](int64_t j, auto L) {
            const auto b = L.load(s0 + j);
            L.store(w + j, L.load(w + j) + mv * b);
            L.store(s0 + j, b * dc);
          });
        }
        stamp_[static_cast<size_t>(r)] = t;
      }
      opt_.apply(c, gp[i], w, s0, s1);
    }
  };
  for_rows(u, dim_ * 8, body);
}

void Table::step_tensor(const StepConsts &c, const at::Tensor &g, const std::vector<int64_t> &rows) {
  if (rows.empty()) return;
  const RowPlan p = plan(rows);
  at::Tensor w = gather_slot_tensor(p, 0);
  at::Tensor s0, s1;
  if (nstates_ > 0) s0 = gather_slot_tensor(p, 1);
  if (nstates_ > 1) s1 = gather_slot_tensor(p, 2);
  if (opt_.has_momentum()) {
    at::Tensor mv, dc;
    momentum_factors(rows, c.t - 1, &mv, &dc);
    w.sub_(s0 * mv);
    s0.mul_(dc);
  }
  opt_.apply(c, g, w, nstates_ > 0 ? &s0 : nullptr, nstates_ > 1 ? &s1 : nullptr);
  // Everything is computed; now the scatters.
  scatter_slot_tensor(p, 0, w);
  if (nstates_ > 0) scatter_slot_tensor(p, 1, s0);
  if (nstates_ > 1) scatter_slot_tensor(p, 2, s1);
  if (!stamp_.empty()) {
    for (int64_t r : rows) stamp_[static_cast<size_t>(r)] = c.t;
  }
}

int64_t Table::erase(const Keys &k) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  return erase_ids(k.ptr(), k.n);
}

void Table::clear() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  if (meta_.tracked()) {
    const size_t m = ct_idmap_size(map_);
    std::vector<int64_t> ids(m), idx(m);
    ct_idmap_export(map_, ids.data(), idx.data(), m);
    deleted_.insert(deleted_.end(), ids.begin(), ids.end());
  }
  ct_idmap_clear(map_);
  remaps_++;
  seen_.clear();
}

ct_table_stats Table::stats() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  ct_table_stats s{};
  s.size = static_cast<int64_t>(ct_idmap_size(map_));
  s.capacity = capacity();
  int64_t bytes = static_cast<int64_t>(ct_idmap_bytes(map_));
  for (const auto &b : blocks_) bytes += static_cast<int64_t>(b.nbytes());
  for (const auto &c : chunks_) bytes += static_cast<int64_t>(c.nbytes());
  bytes += static_cast<int64_t>(stamp_.capacity() * sizeof(int64_t) + ptr_.capacity() * sizeof(float *));
  bytes += meta_.bytes() + static_cast<int64_t>(deleted_.capacity() * sizeof(int64_t) + seen_.size() * 32);
  s.bytes = bytes;
  s.dim = dim_;
  s.step = step_;
  s.num_states = nstates_;
  s.optimizer = opt_.kind;
  return s;
}

Snapshot Table::snapshot() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  const size_t m = ct_idmap_size(map_);
  std::vector<int64_t> ids(m), idx(m);
  ct_idmap_export(map_, ids.data(), idx.data(), m);
  std::vector<size_t> order(m);
  for (size_t i = 0; i < m; i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a] < ids[b]; });
  Snapshot snap;
  snap.step = step_;
  const int64_t mm = static_cast<int64_t>(m);
  snap.ids = at::empty({mm}, at::kLong);
  std::vector<int64_t> rows(m);
  int64_t *pid = snap.ids.data_ptr<int64_t>();
  for (size_t i = 0; i < m; i++) {
    pid[i] = ids[order[i]];
    rows[i] = idx[order[i]];
  }
  snap.rows = at::empty({mm, dim_}, float_opts());
  gather(rows.data(), mm, 0, snap.rows);
  for (int s = 1; s < nslots(); s++) {
    auto st = at::empty({mm, width_[s]}, float_opts());
    gather(rows.data(), mm, s, st);
    snap.states.push_back(st);
  }
  lock.unlock();
  if (!device_.is_cpu()) snap.ids = snap.ids.to(device_);
  return snap;
}

void Table::close() {
  closed_.store(true, std::memory_order_release);
  {
    std::unique_lock<std::shared_mutex> lock(mu_);  // waits for the operations in flight
    free_storage();
  }
  {
    std::lock_guard<std::mutex> g(grad_mu_);
    std::vector<at::Tensor>().swap(pending_ids_);
    std::vector<at::Tensor>().swap(pending_grads_);
    has_pending_ = false;
  }
  // Prefetches in flight finish (with "closed: " if they had not started) before close returns.
  std::unique_lock<std::mutex> l(prefetch_mu_);
  tasks_cv_.wait(l, [this] { return tasks_ == 0; });
  pending_.clear();
}

// ---- autograd -------------------------------------------------------------------------------

std::vector<int64_t> renorm_rows(at::Tensor &rows, double max_norm) {
  std::vector<int64_t> pos;
  if (rows.size(0) == 0) return pos;
  // PyTorch (embedding_renorm_): norm = row.norm(2); if norm > max_norm, row *= max_norm /
  // (norm + 1e-7), the scale computed in double and applied to the float row.
  at::Tensor norms = rows.norm(2, {1}).to(at::kCPU).contiguous();
  const float *nv = norms.data_ptr<float>();
  std::vector<float> scales;
  for (int64_t i = 0; i < norms.size(0); i++) {
    const double nd = nv[i];
    if (nd > max_norm) {
      pos.push_back(i);
      scales.push_back(static_cast<float>(max_norm / (nd + 1e-7)));
    }
  }
  if (pos.empty()) return pos;
  auto idx = index_tensor(pos, rows.device());
  auto sc = at::empty({static_cast<int64_t>(scales.size()), 1}, at::kFloat);
  std::memcpy(sc.data_ptr<float>(), scales.data(), scales.size() * sizeof(float));
  rows.index_copy_(0, idx, rows.index_select(0, idx).mul_(sc.to(rows.device())));
  return pos;
}

at::Tensor Table::lookup_renorm(const Keys &k, double max_norm) {
  const int64_t n = k.n;
  std::vector<int64_t> rows(static_cast<size_t>(n));
  auto out = at::empty({n, dim_}, float_opts());
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  // Rows not admitted are zeros: never over max_norm.
  lookup_inserting(k, rows, false, out, [&] {
    std::vector<int64_t> pos = renorm_rows(out, max_norm);
    if (pos.empty()) return;
    std::vector<int64_t> sel;
    sel.reserve(pos.size());
    for (int64_t p : pos) sel.push_back(rows[static_cast<size_t>(p)]);
    assign(sel, out, pos.data());
    modified(sel.data(), static_cast<int64_t>(sel.size()));
  });
  lock.unlock();
  return to_caller(out, k);
}

void Table::accept_grad(const at::Tensor &uids, const at::Tensor &grads) {
  // A copy with its own dense memory on the storage device (the incoming gradient may be a
  // view, expanded, or on the caller's device).
  auto g = at::empty({uids.size(0), dim_}, float_opts());
  g.copy_(grads);
  std::lock_guard<std::mutex> l(grad_mu_);
  check_open();
  pending_ids_.push_back(uids);
  pending_grads_.push_back(std::move(g));
  has_pending_ = true;
}

namespace {
at::Tensor cat_or(const std::vector<at::Tensor> &v, at::Tensor empty) {
  if (v.empty()) return empty;
  return v.size() == 1 ? v[0] : at::cat(v);
}
}  // namespace

bool Table::step_pending() {
  std::lock_guard<std::mutex> l(grad_mu_);
  check_open();
  if (!has_pending_) return false;
  Keys k;
  k.host = cat_or(pending_ids_, at::empty({0}, at::kLong));
  k.n = k.host.size(0);
  at::Tensor g = cat_or(pending_grads_, at::empty({0, dim_}, float_opts()));
  update(k, g);  // sums the duplicates across passes; throws (keeping them) on bad gradients
  pending_ids_.clear();
  pending_grads_.clear();
  has_pending_ = false;
  return true;
}

void Table::zero_grad() {
  std::lock_guard<std::mutex> l(grad_mu_);
  check_open();
  pending_ids_.clear();
  pending_grads_.clear();
  has_pending_ = false;
}

std::pair<at::Tensor, at::Tensor> Table::pending() {
  std::lock_guard<std::mutex> l(grad_mu_);
  check_open();
  at::Tensor ids = cat_or(pending_ids_, at::empty({0}, at::kLong)).contiguous();
  at::Tensor g = cat_or(pending_grads_, at::empty({0, dim_}, float_opts()));
  Dedupe dd(ids.data_ptr<int64_t>(), ids.size(0));
  auto sum = at::zeros({dd.size(), dim_}, float_opts());
  if (ids.size(0) > 0) sum.index_add_(0, index_tensor(dd.inverse, device_), g);
  std::vector<int64_t> order(dd.uids.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = static_cast<int64_t>(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return dd.uids[static_cast<size_t>(a)] < dd.uids[static_cast<size_t>(b)];
  });
  std::vector<int64_t> sorted(order.size());
  for (size_t i = 0; i < order.size(); i++) sorted[i] = dd.uids[static_cast<size_t>(order[i])];
  return {index_tensor(sorted, device_), sum.index_select(0, index_tensor(order, device_))};
}

int64_t table_dim(const Table &t) { return t.dim(); }
bool table_has_optimizer(const Table &t) { return t.has_optimizer(); }

at::Tensor table_rows(Table &t, const at::Tensor &uids, at::Device device, bool train,
                      int32_t default_mode, double max_norm) {
  Keys k;
  k.host = uids;
  k.n = uids.size(0);
  k.device = device;
  if (train) return max_norm > 0 ? t.lookup_renorm(k, max_norm) : t.lookup(k);
  at::Tensor rows = t.read(k, default_mode).first;
  if (max_norm > 0) renorm_rows(rows, max_norm);
  return rows;
}

void table_accept_grad(Table &t, const at::Tensor &uids, const at::Tensor &grads, bool fused) {
  if (!fused) {
    t.accept_grad(uids, grads);
    return;
  }
  Keys k;
  k.host = uids;
  k.n = uids.size(0);
  auto g = at::empty({k.n, t.dim()}, grads.options().dtype(at::kFloat));
  g.copy_(grads);
  t.update(k, g);
}

bool table_step(Table &t) { return t.step_pending(); }
void table_zero_grad(Table &t) { t.zero_grad(); }
std::pair<at::Tensor, at::Tensor> table_pending(Table &t) { return t.pending(); }

// ---- prefetch -------------------------------------------------------------------------------

int64_t Table::prefetch(const Keys &k, int32_t mode) {
  check_mode(mode);
  check_open();
  auto st = std::make_shared<Prefetch>();
  Keys copy = k;
  copy.host = k.host.clone();  // the caller may change or free its keys
  int64_t id;
  {
    std::lock_guard<std::mutex> l(prefetch_mu_);
    check_open();  // under prefetch_mu_: close cannot miss this task
    id = next_prefetch_++;
    pending_.emplace(id, st);
    tasks_++;
  }
  std::shared_ptr<Table> self = shared_from_this();
  auto task = [self, st, copy, mode]() mutable {
    at::Tensor rows, found;
    std::string err;
    try {
      ct::sync_thread_count();  // this worker thread follows SetNumThreads too
      c10::NoGradGuard no_grad;
      std::tie(rows, found) = self->read(copy, mode);
    } catch (const c10::Error &e) {
      err = e.what_without_backtrace();
    } catch (const std::exception &e) {
      err = e.what();
    } catch (...) {
      err = "unknown C++ exception";
    }
    {
      std::lock_guard<std::mutex> l(st->mu);
      st->rows = std::move(rows);
      st->found = std::move(found);
      st->error = std::move(err);
      st->done = true;
    }
    st->cv.notify_all();
    // Drop every tensor before telling close that this task is over.
    st.reset();
    copy = Keys();
    Table *t = self.get();
    {
      std::lock_guard<std::mutex> l(t->prefetch_mu_);
      t->tasks_--;
    }
    t->tasks_cv_.notify_all();
    self.reset();  // after a close this may destroy the table: its tensors are gone already
  };
  try {
    Pool::get().submit(std::move(task));
  } catch (...) {
    {
      std::lock_guard<std::mutex> l(prefetch_mu_);
      pending_.erase(id);
      tasks_--;
    }
    tasks_cv_.notify_all();
    throw;
  }
  return id;
}

bool Table::wait(int64_t id, int64_t timeout_us, at::Tensor *rows, at::Tensor *found) {
  check_open();
  std::shared_ptr<Prefetch> st;
  {
    std::lock_guard<std::mutex> l(prefetch_mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) {
      throw prefetch_error("no pending prefetch " + std::to_string(id) + " on table \"" + name_ +
                           "\" (never started, already waited for, or discarded)");
    }
    st = it->second;
    if (st->claimed) throw prefetch_error("prefetch " + std::to_string(id) + " is already being waited for");
    st->claimed = true;
  }
  bool done;
  {
    std::unique_lock<std::mutex> l(st->mu);
    auto ready = [&] { return st->done; };
    if (timeout_us < 0) {
      st->cv.wait(l, ready);
    } else {
      st->cv.wait_for(l, std::chrono::microseconds(timeout_us), ready);
    }
    done = st->done;
  }
  {
    std::lock_guard<std::mutex> l(prefetch_mu_);
    if (done) {
      pending_.erase(id);
    } else {
      st->claimed = false;
    }
  }
  if (!done) return false;
  if (!st->error.empty()) throw std::runtime_error(st->error);
  *rows = st->rows;
  if (found != nullptr) *found = st->found;
  return true;
}

void Table::discard(int64_t id) {
  check_open();
  std::lock_guard<std::mutex> l(prefetch_mu_);
  auto it = pending_.find(id);
  if (it == pending_.end() || it->second->claimed) {
    throw prefetch_error("no pending prefetch " + std::to_string(id) + " to discard on table \"" + name_ + "\"");
  }
  pending_.erase(it);
}

// ---- the registry ---------------------------------------------------------------------------

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Table>> tables;
};

Registry &registry() {
  static Registry *r = new Registry();  // never destroyed (see Pool)
  return *r;
}

std::shared_ptr<Table> find_table(const std::string &name) {
  Registry &r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto it = r.tables.find(name);
  if (it == r.tables.end()) throw not_found_error("no open table named \"" + name + "\"");
  return it->second;
}

}  // namespace

}  // namespace table
}  // namespace ct

// The object behind a ct_table handle: one reference to the table.
struct ct_table_s {
  std::shared_ptr<ct::table::Table> t;
};

using ct::guard;
using ct::need_out;
using ct::table::Keys;
using ct::table::Table;

std::shared_ptr<Table> ct::table::table_ref(ct_table h) {
  if (h == nullptr || !h->t) throw ct::closed_error("table handle is NULL");
  return h->t;
}

namespace {
Table &tbl(ct_table h) {
  if (h == nullptr || !h->t) throw ct::closed_error("table handle is NULL");
  return *h->t;
}

// *a = wrap(x) and, when b is not NULL, *b = wrap(y): both or neither.
void wrap_pair(ct_tensor *a, ct_tensor *b, at::Tensor x, at::Tensor y) {
  ct_tensor ha = ct::wrap(std::move(x));
  if (b != nullptr) {
    try {
      *b = ct::wrap(std::move(y));
    } catch (...) {
      ct_tensor_free(ha);
      throw;
    }
  }
  *a = ha;
}
}  // namespace

extern "C" {

ct_error ct_table_new(ct_table *out, const char *name, const ct_table_config *cfg) {
  return guard([&] {
    need_out(out);
    std::string n = ct::table::check_name(name);
    if (cfg == nullptr) throw ct::arg_error("table config is NULL");
    auto &r = ct::table::registry();
    {
      std::lock_guard<std::mutex> l(r.mu);
      if (r.tables.count(n) != 0) throw ct::table::name_taken_error("a table named \"" + n + "\" is open");
    }
    // Built outside the registry lock (it may allocate a lot); the name is checked again.
    auto t = std::make_shared<Table>(n, *cfg);
    auto h = std::make_unique<ct_table_s>();
    h->t = t;
    {
      std::lock_guard<std::mutex> l(r.mu);
      if (!r.tables.emplace(n, t).second) {
        throw ct::table::name_taken_error("a table named \"" + n + "\" is open");
      }
    }
    *out = h.release();
  });
}

ct_error ct_table_open(ct_table *out, const char *name) {
  return guard([&] {
    need_out(out);
    if (name == nullptr) throw ct::arg_error("table name is NULL");
    auto h = std::make_unique<ct_table_s>();
    h->t = ct::table::find_table(name);
    *out = h.release();
  });
}

ct_error ct_table_close(ct_table h) {
  return guard([&] {
    Table &t = tbl(h);
    t.close();
    auto &r = ct::table::registry();
    std::lock_guard<std::mutex> l(r.mu);
    auto it = r.tables.find(t.name());
    if (it != r.tables.end() && it->second.get() == &t) r.tables.erase(it);
  });
}

void ct_table_free(ct_table h) { delete h; }

ct_error ct_table_names(char **out) {
  return guard([&] {
    need_out(out);
    std::string s;
    {
      auto &r = ct::table::registry();
      std::lock_guard<std::mutex> l(r.mu);
      for (const auto &kv : r.tables) {
        if (!s.empty()) s += '\n';
        s += kv.first;
      }
    }
    char *c = strdup(s.c_str());
    if (c == nullptr) throw std::bad_alloc();
    *out = c;
  });
}

ct_error ct_table_name(char **out, ct_table h) {
  return guard([&] {
    need_out(out);
    char *c = strdup(tbl(h).name().c_str());
    if (c == nullptr) throw std::bad_alloc();
    *out = c;
  });
}

const char *ct_table_state_name(int32_t optimizer, int32_t i) {
  switch (optimizer) {
    case CT_OPT_SGD: return i == 0 ? "momentum_buffer" : nullptr;
    case CT_OPT_ADAGRAD:
    case CT_OPT_ROWWISE_ADAGRAD: return i == 0 ? "sum" : nullptr;
    case CT_OPT_SPARSE_ADAM:
    case CT_OPT_ADAMW: return i == 0 ? "exp_avg" : i == 1 ? "exp_avg_sq" : nullptr;
    case CT_OPT_FTRL: return i == 0 ? "z" : i == 1 ? "n" : nullptr;
    default: return nullptr;
  }
}

ct_error ct_table_lookup(ct_tensor *rows, ct_table h, ct_tensor keys) {
  return guard([&] {
    need_out(rows);
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys);
    c10::NoGradGuard no_grad;
    *rows = ct::wrap(t.lookup(k));
  });
}

ct_error ct_table_indices(ct_tensor *out, ct_table h, ct_tensor keys, int32_t insert) {
  return guard([&] {
    need_out(out);
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys);
    c10::NoGradGuard no_grad;
    *out = ct::wrap(t.indices(k, insert != 0));
  });
}

ct_error ct_table_read(ct_tensor *rows, ct_tensor *found, ct_table h, ct_tensor keys,
                       int32_t default_mode) {
  return guard([&] {
    need_out(rows);
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys);
    c10::NoGradGuard no_grad;
    auto r = t.read(k, default_mode);
    wrap_pair(rows, found, std::move(r.first), std::move(r.second));
  });
}

ct_error ct_table_write(ct_table h, ct_tensor keys, ct_tensor values) {
  return guard([&] {
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys);
    c10::NoGradGuard no_grad;
    t.write(k, ct::get(values));
  });
}

ct_error ct_table_update(ct_table h, ct_tensor keys, ct_tensor grads) {
  return guard([&] {
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys);
    c10::NoGradGuard no_grad;
    t.update(k, ct::get(grads));
  });
}

ct_error ct_table_update_by_name(const char *name, ct_tensor keys, ct_tensor grads) {
  return guard([&] {
    if (name == nullptr) throw ct::arg_error("table name is NULL");
    auto t = ct::table::find_table(name);
    Keys k = ct::table::check_keys(keys);
    c10::NoGradGuard no_grad;
    t->update(k, ct::get(grads));
  });
}

ct_error ct_table_prefetch(int64_t *id, ct_table h, ct_tensor keys, int32_t default_mode) {
  return guard([&] {
    need_out(id);
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys);
    *id = t.prefetch(k, default_mode);
  });
}

ct_error ct_table_prefetch_wait(ct_tensor *rows, ct_tensor *found, int32_t *ready, ct_table h,
                                int64_t id, int64_t timeout_us) {
  return guard([&] {
    need_out(rows);
    need_out(ready);
    at::Tensor r, f;
    bool done = tbl(h).wait(id, timeout_us, &r, found != nullptr ? &f : nullptr);
    *ready = done ? 1 : 0;
    if (!done) return;
    wrap_pair(rows, found, std::move(r), std::move(f));
  });
}

ct_error ct_table_prefetch_discard(ct_table h, int64_t id) {
  return guard([&] { tbl(h).discard(id); });
}

ct_error ct_table_delete(int64_t *deleted, ct_table h, ct_tensor keys) {
  return guard([&] {
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys);
    int64_t n = t.erase(k);
    if (deleted != nullptr) *deleted = n;
  });
}

ct_error ct_table_clear(ct_table h) {
  return guard([&] { tbl(h).clear(); });
}

ct_error ct_table_stats_get(ct_table_stats *out, ct_table h) {
  return guard([&] {
    need_out(out);
    *out = tbl(h).stats();
  });
}

ct_error ct_table_export(ct_tensor *ids, ct_tensor *rows, ct_tensor *states, int32_t cap,
                         int64_t *step, ct_table h) {
  return guard([&] {
    need_out(ids);
    need_out(rows);
    c10::NoGradGuard no_grad;
    auto snap = tbl(h).snapshot();
    const int32_t ns = static_cast<int32_t>(snap.states.size());
    if (cap < ns) throw ct::arg_error("states has room for " + std::to_string(cap) + " tensors, the table has " + std::to_string(ns));
    if (ns > 0 && states == nullptr) throw ct::arg_error("states is NULL");
    // Wrap last: nothing is handed out unless everything is.
    std::vector<ct_tensor> made;
    try {
      made.push_back(ct::wrap(snap.ids));
      made.push_back(ct::wrap(snap.rows));
      for (auto &s : snap.states) made.push_back(ct::wrap(s));
    } catch (...) {
      for (auto m : made) ct_tensor_free(m);
      throw;
    }
    *ids = made[0];
    *rows = made[1];
    for (int32_t i = 0; i < ns; i++) states[i] = made[static_cast<size_t>(2 + i)];
    if (step != nullptr) *step = snap.step;
  });
}

}  // extern "C"

