// delta.cc.h: deltas (ct_table_delta, ct_table_apply_delta): the rows changed and the ids
// deleted since the last mark, with the admission counts changed and the delta chain's place
// (lineage, base, seq), so that a copy of a table follows it. Deletions are logged here
// (erase_ids) from the first mark on. Compiled as part of unity_table.cc.

namespace ct {
namespace table {

void Table::reserve_erase(int64_t n, std::vector<int64_t> &freed) {
  if (meta_.tracked()) {
    freed.resize(static_cast<size_t>(n));
    deltas_.deleted.reserve(deltas_.deleted.size() + static_cast<size_t>(n));
  }
  if (ct_idmap_reserve_free(map_, static_cast<size_t>(n)) != 0) throw std::bad_alloc();
}

int64_t Table::erase_reserved(const int64_t *ids, int64_t n, std::vector<int64_t> &freed) {
  remaps_++;
  const bool track_deletes = meta_.tracked();
  const int64_t r = ct_idmap_erase(map_, ids, static_cast<size_t>(n), track_deletes ? freed.data() : nullptr);
  if (r < 0) throw std::bad_alloc();  // not reached: reserve_erase grew the free list
  for (size_t i = 0; track_deletes && i < static_cast<size_t>(n); i++) {
    if (freed[i] >= 0) deltas_.deleted.push_back(ids[i]);
  }
  return r;
}

int64_t Table::erase_ids(const int64_t *ids, int64_t n) {
  std::vector<int64_t> freed;
  reserve_erase(n, freed);
  return erase_reserved(ids, n, freed);
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
  if (info != nullptr) adm_.seen.reserve(adm_.seen.size() + static_cast<size_t>(info->ncounts));
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
  if (d.base == 0 ? deltas_.seq != 0 : (d.lineage != deltas_.lineage || d.base != deltas_.seq)) {
    throw incompatible_error("the delta follows mark " + std::to_string(d.base) +
                             (d.base == 0 ? std::string(" (a whole table)") : " of its lineage") + ", table \"" + name_ +
                             "\" is at mark " + std::to_string(deltas_.seq) +
                             (d.base != 0 && d.lineage != deltas_.lineage ? " of another lineage" : "") +
                             ": deltas apply in order, each once, to a copy of their own table");
  }
  Optim next = opt_;
  next.p = OptimParams::from_array(next.kind, d.opt_params);
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
  opt_.p = OptimParams::from_array(opt_.kind, d.opt_params);  // (validated by check_delta_info)
  adm_.after = d.admit_after;
  if (d.counts_replace != 0 || adm_.after <= 1) adm_.forget(meta_.tracked());
  for (int64_t i = 0; i < d.ncounts; i++) {
    if (d.counts[i] == 0) {
      adm_.seen.erase(d.count_ids[i]);
    } else {
      adm_.seen[d.count_ids[i]] = d.counts[i];  // (room reserved)
    }
    adm_.count_changed(d.count_ids[i], meta_.tracked());
  }
  deltas_.lineage = d.lineage;
  deltas_.seq = d.seq;
}

void Table::set_delta_chain(uint64_t lineage, int64_t seq) {
  if (lineage == 0 || seq < 0) throw arg_error("a delta chain needs a lineage != 0 and seq >= 0");
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  deltas_.lineage = lineage;
  deltas_.seq = seq;
}

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
  std::vector<int64_t> del(deltas_.deleted);
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
  const bool whole = !meta_.tracked() || adm_.all_changed;
  std::vector<std::pair<int64_t, int64_t>> cnt;
  if (whole) {
    cnt.assign(adm_.seen.begin(), adm_.seen.end());
  } else {
    for (int64_t id : adm_.changed) {
      auto it = adm_.seen.find(id);
      cnt.emplace_back(id, it == adm_.seen.end() ? 0 : it->second);
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
  opt_.p.to_array(opt_.kind, info.opt_params);
  info.admit_after = adm_.after;
  info.counts_replace = whole ? 1 : 0;
  info.ncounts = static_cast<int64_t>(cids.size());
  // The chain: changes are tracked since mark deltas_.seq of deltas_.lineage; an untracked table's delta is
  // the whole table, and its first mark starts a new lineage.
  info.base = meta_.tracked() ? deltas_.seq : 0;
  info.seq = info.base;
  info.lineage = deltas_.lineage;
  if (mark) {
    const uint64_t lineage = meta_.tracked() ? deltas_.lineage : fresh_lineage();
    meta_.mark();  // first, as it may fail (the first mark allocates): then nothing changed
    deltas_.deleted.clear();
    adm_.changed.clear();
    adm_.all_changed = false;
    deltas_.lineage = lineage;
    deltas_.seq = info.base + 1;
    info.lineage = deltas_.lineage;
    info.seq = deltas_.seq;
  }
  return d;
}

}  // namespace table
}  // namespace ct

extern "C" {

ct_error ct_table_apply_delta(ct_table h, int64_t step, int64_t ndeleted, const int64_t *deleted,
                              int64_t n, const int64_t *ids, const float *rows, const float *state0,
                              const float *state1, const int64_t *last_step, const int64_t *frequency,
                              const int64_t *stamp, const ct_table_delta_info *info) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).apply_delta(step, ndeleted, deleted, n, ids, rows, state0, state1, last_step, frequency, stamp, info);
  });
}

ct_error ct_table_set_delta_chain(ct_table h, uint64_t lineage, int64_t seq) {
  return guard([&] { tbl(h).set_delta_chain(lineage, seq); });
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
