// metadata.cc.h: the per-row metadata of a table (RowMeta in meta_, meta.h): with
// CT_TABLE_TRACK_ACCESS, the step of the last training lookup or update and the number of
// training lookups + updates (8 bytes a row), and, from the first delta mark on, the delta epoch
// of the last change (4 bytes a row); and ct_table_metadata(_unsorted), which read them. Lookups holding
// the lock shared update the first two with relaxed atomic stores (no lost row data, possibly
// lost increments under concurrent lookups of one row). Compiled as part of unity_table.cc.

namespace ct {
namespace table {

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

void Table::metadata(at::Tensor *ids, at::Tensor *last, at::Tensor *freq, bool sorted) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  need_access("metadata");
  const int64_t m = static_cast<int64_t>(ct_idmap_size(map_));
  *ids = at::empty({m}, at::kLong);
  *last = at::empty({m}, at::kLong);
  *freq = at::empty({m}, at::kLong);
  int64_t *pi = ids->data_ptr<int64_t>(), *pl = last->data_ptr<int64_t>(), *pf = freq->data_ptr<int64_t>();
  int64_t i = 0;
  // v: the last step's offset << 32 | the frequency (RowMeta::rank)
  auto put = [&](int64_t id, uint64_t v) {
    pi[i] = id;
    pl[i] = meta_.base() + static_cast<int64_t>(v >> 32);
    pf[i] = static_cast<int64_t>(v & UINT32_MAX);
    i++;
  };
  if (!sorted) {
    each_row(map_, [&](int64_t r, int64_t id) { put(id, meta_.rank(r, false)); });
    return;
  }
  // (id, rank): the records are read in row order, and the sort carries them, so that nothing
  // is looked up at random afterwards
  std::vector<std::pair<int64_t, int64_t>> p;
  p.reserve(static_cast<size_t>(m));
  each_row_by_index(map_, [&](int64_t r, int64_t id) {
    p.emplace_back(id, static_cast<int64_t>(meta_.rank(r, false)));
  });
  sort_by_first(p);
  for (const auto &x : p) put(x.first, static_cast<uint64_t>(x.second));
}

}  // namespace table
}  // namespace ct

namespace {
// ct_table_metadata, sorted by id or (_unsorted) not.
ct_error table_metadata(ct_tensor *ids, ct_tensor *last_step, ct_tensor *frequency, ct_table h, bool sorted) {
  return guard([&] {
    need_out(ids);
    need_out(last_step);
    need_out(frequency);
    at::Tensor a, b, c;
    tbl(h).metadata(&a, &b, &c, sorted);
    wrap_all({ids, last_step, frequency}, {a, b, c});
  });
}
}  // namespace

extern "C" {

ct_error ct_table_metadata(ct_tensor *ids, ct_tensor *last_step, ct_tensor *frequency, ct_table h) {
  return table_metadata(ids, last_step, frequency, h, true);
}

ct_error ct_table_metadata_unsorted(ct_tensor *ids, ct_tensor *last_step, ct_tensor *frequency, ct_table h) {
  return table_metadata(ids, last_step, frequency, h, false);
}

}  // extern "C"
