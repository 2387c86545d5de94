// evict.cc.h: eviction (ct_table_evict: by age, recency, frequency or a byte budget) and
// removal of given ids (ct_table_remove, _remove_unchanged): the rows chosen by their metadata
// under the shared lock, taken under the exclusive one. Compiled as part of unity_table.cc,
// after compact.cc.h (a budget eviction compacts).

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

}  // namespace

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

}  // namespace table
}  // namespace ct

extern "C" {

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

}  // extern "C"
