// lifecycle.cc.h: the table lifecycle (checkpoint streams and imports, per-row metadata,
// eviction, compaction, admission, deltas) and its ct_table_* entry points. It comes after
// table.cc.h and the files of the core operations in unity_table.cc (see table.cc.h's list),
// because these members need the definition of class Table.
//
// Per-row metadata lives in meta_ (RowMeta, meta.h), in chunks grown and freed with the
// blocks: with CT_TABLE_TRACK_ACCESS, the step of the last training lookup or update and the
// number of training lookups + updates (8 bytes a row), and, from the first delta mark on, the delta epoch of the last change
// (4 bytes a row). Lookups holding the lock shared update the first two with relaxed atomic
// stores (no lost row data, possibly lost increments under concurrent lookups of one row).

#ifdef CT_TEST_HOOKS
// Test builds only (make table-sanitize): evict calls this between choosing its rows and
// taking them, holding no lock, so that a test can change the table in between.
extern "C" {
void (*ct_test_evict_between_phases)(void) = nullptr;
}
#endif

namespace ct {
namespace table {

namespace {
// A budget eviction's estimate of the id map's bytes per row; it compacts with the map rebuilt
// when the map holds more. (A map sized for its ids holds about 29 B an id.)
constexpr int64_t kMapBytesPerRow = 32;

// Calls f(row index, id) for every id of a map, in row-index order (sequential reads of the
// blocks). Indices are unique and below the high water mark, so while at most half of those are
// free the map places each id at its index (9 bytes per index: the id and a live flag) and the
// walk replaces a sort (10M ids: one pass, not 23); a sparser map sorts its (index, id) pairs.
template <class F>
void each_row_by_index(const ct_idmap *map, F f) {
  const size_t m = ct_idmap_size(map);
  const size_t hw = static_cast<size_t>(ct_idmap_high_water(map));
  if (hw / 2 > m) {
    std::vector<int64_t> ids(m), idx(m);
    ct_idmap_export(map, ids.data(), idx.data(), m);
    std::vector<std::pair<int64_t, int64_t>> p(m);
    for (size_t i = 0; i < m; i++) p[i] = {idx[i], ids[i]};
    std::vector<int64_t>().swap(ids);
    std::vector<int64_t>().swap(idx);
    sort_by_first(p);
    for (const auto &x : p) f(x.first, x.second);
    return;
  }
  std::vector<int64_t> id_at(hw);
  std::vector<uint8_t> live(hw, 0);
  ct_idmap_export_by_index(map, id_at.data(), live.data(), hw);
  for (size_t r = 0; r < hw; r++) {
    if (live[r]) f(static_cast<int64_t>(r), id_at[r]);
  }
}

// A fresh map holding map's ids at the indices they get from the packing moves from[k] ->
// to[k] (what ct_idmap_pack reports): a fresh map numbers the ids of a batch 0, 1, 2, ... in
// batch order, so the batch is the ids in packed index order. Sized for them (the load a
// reserve gives), whatever the map they come from grew to. Throws std::bad_alloc, nothing
// changed, when memory runs out.
ct_idmap *packed_copy(const ct_idmap *map, const std::vector<int64_t> &from, const std::vector<int64_t> &to) {
  const size_t m = ct_idmap_size(map), hw = static_cast<size_t>(ct_idmap_high_water(map));
  std::vector<int64_t> id_at(hw), idx(m);
  {
    std::vector<uint8_t> live(hw, 0);
    ct_idmap_export_by_index(map, id_at.data(), live.data(), hw);
  }
  for (size_t k = 0; k < from.size(); k++) id_at[static_cast<size_t>(to[k])] = id_at[static_cast<size_t>(from[k])];
  ct_idmap *nm = ct_idmap_new(m);
  if (nm == nullptr || ct_idmap_find_or_insert(nm, id_at.data(), m, idx.data(), nullptr) < 0) {
    ct_idmap_free(nm);
    throw std::bad_alloc();
  }
  return nm;
}

}  // namespace

// Hands the heap's free memory back to the system (glibc: malloc_trim). What compaction frees
// besides its slab blocks (those it gives back itself: release_slab_block) is heap memory: the
// blocks of small tables, the old id map, per-row metadata and stamps. glibc keeps freed
// chunks in its free lists and arenas and returns only the top of the main heap by itself: with
// 2M ids, 90% evicted, about 110 MB stayed resident after a Compact (see TestCompactReturnsMemory).
// Other C libraries: nothing (their own policy applies). Takes no table lock.
namespace {
void return_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}
}  // namespace

// ---- metadata -------------------------------------------------------------------------------

void Table::init_meta(const int64_t *rows, const uint8_t *is_new, int64_t n) {
  if (!meta_.access() && !meta_.tracked()) return;
  for (int64_t i = 0; i < n; i++) {
    if (is_new[i]) meta_.init(rows[i], step_);
  }
}

void Table::saved_meta(int64_t r, int64_t *last, int64_t *freq, int64_t *stamp) const {
  *last = meta_.access() ? meta_.last(r) : step_;  // untracked: seen now, never counted
  *freq = meta_.access() ? meta_.freq(r) : 0;
  *stamp = stamp_.empty() ? step_ : stamp_[static_cast<size_t>(r)];
}

void Table::need_access(const char *what) const {
  if (!meta_.access()) {
    throw arg_error(std::string(what) + " needs the rows' last steps and frequencies, which table \"" + name_ +
                    "\" does not keep: create it with CT_TABLE_TRACK_ACCESS");
  }
}

void Table::modified(const int64_t *rows, int64_t n) {
  if (!meta_.tracked()) return;
  for (int64_t i = 0; i < n; i++) meta_.modified(rows[i]);
}

void Table::reserve_erase(int64_t n, std::vector<int64_t> &freed) {
  if (meta_.tracked()) {
    freed.resize(static_cast<size_t>(n));
    deleted_.reserve(deleted_.size() + static_cast<size_t>(n));
  }
  if (ct_idmap_reserve_free(map_, static_cast<size_t>(n)) != 0) throw std::bad_alloc();
}

int64_t Table::erase_reserved(const int64_t *ids, int64_t n, std::vector<int64_t> &freed) {
  remaps_++;
  const bool track_deletes = meta_.tracked();
  const int64_t r = ct_idmap_erase(map_, ids, static_cast<size_t>(n), track_deletes ? freed.data() : nullptr);
  if (r < 0) throw std::bad_alloc();  // not reached: reserve_erase grew the free list
  for (size_t i = 0; track_deletes && i < static_cast<size_t>(n); i++) {
    if (freed[i] >= 0) deleted_.push_back(ids[i]);
  }
  return r;
}

int64_t Table::erase_ids(const int64_t *ids, int64_t n) {
  std::vector<int64_t> freed;
  reserve_erase(n, freed);
  return erase_reserved(ids, n, freed);
}

// ---- raw slot access --------------------------------------------------------------------------

void Table::read_raw(const std::vector<int64_t> &rows, int s, float *out) const {
  const int64_t w = width_[s];
  if (raw_) {
    for (size_t i = 0; i < rows.size(); i++) {
      std::memcpy(out + static_cast<int64_t>(i) * w, slot_ptr(s, rows[i]), sizeof(float) * static_cast<size_t>(w));
    }
    return;
  }
  if (rows.empty()) return;
  at::Tensor t = gather_slot_tensor(rows, s).to(at::kCPU).contiguous();
  std::memcpy(out, t.data_ptr<float>(), sizeof(float) * static_cast<size_t>(t.numel()));
}

void Table::write_raw(const std::vector<int64_t> &rows, int s, const float *src) {
  const int64_t w = width_[s];
  if (raw_) {
    for (size_t i = 0; i < rows.size(); i++) {
      std::memcpy(slot_ptr(s, rows[i]), src + static_cast<int64_t>(i) * w, sizeof(float) * static_cast<size_t>(w));
    }
    return;
  }
  if (rows.empty()) return;
  const int64_t n = static_cast<int64_t>(rows.size());
  at::Tensor t = at::empty({n, w}, at::kFloat);
  std::memcpy(t.data_ptr<float>(), src, sizeof(float) * static_cast<size_t>(n * w));
  scatter_slot_tensor(rows, s, t.to(device_));
}

// ---- checkpoints ------------------------------------------------------------------------------

ct_table_config Table::config() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  ct_table_config c = cfg_;
  std::copy(opt_.p, opt_.p + 8, c.opt_params);  // the rule's parameters as they are (set_lr)
  return c;
}

