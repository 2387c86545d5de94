// meta.h: the per-row metadata of an embedding table (class RowMeta, used by table.cc.h).
//
// For each row: the step of its last training lookup or update and how many there were (8
// bytes: two uint32; only in tables created with CT_TABLE_TRACK_ACCESS, which eviction by age,
// recency, frequency or budget needs), and, once deltas are tracked, the delta epoch of its
// last change (4 more bytes, from the first delta mark on). Both live in chunks of block_rows rows, one chunk per storage block of the table:
// growing adds chunks (nothing is copied, nothing allocated ahead), truncating frees them.
//
// Last steps are stored as uint32 offsets from base_. The base is a function of the step counter
// alone: the largest multiple of 2^31 that is at least 2^31 below it (0 below step 2^32). So a
// stored step is never more than 2^32 - 1 above the base, and every row seen within the last
// 2^31 steps reads back exactly; an older row reads back exactly until the base passes it, then
// as the base (when the base moves up, offsets below it are clamped to 0): it still looks more
// than 2^31 steps old to TTL and LRU eviction. Because the base depends on the step only, a
// checkpoint loaded at the same step gets the same base and reads back the same last steps
// (round trips stay bit for bit).
// Frequencies saturate at 2^32 - 1 instead of wrapping.
//
// Concurrency: touch() may run under the table's shared lock (relaxed atomic stores, racing
// touches of one row may lose an increment) and reads use relaxed atomic loads; everything else
// (advance, growth, marks) needs the table's lock held exclusively.
#ifndef CGOTORCH_TABLE_META_H
#define CGOTORCH_TABLE_META_H

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace ct {
namespace table {

class RowMeta {
 public:
  // access: keep each row's last step and frequency (8 bytes a row); without it the table
  // keeps none and refuses what needs them (CT_TABLE_TRACK_ACCESS).
  RowMeta(int64_t block_rows, bool access) : rows_(block_rows), access_(access) {
    if ((rows_ & (rows_ - 1)) == 0) shift_ = __builtin_ctzll(static_cast<uint64_t>(rows_));
  }

  // ---- storage: one chunk per block of the table
  // Adds chunks up to nblocks. Strong guarantee: all allocation happens before anything changes.
  void grow(int64_t nblocks) {
    const size_t want = static_cast<size_t>(nblocks), have = chunks_;
    if (want <= have) return;
    decltype(rec_) rec;
    if (access_) rec = make_chunks<Rec>(want - have, Rec{});
    decltype(mod_) mod;
    if (tracked_) mod = make_chunks<uint32_t>(want - have, epoch_);
    if (access_) rec_.reserve(want);
    if (tracked_) mod_.reserve(want);
    append(rec_, rec);  // noexcept from here: the room is reserved
    append(mod_, mod);
    chunks_ = want;
  }
  // Keeps the first nblocks chunks and frees the others (never throws).
  void truncate(int64_t nblocks) {
    const size_t n = std::min(static_cast<size_t>(nblocks), chunks_);
    chunks_ = n;
    if (access_) {
      rec_.resize(n);
      rec_.shrink_to_fit();
    }
    if (tracked_) {
      mod_.resize(n);
      mod_.shrink_to_fit();
    }
  }
  // Memory held, and bytes per row (for the byte-budget eviction's estimate).
  int64_t bytes() const {
    const size_t rows = static_cast<size_t>(rows_);
    return static_cast<int64_t>(rec_.size() * rows * sizeof(Rec) + mod_.size() * rows * sizeof(uint32_t) +
                                (rec_.capacity() + mod_.capacity()) * sizeof(void *));
  }
  int64_t row_bytes() const {
    return static_cast<int64_t>((access_ ? sizeof(Rec) : 0) + (tracked_ ? sizeof(uint32_t) : 0));
  }

  // ---- access records (only with access kept: the table checks access() where it matters)
  bool access() const { return access_; }
  // The step last offsets count from (see rebase).
  int64_t base() const { return base_; }
  // The step counter changed to step: moves the base if the step left its window (exclusive lock).
  void advance(int64_t step) {
    const int64_t b = base_for(step);
    if (b != base_) rebase(b);
  }
  // A new row: last step now, frequency 0, changed in this epoch.
  void init(int64_t r, int64_t step) {
    if (access_) rec(r) = Rec{offset(step), 0};
    if (tracked_) mod(r) = epoch_;
  }
  // Training accesses of rows[0, n) (shared lock allowed; rows[i] < 0 are skipped). Records
  // of random rows miss the cache: each is prefetched some rows ahead.
  void touch(const int64_t *rows, int64_t n, int64_t step, const int64_t *counts = nullptr) {
    if (!access_) return;
    constexpr int64_t kAhead = 16;
    const uint32_t now = offset(step);
    for (int64_t i = 0; i < n; i++) {
      if (i + kAhead < n && rows[i + kAhead] >= 0) __builtin_prefetch(&rec(rows[i + kAhead]), 1, 3);
      if (rows[i] < 0) continue;
      Rec &x = rec(rows[i]);
      __atomic_store_n(&x.last, now, __ATOMIC_RELAXED);
      const uint64_t f = __atomic_load_n(&x.freq, __ATOMIC_RELAXED) + static_cast<uint64_t>(counts ? counts[i] : 1);
      __atomic_store_n(&x.freq, static_cast<uint32_t>(std::min<uint64_t>(f, kMax)), __ATOMIC_RELAXED);
    }
  }
  int64_t last(int64_t r) const { return base_ + __atomic_load_n(&rec(r).last, __ATOMIC_RELAXED); }
  int64_t freq(int64_t r) const { return __atomic_load_n(&rec(r).freq, __ATOMIC_RELAXED); }
  // Row r's rank for keep-N eviction as one integer: the recency (last step's offset from the
  // base, which orders as the last step) and the frequency, either one first (lfu: frequency),
  // so that a larger value is kept first. (Metadata carries rank(r, false) through its sort.)
  uint64_t rank(int64_t r, bool lfu) const {
    const uint64_t l = __atomic_load_n(&rec(r).last, __ATOMIC_RELAXED), f = __atomic_load_n(&rec(r).freq, __ATOMIC_RELAXED);
    return lfu ? f << 32 | l : l << 32 | f;
  }
  // Imported values (>= 0), clamped into what can be stored.
  void set(int64_t r, int64_t last, int64_t freq) {
    if (access_) rec(r) = Rec{offset(last), static_cast<uint32_t>(std::min<int64_t>(freq, kMax))};
  }
  // Row src's metadata to row dst (compaction).
  void move(int64_t dst, int64_t src) {
    if (access_) rec(dst) = rec(src);
    if (tracked_) mod(dst) = mod(src);
  }

  // ---- deltas: which rows changed since the last mark
  // Until the first mark there are no epochs (no memory): every row counts as changed.
  bool tracked() const { return tracked_; }
  // The chunks held (the table's blocks when access or deltas are kept; Table::check).
  int64_t chunks() const { return static_cast<int64_t>(chunks_); }
  bool chunks_held(int64_t nblocks) const {
    return (!access_ || static_cast<int64_t>(rec_.size()) == nblocks) && (!tracked_ || static_cast<int64_t>(mod_.size()) == nblocks);
  }
  void modified(int64_t r) {
    if (tracked_) mod(r) = epoch_;
  }
  bool changed(int64_t r) const { return !tracked_ || mod(r) == epoch_; }
  // Starts a new epoch; the first mark allocates the epochs of every row, all in the current
  // epoch, so that they count as unchanged after it. Strong guarantee.
  void mark() {
    if (!tracked_) {
      mod_ = make_chunks<uint32_t>(chunks_, epoch_);
      tracked_ = true;
    }
    epoch_++;
  }

  void swap(RowMeta &o) noexcept {
    using std::swap;
    swap(rows_, o.rows_);
    swap(shift_, o.shift_);
    swap(base_, o.base_);
    swap(access_, o.access_);
    swap(chunks_, o.chunks_);
    swap(rec_, o.rec_);
    swap(tracked_, o.tracked_);
    swap(epoch_, o.epoch_);
    swap(mod_, o.mod_);
  }

 private:
  struct Rec {
    uint32_t last;  // step - base_
    uint32_t freq;
  };
  static constexpr int64_t kMax = UINT32_MAX;
  static constexpr int64_t kWindow = int64_t{1} << 31;

  template <class T>
  using Chunks = std::vector<std::unique_ptr<T[]>>;
  template <class T>
  Chunks<T> make_chunks(size_t n, T fill) const {
    Chunks<T> v;
    v.reserve(n);
    for (size_t i = 0; i < n; i++) {
      v.push_back(std::make_unique<T[]>(static_cast<size_t>(rows_)));
      std::fill_n(v.back().get(), rows_, fill);
    }
    return v;
  }
  template <class T>
  static void append(Chunks<T> &to, Chunks<T> &from) noexcept {
    for (auto &c : from) to.push_back(std::move(c));
  }

  // The largest multiple of 2^31 at most step - 2^31 (0 below step 2^32): step - base is in
  // [2^31, 2^32) from step 2^32 on, and base + 2^32 - 1 never overflows.
  static int64_t base_for(int64_t step) { return std::max<int64_t>(0, (step / kWindow - 1) * kWindow); }
  uint32_t offset(int64_t step) const {
    return step <= base_ ? 0 : static_cast<uint32_t>(std::min<int64_t>(step - base_, kMax));
  }
  // Re-expresses every stored step relative to base b: clamped to b when older (and, after a
  // step counter set back by more than 2^31, to b + 2^32 - 1 when newer).
  void rebase(int64_t b) {
    // Both are >= 0 (no overflow); beyond +-2^32 every offset clamps anyway.
    const int64_t d = std::clamp<int64_t>(b - base_, -kMax - 1, kMax + 1);
    for (auto &c : rec_) {
      for (int64_t i = 0; i < rows_; i++) {
        const int64_t v = c[static_cast<size_t>(i)].last - d;
        c[static_cast<size_t>(i)].last = static_cast<uint32_t>(std::clamp<int64_t>(v, 0, kMax));
      }
    }
    base_ = b;
  }

  // Row r's entry of chunks c (a shift and a mask for power-of-two block sizes, the default).
  template <class T>
  T &at(const Chunks<T> &c, int64_t r) const {
    if (shift_ >= 0) return c[static_cast<size_t>(r >> shift_)][static_cast<size_t>(r & (rows_ - 1))];
    return c[static_cast<size_t>(r / rows_)][static_cast<size_t>(r % rows_)];
  }
  Rec &rec(int64_t r) { return at(rec_, r); }
  const Rec &rec(int64_t r) const { return at(rec_, r); }
  uint32_t &mod(int64_t r) { return at(mod_, r); }
  uint32_t mod(int64_t r) const { return at(mod_, r); }

  int64_t rows_;    // rows per chunk (the table's block_rows)
  int shift_ = -1;  // log2(rows_) if a power of two, else -1
  bool access_;
  size_t chunks_ = 0;  // the table's blocks: chunks of rec_ (with access) and of mod_ (tracked)
  int64_t base_ = 0;
  Chunks<Rec> rec_;   // empty without access
  bool tracked_ = false;
  uint32_t epoch_ = 0;
  Chunks<uint32_t> mod_;  // empty until the first mark
};

}  // namespace table
}  // namespace ct

#endif
