// checkpoint.cc.h: the checkpoint stream (ct_table_save: rows in chunks, then the admission
// counts), imports (ct_table_import: what a load writes), the step counter, the table's
// configuration as it is (ct_table_config_get), and ct_table_swap, with which a load replaces
// a table's contents. What a save writes a load reads: both check the same (check_values).
// Compiled as part of unity_table.cc.

namespace ct {
namespace table {

ct_table_config Table::config() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  ct_table_config c = cfg_;
  opt_.p.to_array(opt_.kind, c.opt_params);  // the rule's parameters as they are (set_lr)
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
  auto header = [&](int32_t kind) {  // what every chunk of the stream carries
    ct_table_chunk h{};
    h.kind = kind;
    h.num_states = nstates_;
    h.total_rows = m;
    h.total_counts = static_cast<int64_t>(adm_.seen.size());
    h.step = step_;
    h.delta_lineage = deltas_.lineage;
    h.delta_seq = deltas_.seq;
    return h;
  };
  ct_table_chunk c = header(CT_CHUNK_ROWS);
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
  c = header(CT_CHUNK_COUNTS);
  std::vector<int64_t> counts(ucr);
  c.ids = ids.data();
  c.counts = counts.data();
  auto it = adm_.seen.begin();
  for (int64_t off = 0;; off += cr) {
    int64_t cnt = 0;
    for (; it != adm_.seen.end() && cnt < cr; ++it, ++cnt) {
      ids[static_cast<size_t>(cnt)] = it->first;
      counts[static_cast<size_t>(cnt)] = it->second;
    }
    c.offset = off;
    c.count = cnt;
    emit();
    if (it == adm_.seen.end()) break;
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
// Every last step and stamp at most the step counter (import and apply_delta).
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
  swap(deltas_, o.deltas_);
  swap(adm_, o.adm_);
}

}  // namespace table
}  // namespace ct

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

ct_error ct_table_set_step(ct_table h, int64_t step) {
  return guard([&] { tbl(h).set_step(step); });
}

ct_error ct_table_swap(ct_table a, ct_table b) {
  return guard([&] { tbl(a).swap_contents(tbl(b)); });
}

}  // extern "C"