void Table::save(int64_t chunk_rows, ct_table_sink sink, uintptr_t ctx) {
  if (sink == nullptr) throw arg_error("sink is NULL");
  if (chunk_rows <= 0) throw arg_error("chunk_rows must be > 0, got " + std::to_string(chunk_rows));
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  // Rows go out in row-index order, a chunk at a time, as each_row_by_index walks them (no
  // list of all the rows: 9 bytes per index while the walk lasts).
  const int64_t m = static_cast<int64_t>(ct_idmap_size(map_));
  const int64_t cr = std::max<int64_t>(1, std::min<int64_t>(chunk_rows, m));
  const size_t ucr = static_cast<size_t>(cr);
  std::vector<int64_t> ids(ucr), last(ucr), freq(ucr), stamp(ucr);
  std::vector<int64_t> rows;  // the current chunk's row indices (its count)
  rows.reserve(ucr);
  std::vector<float> emb(ucr * static_cast<size_t>(dim_));
  std::vector<float> st[2];
  for (int s = 0; s < nstates_; s++) st[s].resize(ucr * static_cast<size_t>(width_[s + 1]));
  ct_table_chunk c{};
  c.kind = CT_CHUNK_ROWS;
  c.num_states = nstates_;
  c.total_rows = m;
  c.total_counts = static_cast<int64_t>(seen_.size());
  c.step = step_;
  c.delta_lineage = lineage_;
  c.delta_seq = seq_;
  auto emit = [&] {
    if (sink(ctx, &c) != 0) throw std::runtime_error("aborted: the sink stopped the save");
  };
  int64_t row_off = 0;
  auto flush = [&] {  // the chunk's rows: at least one chunk, empty for an empty table
    read_raw(rows, 0, emb.data());
    for (int s = 0; s < nstates_; s++) read_raw(rows, s + 1, st[s].data());
    // A load checks the same (check_import): a save never writes what a load refuses.
    const float *sp[2] = {st[0].data(), st[1].data()};
    check_values(static_cast<int64_t>(rows.size()), emb.data(), sp, [&](const std::string &why) {
      throw std::runtime_error("table \"" + name_ + "\" holds values a load refuses (" + why + "): not saved");
    });
    c.offset = row_off;
    c.count = static_cast<int64_t>(rows.size());
    c.ids = ids.data();
    c.rows = emb.data();
    for (int s = 0; s < 2; s++) c.states[s] = s < nstates_ ? st[s].data() : nullptr;
    c.last_step = last.data();
    c.frequency = freq.data();
    c.stamp = stamp.data();
    emit();
    row_off += c.count;
    rows.clear();
  };
  each_row_by_index(map_, [&](int64_t r, int64_t id) {
    const size_t i = rows.size();
    rows.push_back(r);
    ids[i] = id;
    saved_meta(r, &last[i], &freq[i], &stamp[i]);
    if (rows.size() == ucr) flush();
  });
  if (!rows.empty() || row_off == 0) flush();
  // The admission counts, in chunks of the same size.
  c = ct_table_chunk{};
  c.kind = CT_CHUNK_COUNTS;
  c.num_states = nstates_;
  c.total_rows = m;
  c.total_counts = static_cast<int64_t>(seen_.size());
  c.step = step_;
  c.delta_lineage = lineage_;
  c.delta_seq = seq_;
  std::vector<int64_t> counts(ucr);
  c.ids = ids.data();
  c.counts = counts.data();
  auto it = seen_.begin();
  for (int64_t off = 0;; off += cr) {
    int64_t cnt = 0;
    for (; it != seen_.end() && cnt < cr; ++it, ++cnt) {
      ids[static_cast<size_t>(cnt)] = it->first;
      counts[static_cast<size_t>(cnt)] = it->second;
    }
    c.offset = off;
    c.count = cnt;
    emit();
    if (it == seen_.end()) break;
  }
}

// What a table may hold, and so what a save writes and a load reads: finite rows and states,
// and the states an optimizer keeps non-negative (Adagrad's sums, Adam's second moments, FTRL's
// n: step() takes their square roots) are >= 0. fail(why) is called on the first violation.
template <class F>
void Table::check_values(int64_t n, const float *rows, const float *const st[2], F fail) const {
  if (n <= 0) return;
  if (!all_finite(rows, n * dim_)) fail("rows contain NaN or Inf");
  for (int s = 0; s < nstates_; s++) {
    const float *v = st[s];
    const int64_t m = n * width_[s + 1];
    if (!all_finite(v, m)) fail("states contain NaN or Inf");
    const StateSpec spec = opt_.state_shape(s);  // (import checks before the lock: no parameters)
    if (!spec.nonneg) continue;
    bool neg = false;
    for (int64_t i = 0; i < m; i++) neg |= v[i] < 0;
    if (neg) fail(std::string("state ") + spec.name + " has negative values: the optimizer keeps it >= 0");
  }
}

