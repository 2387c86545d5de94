// admission.cc.h: admission (ct_table_set_admission): an id gets a row only at its k-th
// training lookup; until then the table counts its sightings (adm_.seen), and its lookups return
// zero rows and its gradients are dropped. An id has a row or a count, never both. Every
// change of a count goes through count_changed, so that deltas carry it. Compiled as part of
// unity_table.cc.

namespace ct {
namespace table {

void Table::set_admission(int64_t k) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  adm_.after = k;
  if (k <= 1) adm_.forget(meta_.tracked());
}

std::pair<int64_t, int64_t> Table::admission() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  return {adm_.after, static_cast<int64_t>(adm_.seen.size())};
}

void Table::import_counts(int64_t n, const int64_t *ids, const int64_t *counts) {
  if (n < 0) throw arg_error("n must be >= 0");
  if (n > 0 && (ids == nullptr || counts == nullptr)) throw arg_error("ids or counts is NULL");
  for (int64_t i = 0; i < n; i++) {
    if (counts[i] < 1) throw arg_error("admission counts must be >= 1");
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  if (n > 0 && adm_.after <= 1) throw arg_error("admission counts given with admission off (set the threshold first)");
  std::vector<int64_t> r(static_cast<size_t>(n));
  if (ct_idmap_find(map_, ids, static_cast<size_t>(n), r.data()) != 0) {
    throw arg_error("admission counts given for ids that have rows");
  }
  std::unordered_map<int64_t, int64_t> next = adm_.seen;
  for (int64_t i = 0; i < n; i++) next[ids[i]] = counts[i];
  adm_.seen.swap(next);
  for (int64_t i = 0; i < n; i++) adm_.count_changed(ids[i], meta_.tracked());
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
    auto it = adm_.seen.find(dd.uids[j]);
    const int64_t c = (it == adm_.seen.end() ? 0 : it->second) + occ[j];
    if (c >= adm_.after) {
      admit.push_back(dd.uids[j]);
      admit_at.push_back(static_cast<int64_t>(j));
    } else {
      counted.emplace_back(dd.uids[j], c);
    }
  }
  adm_.seen.reserve(adm_.seen.size() + counted.size());
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
      adm_.seen[p.first] = p.second;
      adm_.count_changed(p.first, meta_.tracked());
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

}  // namespace table
}  // namespace ct

extern "C" {

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

}  // extern "C"