void Table::check_import(int64_t n, const int64_t *ids, const float *rows, const float *const st[2],
                         const int64_t *last, const int64_t *freq, const int64_t *stamp) const {
  if (n < 0) throw arg_error("n must be >= 0");
  if (n > 0 && (ids == nullptr || rows == nullptr)) throw arg_error("ids or rows is NULL");
  for (int s = 0; s < 2; s++) {
    if (n > 0 && (st[s] != nullptr) != (s < nstates_)) {
      throw arg_error("state" + std::to_string(s) + (st[s] == nullptr ? " is NULL" : " is not NULL") +
                      ": the optimizer has " + std::to_string(nstates_) + " states");
    }
  }
  check_values(n, rows, st, [](const std::string &why) { throw arg_error(why); });
  for (int64_t i = 0; i < n; i++) {
    if ((last != nullptr && last[i] < 0) || (stamp != nullptr && stamp[i] < 0) || (freq != nullptr && freq[i] < 0)) {
      throw arg_error("negative last step, frequency or stamp");
    }
  }
  Dedupe dd(ids, n);
  if (dd.size() != n) throw arg_error("ids are not distinct");
}

namespace {
void check_steps(int64_t n, const int64_t *last, const int64_t *stamp, int64_t step) {
  for (int64_t i = 0; i < n; i++) {
    if ((last != nullptr && last[i] > step) || (stamp != nullptr && stamp[i] > step)) {
      throw arg_error("a last step or stamp is beyond the step counter " + std::to_string(step));
    }
  }
}
}  // namespace

std::vector<int64_t> Table::write_rows(int64_t n, const int64_t *ids, const float *rows, const float *const st[2]) {
  std::vector<int64_t> r(static_cast<size_t>(n));
  if (n == 0) return r;
  std::vector<uint8_t> is_new(static_cast<size_t>(n));
  insert_ids(ids, n, r.data(), is_new.data());
  guarded(ids, is_new.data(), n, [&] {
    write_raw(r, 0, rows);
    for (int s = 0; s < nstates_; s++) write_raw(r, s + 1, st[s]);
  });
  note_max(0, max_abs_bits(rows, n * dim_));  // vmax_ bounds what the table holds
  for (int s = 0; s < nstates_; s++) note_max(s + 1, max_abs_bits(st[s], n * width_[s + 1]));
  return r;
}

void Table::write_meta(const std::vector<int64_t> &r, const int64_t *last, const int64_t *freq,
                       const int64_t *stamp) {
  for (size_t i = 0; i < r.size(); i++) {
    const int64_t x = r[i];
    meta_.set(x, last != nullptr ? last[i] : step_, freq != nullptr ? freq[i] : 0);
    meta_.modified(x);
    if (!stamp_.empty()) stamp_[static_cast<size_t>(x)] = stamp != nullptr ? stamp[i] : step_;
  }
}

void Table::import(int64_t n, const int64_t *ids, const float *rows, const float *s0,
                   const float *s1, const int64_t *last, const int64_t *freq, const int64_t *stamp) {
  const float *st[2] = {s0, s1};
  check_import(n, ids, rows, st, last, freq, stamp);
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  check_steps(n, last, stamp, step_);
  write_meta(write_rows(n, ids, rows, st), last, freq, stamp);
}

void Table::apply_delta(int64_t step, int64_t nd, const int64_t *deleted, int64_t n, const int64_t *ids,
                        const float *rows, const float *s0, const float *s1, const int64_t *last,
                        const int64_t *freq, const int64_t *stamp, const ct_table_delta_info *info) {
  if (info != nullptr && info->lineage == 0) info = nullptr;  // a delta of an older gorec
  if (step < 0) throw arg_error("step must be >= 0, got " + std::to_string(step));
  if (nd < 0 || (nd > 0 && deleted == nullptr)) throw arg_error("deleted ids: n < 0 or NULL");
  const float *st[2] = {s0, s1};
  check_import(n, ids, rows, st, last, freq, stamp);
  // An id deleted and written again since the mark is overwritten, not removed: the write
  // replaces every part of its row.
  std::unordered_set<int64_t> written(ids, ids + n);
  std::vector<int64_t> del;
  for (int64_t i = 0; i < nd; i++) {
    if (written.count(deleted[i]) == 0) del.push_back(deleted[i]);
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  if (info != nullptr && info->base == 0) {
    // A whole table (what a table tracking no changes gives: no deletions): it replaces the
    // copy's contents, so the ids it lacks go.
    each_row_by_index(map_, [&](int64_t, int64_t id) {
      if (written.count(id) == 0) del.push_back(id);
    });
  }
  if (info != nullptr) check_delta_info(*info, n, ids, del);
  if (step < step_) {
    throw arg_error("the delta is of step " + std::to_string(step) + ", behind the table's step " +
                    std::to_string(step_) + ": deltas apply in order");
  }
  check_steps(n, last, stamp, step);
  // What can fail comes first: the erase's memory, the counts' memory, then the rows; the rest
  // cannot fail.
  const int64_t m = static_cast<int64_t>(del.size());
  std::vector<int64_t> freed;
  reserve_erase(m, freed);
  if (info != nullptr) seen_.reserve(seen_.size() + static_cast<size_t>(info->ncounts));
  const std::vector<int64_t> r = write_rows(n, ids, rows, st);
  set_step_locked(step);
  write_meta(r, last, freq, stamp);
  erase_reserved(del.data(), m, freed);
  if (info != nullptr) set_delta_info(*info);
}

void Table::check_delta_info(const ct_table_delta_info &d, int64_t n, const int64_t *ids,
                             const std::vector<int64_t> &del) const {
  if (d.base < 0 || d.seq < d.base || d.seq > d.base + 1) {
    throw arg_error("a delta chain position of base " + std::to_string(d.base) + " and seq " + std::to_string(d.seq));
  }
  if (d.base == 0 ? seq_ != 0 : (d.lineage != lineage_ || d.base != seq_)) {
    throw incompatible_error("the delta follows mark " + std::to_string(d.base) +
                             (d.base == 0 ? std::string(" (a whole table)") : " of its lineage") + ", table \"" + name_ +
                             "\" is at mark " + std::to_string(seq_) +
                             (d.base != 0 && d.lineage != lineage_ ? " of another lineage" : "") +
                             ": deltas apply in order, each once, to a copy of their own table");
  }
  Optim next = opt_;
  std::copy(d.opt_params, d.opt_params + 8, next.p);
  next.validate();
  if (next.has_momentum() != opt_.has_momentum()) throw arg_error("the delta's optimizer has another momentum setting");
  if (d.ncounts < 0 || (d.ncounts > 0 && (d.count_ids == nullptr || d.counts == nullptr))) {
    throw arg_error("admission counts: n < 0 or NULL");
  }
  // An id has a row or a count, never both: a counted id is neither written by the delta nor
  // left in the table by it.
  std::unordered_set<int64_t> written(ids, ids + n), gone(del.begin(), del.end());
  std::vector<int64_t> counted;
  for (int64_t i = 0; i < d.ncounts; i++) {
    if (d.counts[i] < 0) throw arg_error("admission counts must be >= 0");
    if (d.counts[i] == 0) continue;
    if (written.count(d.count_ids[i]) != 0) throw arg_error("admission counts given for ids the delta writes");
    if (gone.count(d.count_ids[i]) == 0) counted.push_back(d.count_ids[i]);
  }
  std::vector<int64_t> r(counted.size());
  if (ct_idmap_find(map_, counted.data(), counted.size(), r.data()) != 0) {
    throw arg_error("admission counts given for ids that have rows");
  }
}

void Table::set_delta_info(const ct_table_delta_info &d) {
  std::copy(d.opt_params, d.opt_params + 8, opt_.p);  // (validated by check_delta_info)
  admit_after_ = d.admit_after;
  if (d.counts_replace != 0 || admit_after_ <= 1) forget_counts();
  for (int64_t i = 0; i < d.ncounts; i++) {
    if (d.counts[i] == 0) {
      seen_.erase(d.count_ids[i]);
    } else {
      seen_[d.count_ids[i]] = d.counts[i];  // (room reserved)
    }
    count_changed(d.count_ids[i]);
  }
  lineage_ = d.lineage;
  seq_ = d.seq;
}

void Table::set_delta_chain(uint64_t lineage, int64_t seq) {
  if (lineage == 0 || seq < 0) throw arg_error("a delta chain needs a lineage != 0 and seq >= 0");
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  lineage_ = lineage;
  seq_ = seq;
}

void Table::set_step(int64_t step) {
  if (step < 0) throw arg_error("step must be >= 0, got " + std::to_string(step));
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  // No row's last step or momentum stamp may lie beyond the counter.
  if (step < step_ && (meta_.access() || !stamp_.empty())) {
    each_row_by_index(map_, [&](int64_t r, int64_t id) {
      if ((meta_.access() && meta_.last(r) > step) || (!stamp_.empty() && stamp_[static_cast<size_t>(r)] > step)) {
        throw arg_error("step " + std::to_string(step) + " is below the last step or stamp of id " + std::to_string(id) +
                        ": rows must not lie beyond the step counter");
      }
    });
  }
  set_step_locked(step);
}

void Table::swap_contents(Table &o) {
  if (&o == this) return;
  std::unique_lock<std::shared_mutex> la(mu_, std::defer_lock), lb(o.mu_, std::defer_lock);
  std::lock(la, lb);
  check_open();
  o.check_open();
  if (dim_ != o.dim_ || block_rows_ != o.block_rows_ || device_ != o.device_ || raw_ != o.raw_ ||
      opt_.kind != o.opt_.kind || nstates_ != o.nstates_ || cfg_.layout != o.cfg_.layout || cfg_.flags != o.cfg_.flags) {
    throw arg_error("tables \"" + name_ + "\" and \"" + o.name_ +
                    "\" differ in dim, block_rows, layout, device, kernels, access tracking or optimizer");
  }
  using std::swap;
  swap(init_, o.init_);
  // The parameters only: the kinds are equal, and update reads its table's kind before it
  // takes the lock (writing it, even unchanged, would race with that read).
  swap(opt_.p, o.opt_.p);
  swap(sinit_, o.sinit_);  // initial state values follow the optimizer's parameters
  swap(vmax_, o.vmax_);    // and the bound of the values with the values
  swap(map_, o.map_);
  remaps_++;
  o.remaps_++;
  swap(blocks_, o.blocks_);
  swap(chunks_, o.chunks_);
  swap(chunk_row0_, o.chunk_row0_);
  swap(block_chunk_, o.block_chunk_);
  swap(ptr_, o.ptr_);
  swap(stamp_, o.stamp_);
  swap(nblocks_, o.nblocks_);
  for (int a = 0; a < 3; a++) {
    swap(slab_[a], o.slab_[a]);
    swap(slab_used_[a], o.slab_used_[a]);
  }
  swap(step_, o.step_);
  swap(cfg_, o.cfg_);
  meta_.swap(o.meta_);
  swap(deleted_, o.deleted_);
  swap(admit_after_, o.admit_after_);
  swap(seen_, o.seen_);
  swap(lineage_, o.lineage_);
  swap(seq_, o.seq_);
  swap(seen_changed_, o.seen_changed_);
  swap(all_counts_, o.all_counts_);
}

// ---- admission --------------------------------------------------------------------------------

void Table::set_admission(int64_t k) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  admit_after_ = k;
  if (k <= 1) forget_counts();
}

std::pair<int64_t, int64_t> Table::admission() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  return {admit_after_, static_cast<int64_t>(seen_.size())};
}

void Table::import_counts(int64_t n, const int64_t *ids, const int64_t *counts) {
  if (n < 0) throw arg_error("n must be >= 0");
  if (n > 0 && (ids == nullptr || counts == nullptr)) throw arg_error("ids or counts is NULL");
  for (int64_t i = 0; i < n; i++) {
    if (counts[i] < 1) throw arg_error("admission counts must be >= 1");
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  std::vector<int64_t> r(static_cast<size_t>(n));
  if (ct_idmap_find(map_, ids, static_cast<size_t>(n), r.data()) != 0) {
    throw arg_error("admission counts given for ids that have rows");
  }
  std::unordered_map<int64_t, int64_t> next = seen_;
  for (int64_t i = 0; i < n; i++) next[ids[i]] = counts[i];
  seen_.swap(next);
  for (int64_t i = 0; i < n; i++) count_changed(ids[i]);
}

void Table::lookup_admitting(const Keys &k, std::vector<int64_t> &rows, bool found, at::Tensor &out) {
  const int64_t n = k.n;
  const int64_t *ids = k.ptr();
  Dedupe dd(ids, n);
  const int64_t u = dd.size();
  std::vector<int64_t> urows(static_cast<size_t>(u), -1), occ(static_cast<size_t>(u), 0);
  if (found) {  // then look up only the ids the find missed (another thread may have inserted some)
    for (int64_t i = 0; i < n; i++) urows[static_cast<size_t>(dd.inverse[static_cast<size_t>(i)])] = rows[static_cast<size_t>(i)];
  }
  Missing m(dd.uids.data(), urows.data(), u);
  ct_idmap_find(map_, m.ids.data(), m.ids.size(), m.rows.data());
  m.put(urows.data());
  for (int64_t i = 0; i < n; i++) occ[static_cast<size_t>(dd.inverse[static_cast<size_t>(i)])] += k.counts ? k.counts[i] : 1;
  std::vector<int64_t> admit, admit_at;  // admitted ids and their places in dd.uids
  std::vector<std::pair<int64_t, int64_t>> counted;
  for (size_t j = 0; j < static_cast<size_t>(u); j++) {
    if (urows[j] >= 0) continue;
    auto it = seen_.find(dd.uids[j]);
    const int64_t c = (it == seen_.end() ? 0 : it->second) + occ[j];
    if (c >= admit_after_) {
      admit.push_back(dd.uids[j]);
      admit_at.push_back(static_cast<int64_t>(j));
    } else {
      counted.emplace_back(dd.uids[j], c);
    }
  }
  seen_.reserve(seen_.size() + counted.size());
  const int64_t a = static_cast<int64_t>(admit.size());
  std::vector<int64_t> arows(static_cast<size_t>(a));
  std::vector<uint8_t> anew(static_cast<size_t>(a));
  insert_ids(admit.data(), a, arows.data(), anew.data());
  guarded(admit.data(), anew.data(), a, [&] {
    init_rows(admit.data(), arows.data(), anew.data(), a, false);
    for (int64_t j = 0; j < a; j++) urows[static_cast<size_t>(admit_at[static_cast<size_t>(j)])] = arows[static_cast<size_t>(j)];
    for (int64_t i = 0; i < n; i++) rows[static_cast<size_t>(i)] = urows[static_cast<size_t>(dd.inverse[static_cast<size_t>(i)])];
    gather_rows(ids, rows.data(), n, CT_READ_ZEROS, out);
    for (const auto &p : counted) {
      seen_[p.first] = p.second;
      count_changed(p.first);
    }
  });  // (guarded drops the admitted ids' counts)
  touch(rows.data(), n, step_, k.counts);
}

void Table::drop_unadmitted(std::vector<int64_t> &uids, at::Tensor &g, std::vector<const float *> &gptr,
                             std::vector<int64_t> &rows) {
  const size_t u = uids.size();
  rows.resize(u);
  if (ct_idmap_find(map_, uids.data(), u, rows.data()) == u) return;
  std::vector<int64_t> keep_ids, keep_pos, keep_rows;
  std::vector<const float *> keep_ptr;
  for (size_t j = 0; j < u; j++) {
    if (rows[j] < 0) continue;
    keep_ids.push_back(uids[j]);
    keep_pos.push_back(static_cast<int64_t>(j));
    keep_rows.push_back(rows[j]);
    if (!gptr.empty()) keep_ptr.push_back(gptr[j]);
  }
  // The gradients: a tensor (tensor kernels) or pointers into the batch (raw kernels).
  if (g.defined()) g = g.index_select(0, index_tensor(keep_pos, g.device())).contiguous();
  gptr.swap(keep_ptr);
  uids.swap(keep_ids);
  rows.swap(keep_rows);
}

// ---- eviction and compaction --------------------------------------------------------------------

void Table::metadata(at::Tensor *ids, at::Tensor *last, at::Tensor *freq) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  need_access("metadata");
  // (id, last step's offset << 32 | frequency): the records are read in row order, and the
  // sort carries them, so that nothing is looked up at random afterwards
  std::vector<std::pair<int64_t, int64_t>> p;
  p.reserve(ct_idmap_size(map_));
  each_row_by_index(map_, [&](int64_t r, int64_t id) {
    p.emplace_back(id, static_cast<int64_t>(meta_.rank(r, false)));
  });
  sort_by_first(p);
  const int64_t m = static_cast<int64_t>(p.size());
  *ids = at::empty({m}, at::kLong);
  *last = at::empty({m}, at::kLong);
  *freq = at::empty({m}, at::kLong);
  int64_t *pi = ids->data_ptr<int64_t>(), *pl = last->data_ptr<int64_t>(), *pf = freq->data_ptr<int64_t>();
  for (int64_t i = 0; i < m; i++) {
    const uint64_t v = static_cast<uint64_t>(p[static_cast<size_t>(i)].second);
    pi[i] = p[static_cast<size_t>(i)].first;
    pl[i] = meta_.base() + static_cast<int64_t>(v >> 32);
    pf[i] = static_cast<int64_t>(v & UINT32_MAX);
  }
}

std::pair<at::Tensor, at::Tensor> Table::take(const std::vector<int64_t> &ids, const std::vector<int64_t> &rows) {
  const int64_t v = static_cast<int64_t>(ids.size());
  at::Tensor out = at::empty({v, dim_}, float_opts());
  gather(rows.data(), v, 0, out);
  at::Tensor idt = index_tensor(ids, device_);
  if (v > 0) erase_ids(ids.data(), v);  // none: a shared lock is enough (evict)
  return {idt, out};
}

namespace {
// Eviction selects rows by their metadata without listing every row: mark[r] starts as the
// live flag of index r (from the id map's free list: 1 byte an index, no pass over the map),
// f(r) replaces it for each live row (0: not selected), and one pass over the map exports the
// (id, index) pairs of the selected rows only, returned sorted by id.
template <class F>
std::vector<std::pair<int64_t, int64_t>> select_rows(const ct_idmap *map, std::vector<uint8_t> &mark, F f) {
  size_t count = 0;
  for (size_t r = 0; r < mark.size(); r++) {
    if (!mark[r]) continue;
    mark[r] = f(static_cast<int64_t>(r));
    count += mark[r] != 0;
  }
  std::vector<int64_t> ids(count), idx(count);
  const size_t w = ct_idmap_export_marked(map, mark.data(), mark.size(), ids.data(), idx.data(), count);
  std::vector<std::pair<int64_t, int64_t>> p(w);
  for (size_t i = 0; i < w; i++) p[i] = {ids[i], idx[i]};
  sort_by_first(p);
  return p;
}

std::vector<uint8_t> live_rows(const ct_idmap *map) {
  std::vector<uint8_t> live(static_cast<size_t>(ct_idmap_high_water(map)));
  ct_idmap_live(map, live.data(), live.size());
  return live;
}
}  // namespace

// Every row but the keep kept first: by rank (meta_.rank: recency and frequency, either
// first), descending, then by id. The keep-th rank is selected among the live rows' ranks (8
// bytes a row); the rows ranked below it go, and of those tied with it, the larger ids.
std::vector<std::pair<int64_t, int64_t>> Table::keep_n_victims(int64_t keep, bool lfu, uint64_t *cut_out) const {
  *cut_out = 0;
  if (static_cast<int64_t>(ct_idmap_size(map_)) <= keep) return {};
  std::vector<uint8_t> mark = live_rows(map_);
  uint64_t cut = UINT64_MAX;  // keep 0: every rank is at most the cut
  if (keep > 0) {
    std::vector<uint64_t> ranks;
    ranks.reserve(ct_idmap_size(map_));
    for (size_t r = 0; r < mark.size(); r++) {
      if (mark[r]) ranks.push_back(meta_.rank(static_cast<int64_t>(r), lfu));
    }
    auto nth = ranks.begin() + (keep - 1);
    std::nth_element(ranks.begin(), nth, ranks.end(), std::greater<uint64_t>());
    cut = *nth;
  }
  enum : uint8_t { kKept = 0, kBelow = 1, kTied = 2 };
  int64_t above = 0;  // rows ranked above the cut: all kept
  auto p = select_rows(map_, mark, [&](int64_t r) -> uint8_t {
    const uint64_t k = meta_.rank(r, lfu);
    if (keep == 0 || k < cut) return kBelow;
    above += k > cut;
    return k == cut ? kTied : kKept;
  });
  int64_t keep_tied = keep - above;  // the tied rows with the smaller ids stay
  size_t w = 0;
  for (const auto &x : p) {
    if (mark[static_cast<size_t>(x.second)] == kTied && keep_tied > 0) {
      keep_tied--;
      continue;
    }
    p[w++] = x;
  }
  p.resize(w);
  *cut_out = cut;
  return p;
}

Table::EvictPlan Table::plan_eviction(int32_t policy, int64_t param) const {
  need_access("eviction by age, recency, frequency or budget");
  EvictPlan p;
  p.remaps = remaps_;
  p.base = meta_.base();
  if (policy == CT_EVICT_TTL) {
    std::vector<uint8_t> mark = live_rows(map_);
    p.victims = select_rows(map_, mark, [&](int64_t r) -> uint8_t { return step_ - meta_.last(r) > param; });
    return p;
  }
  int64_t keep = param;
  if (policy == CT_EVICT_BYTES) {
    int64_t per_row = meta_.row_bytes() + kMapBytesPerRow;  // metadata + id map
    for (int64_t w : arr_width_) per_row += w * static_cast<int64_t>(sizeof(float));
    if (!stamp_.empty()) per_row += sizeof(int64_t);
    keep = param / per_row;
  }
  p.victims = keep_n_victims(keep, policy == CT_EVICT_LFU, &p.cut);
  return p;
}

// Eviction chooses its rows under the shared lock (lookups of present ids and reads go on
// meanwhile: choosing reads every row's metadata) and takes them under the exclusive lock,
// after checking each one again by the rule that chose it, now: TTL, its age at the current
// step; keep-N, its rank against the cut. So a row trained in between stays, and rows inserted
// in between are not candidates. Where rows may have moved in between (remaps_: a delete,
// clear, swap, compaction or another eviction) or the metadata's base moved, it chooses again
// under the exclusive lock. Nothing to evict: no exclusive lock at all, except for a byte
// budget, which then compacts the table in the same critical section, with the id map rebuilt
// when it holds more than the budget counted for it; a compaction that cannot get its memory
// leaves the table uncompacted (the eviction stands: Stats' bytes stay above the budget until
// a compaction succeeds).
std::pair<at::Tensor, at::Tensor> Table::evict(int32_t policy, int64_t param) {
  if (policy < CT_EVICT_TTL || policy > CT_EVICT_BYTES) throw arg_error("unknown eviction policy " + std::to_string(policy));
  if (param < 0) throw arg_error("eviction parameter must be >= 0, got " + std::to_string(param));
  EvictPlan p;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    check_open();
    p = plan_eviction(policy, param);
    if (p.victims.empty() && policy != CT_EVICT_BYTES) return take({}, {});
  }
#ifdef CT_TEST_HOOKS
  if (ct_test_evict_between_phases != nullptr) ct_test_evict_between_phases();
#endif
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  if (p.remaps != remaps_ || p.base != meta_.base()) p = plan_eviction(policy, param);
  const bool lfu = policy == CT_EVICT_LFU;
  std::vector<int64_t> ids, rows;
  ids.reserve(p.victims.size());
  rows.reserve(p.victims.size());
  for (const auto &v : p.victims) {
    const int64_t r = v.second;
    if (policy == CT_EVICT_TTL ? step_ - meta_.last(r) <= param : meta_.rank(r, lfu) > p.cut) continue;
    ids.push_back(v.first);
    rows.push_back(r);
  }
  auto out = take(ids, rows);
  if (policy == CT_EVICT_BYTES) {
    const bool shrink = ct_idmap_bytes(map_) > static_cast<size_t>(kMapBytesPerRow) * ct_idmap_size(map_);
    try {
      compact_locked(shrink);
    } catch (const std::bad_alloc &) {
    } catch (const c10::Error &) {  // (out of device memory)
    }
  }
  return out;
}

std::pair<at::Tensor, at::Tensor> Table::remove(const Keys &k, const Keys *last, const Keys *freq) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  if (last != nullptr) need_access("removing rows unchanged since their metadata was read");
  std::vector<int64_t> r(static_cast<size_t>(k.n)), ids, rows;
  ct_idmap_find(map_, k.ptr(), static_cast<size_t>(k.n), r.data());
  Dedupe dd(k.ptr(), k.n);
  std::vector<uint8_t> done(dd.uids.size(), 0);
  for (int64_t i = 0; i < k.n; i++) {
    const size_t u = static_cast<size_t>(dd.inverse[static_cast<size_t>(i)]);
    const int64_t row = r[static_cast<size_t>(i)];
    if (row < 0 || done[u]) continue;
    done[u] = 1;
    if (last != nullptr && (meta_.last(row) != last->ptr()[i] || meta_.freq(row) != freq->ptr()[i])) continue;
    ids.push_back(k.ptr()[i]);
    rows.push_back(row);
  }
  return take(ids, rows);
}

std::vector<at::Tensor> Table::gather_chunk(const std::vector<int64_t> &rows, int64_t nb) const {
  std::vector<at::Tensor> one;
  for (int a = 0; a < narr_; a++) one.push_back(at::zeros({nb * block_rows_, arr_width_[a]}, float_opts()));
  if (rows.empty()) return one;
  const RowPlan p = plan(rows);
  const int64_t m = static_cast<int64_t>(rows.size());
  for (int s = 0; s < nslots(); s++) {
    one[static_cast<size_t>(arr_[s])].narrow(1, off_[s], width_[s]).narrow(0, 0, m).copy_(gather_slot_tensor(p, s));
  }
  return one;
}

void Table::set_chunk(std::vector<at::Tensor> one, int64_t nb) {
  chunks_ = nb > 0 ? std::move(one) : std::vector<at::Tensor>();
  chunk_row0_.assign(nb > 0 ? 1 : 0, 0);
  block_chunk_.assign(static_cast<size_t>(nb), 0);
}

void Table::compact() {
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    check_open();
    compact_locked(false);
  }
  return_free_memory();
}

// Compaction packs the row indices into [0, size) (ct_idmap_pack: each row at or above size
// moves into a free index below it, the others stay where they are) and frees the blocks
// above: it moves as many rows as there were free indices below size. When the id map has
// room for over twice its ids at its maximum load (over 43 bytes an id: more than a map grown
// by inserts ever holds, as after removing a quarter of its ids or more; the map never
// shrinks by itself; a capacity reserved up front goes too), or with shrink_map whenever that
// is smaller, compaction builds a map sized for the ids instead, with the same packed indices.
void Table::compact_locked(bool shrink_map) {
  const size_t m = ct_idmap_size(map_), moves = ct_idmap_pack_moves(map_);
  std::vector<int64_t> from(moves), to(moves);
  const bool rebuild = ct_idmap_capacity(map_) > 2 * m || (shrink_map && ct_idmap_capacity(map_) > m + m / 3);
  if (rebuild || !raw_) ct_idmap_pack(map_, from.data(), to.data(), moves, 0);  // the moves, nothing changed
  const int64_t nb = (static_cast<int64_t>(m) + block_rows_ - 1) / block_rows_;
  // What can fail comes first: the smaller map, and for tensor kernels the rows as they will
  // be, copied into one new chunk of nb blocks (out of GPU memory, say; the old chunks are
  // freed whole after). A failure leaves the table as it was.
  ct_idmap *smaller = rebuild ? packed_copy(map_, from, to) : nullptr;
  std::vector<at::Tensor> one;
  if (!raw_) {
    try {
      std::vector<int64_t> src(m);
      for (size_t i = 0; i < m; i++) src[i] = static_cast<int64_t>(i);
      for (size_t k = 0; k < moves; k++) src[static_cast<size_t>(to[k])] = from[k];
      one = gather_chunk(src, nb);
    } catch (...) {
      ct_idmap_free(smaller);
      throw;
    }
  }
  if (smaller != nullptr) {
    ct_idmap_free(map_);
    map_ = smaller;
  } else {
    ct_idmap_pack(map_, from.data(), to.data(), moves, 1);  // allocates nothing: cannot fail
  }
  for (size_t k = 0; k < moves; k++) {
    if (raw_) {  // (tensor kernels copied theirs into `one` above)
      for (int s = 0; s < nslots(); s++) {
        std::memcpy(slot_ptr(s, to[k]), slot_ptr(s, from[k]), sizeof(float) * static_cast<size_t>(width_[s]));
      }
    }
    meta_.move(to[k], from[k]);
    if (!stamp_.empty()) stamp_[static_cast<size_t>(to[k])] = stamp_[static_cast<size_t>(from[k])];
  }
  const size_t arrays = static_cast<size_t>(nb * narr_), slots = static_cast<size_t>(nb * block_rows_);
  if (raw_) {
    for (size_t i = arrays; i < blocks_.size(); i++) release_slab_block(blocks_[i]);
    blocks_.resize(arrays);
    blocks_.shrink_to_fit();
    ptr_.resize(arrays);
    ptr_.shrink_to_fit();
  } else {
    set_chunk(std::move(one), nb);
  }
  nblocks_ = nb;
  meta_.truncate(nb);
  if (!stamp_.empty()) {
    stamp_.resize(slots);
    if (stamp_.capacity() - slots > slots / 8) stamp_.shrink_to_fit();  // (a copy: worth 1/8)
  }
  remaps_++;
}

// ---- deltas -----------------------------------------------------------------------------------

Table::Delta Table::delta(bool mark) {
  std::unique_lock<std::shared_mutex> ex(mu_, std::defer_lock);
  std::shared_lock<std::shared_mutex> sh(mu_, std::defer_lock);
  if (mark) {
    ex.lock();
  } else {
    sh.lock();
  }
  check_open();
  std::vector<std::pair<int64_t, int64_t>> changed;  // (id, index)
  each_row_by_index(map_, [&](int64_t r, int64_t id) {
    if (meta_.changed(r)) changed.emplace_back(id, r);
  });
  sort_by_first(changed);
  const int64_t m = static_cast<int64_t>(changed.size());
  std::vector<int64_t> ids, rows;
  for (const auto &x : changed) {
    ids.push_back(x.first);
    rows.push_back(x.second);
  }
  Delta d;
  d.snap.step = step_;
  d.snap.ids = index_tensor(ids, at::kCPU);
  d.snap.rows = at::empty({m, dim_}, at::kFloat);
  read_raw(rows, 0, d.snap.rows.data_ptr<float>());
  for (int s = 1; s < nslots(); s++) {
    auto st = at::empty({m, width_[s]}, at::kFloat);
    read_raw(rows, s, st.data_ptr<float>());
    d.snap.states.push_back(st);
  }
  d.meta = at::empty({m, 3}, at::kLong);
  int64_t *pm = d.meta.data_ptr<int64_t>();
  for (int64_t i = 0; i < m; i++) {
    saved_meta(rows[static_cast<size_t>(i)], &pm[3 * i], &pm[3 * i + 1], &pm[3 * i + 2]);
  }
  std::vector<int64_t> del(deleted_);
  sort_by_key(del, [](int64_t x) { return x; });
  del.erase(std::unique(del.begin(), del.end()), del.end());
  std::vector<int64_t> found(del.size()), gone;
  ct_idmap_find(map_, del.data(), del.size(), found.data());
  for (size_t i = 0; i < del.size(); i++) {
    if (found[i] < 0) gone.push_back(del[i]);
  }
  d.deleted = index_tensor(gone, at::kCPU);
  // The admission counts: those changed since the mark, or all of them (before the first mark,
  // or when a change could not be recorded); ascending ids.
  const bool whole = !meta_.tracked() || all_counts_;
  std::vector<std::pair<int64_t, int64_t>> cnt;
  if (whole) {
    cnt.assign(seen_.begin(), seen_.end());
  } else {
    for (int64_t id : seen_changed_) {
      auto it = seen_.find(id);
      cnt.emplace_back(id, it == seen_.end() ? 0 : it->second);
    }
  }
  sort_by_first(cnt);
  std::vector<int64_t> cids(cnt.size()), cvals(cnt.size());
  for (size_t i = 0; i < cnt.size(); i++) {
    cids[i] = cnt[i].first;
    cvals[i] = cnt[i].second;
  }
  d.count_ids = index_tensor(cids, at::kCPU);
  d.counts = index_tensor(cvals, at::kCPU);
  ct_table_delta_info &info = d.info;
  std::copy(opt_.p, opt_.p + 8, info.opt_params);
  info.admit_after = admit_after_;
  info.counts_replace = whole ? 1 : 0;
  info.ncounts = static_cast<int64_t>(cids.size());
  // The chain: changes are tracked since mark seq_ of lineage_; an untracked table's delta is
  // the whole table, and its first mark starts a new lineage.
  info.base = meta_.tracked() ? seq_ : 0;
  info.seq = info.base;
  info.lineage = lineage_;
  if (mark) {
    const uint64_t lineage = meta_.tracked() ? lineage_ : fresh_lineage();
    meta_.mark();  // first, as it may fail (the first mark allocates): then nothing changed
    deleted_.clear();
    seen_changed_.clear();
    all_counts_ = false;
    lineage_ = lineage;
    seq_ = info.base + 1;
    info.lineage = lineage_;
    info.seq = seq_;
  }
  return d;
}

}  // namespace table
}  // namespace ct

// ---- entry points -------------------------------------------------------------------------------

namespace {
// Wraps every tensor of v into out[i] (out may hold NULLs: skipped) or none of them.
void wrap_all(const std::vector<ct_tensor *> &out, const std::vector<at::Tensor> &v) {
  std::vector<ct_tensor> made;
  try {
    for (size_t i = 0; i < v.size(); i++) made.push_back(out[i] != nullptr ? ct::wrap(v[i]) : nullptr);
  } catch (...) {
    for (auto m : made) ct_tensor_free(m);
    throw;
  }
  for (size_t i = 0; i < v.size(); i++) {
    if (out[i] != nullptr) *out[i] = made[i];
  }
}
}  // namespace

extern "C" {

ct_error ct_table_config_get(ct_table_config *out, ct_table h) {
  return guard([&] {
    need_out(out);
    *out = tbl(h).config();
  });
}

ct_error ct_table_save(ct_table h, int64_t chunk_rows, ct_table_sink sink, uintptr_t ctx) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).save(chunk_rows, sink, ctx);
  });
}

ct_error ct_table_export_chunks(ct_table h, int64_t chunk_rows, ct_table_sink sink, uintptr_t ctx) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).export_chunks(chunk_rows, sink, ctx);
  });
}

ct_error ct_table_import(ct_table h, int64_t n, const int64_t *ids, const float *rows,
                         const float *state0, const float *state1, const int64_t *last_step,
                         const int64_t *frequency, const int64_t *stamp) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).import(n, ids, rows, state0, state1, last_step, frequency, stamp);
  });
}

ct_error ct_table_apply_delta(ct_table h, int64_t step, int64_t ndeleted, const int64_t *deleted,
                              int64_t n, const int64_t *ids, const float *rows, const float *state0,
                              const float *state1, const int64_t *last_step, const int64_t *frequency,
                              const int64_t *stamp, const ct_table_delta_info *info) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).apply_delta(step, ndeleted, deleted, n, ids, rows, state0, state1, last_step, frequency, stamp, info);
  });
}

ct_error ct_table_set_step(ct_table h, int64_t step) {
  return guard([&] { tbl(h).set_step(step); });
}

ct_error ct_table_set_delta_chain(ct_table h, uint64_t lineage, int64_t seq) {
  return guard([&] { tbl(h).set_delta_chain(lineage, seq); });
}

ct_error ct_table_check(ct_table h) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).check();
  });
}

ct_error ct_table_swap(ct_table a, ct_table b) {
  return guard([&] { tbl(a).swap_contents(tbl(b)); });
}

ct_error ct_table_set_admission(ct_table h, int64_t k) {
  return guard([&] { tbl(h).set_admission(k); });
}

ct_error ct_table_admission(int64_t *k, int64_t *counted, ct_table h) {
  return guard([&] {
    need_out(k);
    auto a = tbl(h).admission();
    *k = a.first;
    if (counted != nullptr) *counted = a.second;
  });
}

ct_error ct_table_import_counts(ct_table h, int64_t n, const int64_t *ids, const int64_t *counts) {
  return guard([&] { tbl(h).import_counts(n, ids, counts); });
}

ct_error ct_table_metadata(ct_tensor *ids, ct_tensor *last_step, ct_tensor *frequency, ct_table h) {
  return guard([&] {
    need_out(ids);
    need_out(last_step);
    need_out(frequency);
    at::Tensor a, b, c;
    tbl(h).metadata(&a, &b, &c);
    wrap_all({ids, last_step, frequency}, {a, b, c});
  });
}

ct_error ct_table_evict(ct_tensor *ids, ct_tensor *rows, int64_t *n, ct_table h, int32_t policy,
                        int64_t param) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    auto r = tbl(h).evict(policy, param);
    if (policy == CT_EVICT_BYTES) ct::table::return_free_memory();  // (it compacted)
    const int64_t count = r.first.size(0);
    wrap_all({ids, rows}, {r.first, r.second});
    if (n != nullptr) *n = count;
  });
}

ct_error ct_table_remove(ct_tensor *ids, ct_tensor *rows, ct_table h, ct_tensor keys) {
  return ct_table_remove_unchanged(ids, rows, h, keys, nullptr, nullptr);
}

// (last_step and frequency both NULL: ct_table_remove)
ct_error ct_table_remove_unchanged(ct_tensor *ids, ct_tensor *rows, ct_table h, ct_tensor keys,
                                   ct_tensor last_step, ct_tensor frequency) {
  return guard([&] {
    need_out(ids);
    need_out(rows);
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys), l, f;
    const bool expect = last_step != nullptr || frequency != nullptr;
    if (expect) {
      l = ct::table::check_keys(last_step, "last_step");
      f = ct::table::check_keys(frequency, "frequency");
      if (l.n != k.n || f.n != k.n) {
        throw ct::arg_error(std::to_string(k.n) + " keys need as many last steps and frequencies, got " +
                            std::to_string(l.n) + " and " + std::to_string(f.n));
      }
    }
    c10::NoGradGuard no_grad;
    auto r = expect ? t.remove(k, &l, &f) : t.remove(k);
    wrap_all({ids, rows}, {r.first, r.second});
  });
}

ct_error ct_table_compact(ct_table h) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).compact();
  });
}

ct_error ct_table_delta(ct_tensor *ids, ct_tensor *rows, ct_tensor *states, int32_t cap,
                        ct_tensor *meta, ct_tensor *deleted, int64_t *step,
                        ct_table_delta_info *info, ct_tensor *count_ids, ct_tensor *counts,
                        ct_table h, int32_t mark) {
  return guard([&] {
    need_out(ids);
    need_out(rows);
    need_out(meta);
    need_out(deleted);
    if ((count_ids == nullptr) != (counts == nullptr)) throw ct::arg_error("count_ids and counts: one is NULL");
    Table &t = tbl(h);
    // Checked before the delta: a mark must not be set for a delta that is not handed out.
    const int32_t nst = t.num_states();
    if (cap < nst) throw ct::arg_error("states has room for " + std::to_string(cap) + " tensors, the table has " + std::to_string(nst));
    if (nst > 0 && states == nullptr) throw ct::arg_error("states is NULL");
    c10::NoGradGuard no_grad;
    auto d = t.delta(mark != 0);
    std::vector<ct_tensor *> out = {ids, rows, meta, deleted, count_ids, counts};
    std::vector<at::Tensor> v = {d.snap.ids, d.snap.rows, d.meta, d.deleted, d.count_ids, d.counts};
    for (int32_t i = 0; i < nst; i++) {
      out.push_back(&states[i]);
      v.push_back(d.snap.states[static_cast<size_t>(i)]);
    }
    wrap_all(out, v);
    if (step != nullptr) *step = d.snap.step;
    if (info != nullptr) *info = d.info;
  });
}

}  // extern "C"
