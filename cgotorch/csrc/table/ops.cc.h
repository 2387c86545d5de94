// ops.cc.h: the batched operations of class Table: lookup (find, then insert what is absent),
// indices, read, write, update (one optimizer step, raw or tensor kernels), erase, clear, stats,
// snapshot and close.
// Compiled as part of unity_table.cc, after table.cc.h (class Table) and the files listed there.

#include "optim_rows.h"

namespace ct {
namespace table {

at::Tensor Table::lookup(const Keys &k, std::vector<int64_t> *rows_out, uint64_t *remaps_out) {
  auto out = new_rows(k.n);
  lookup_into(k, out, rows_out, remaps_out);
  return to_caller(out, k);
}

void Table::lookup_into(const Keys &k, at::Tensor &out, std::vector<int64_t> *rows_out, uint64_t *remaps_out) {
  const int64_t n = k.n;
  Scratch<int64_t> scratch_rows(static_cast<size_t>(n), 0);
  std::vector<int64_t> &rows = scratch_rows.v;
  uint64_t remaps;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    check_open();
    if (find_rows(k.ptr(), n, rows.data()) == static_cast<size_t>(n)) {
      gather(rows.data(), n, 0, out);
      touch(rows.data(), n, step_, k.counts);
      if (rows_out != nullptr) rows_out->swap(rows);
      if (remaps_out != nullptr) *remaps_out = remaps_;
      return;
    }
    remaps = remaps_;
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  lookup_inserting(k, rows, remaps == remaps_, out, [] {});
  if (rows_out != nullptr) rows_out->swap(rows);
  if (remaps_out != nullptr) *remaps_out = remaps_;
}

template <class F>
void Table::lookup_inserting(const Keys &k, std::vector<int64_t> &rows, bool found, at::Tensor &out, F then) {
  const int64_t n = k.n;
  const int64_t *ids = k.ptr();
  if (adm_.after > 1) {
    lookup_admitting(k, rows, found, out);
    then();  // if this throws, the ids admitted stay (initialised; their counts are spent)
    return;
  }
  // Insert the ids the find missed (another thread may have inserted some since). Without a
  // valid find (a remap since, or none: lookup_renorm), find them now: on present ids a find
  // is cheaper than a find-or-insert (see find_then_insert).
  if (!found) find_rows(ids, n, rows.data());
  std::vector<uint8_t> is_new(static_cast<size_t>(n));
  insert_missing(ids, n, rows.data(), is_new.data());
  guarded(ids, is_new.data(), n, [&] {
    init_rows(ids, rows.data(), is_new.data(), n, false);
    gather(rows.data(), n, 0, out);
    touch(rows.data(), n, step_, k.counts);
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
    find_rows(k.ptr(), n, rows);
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
  auto out = new_rows(k.n);
  auto found = at::empty({k.n}, at::kBool);
  read_into(k, mode, out, reinterpret_cast<uint8_t *>(found.data_ptr<bool>()));
  return {to_caller(out, k), found.device() == k.device ? found : found.to(k.device)};
}

void Table::read_into(const Keys &k, int32_t mode, at::Tensor &out, uint8_t *found) {
  check_mode(mode);
  const int64_t n = k.n;
  std::vector<int64_t> rows(static_cast<size_t>(n));
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    check_open();
    find_rows(k.ptr(), n, rows.data());
    gather_rows(k.ptr(), rows.data(), n, mode, out);
  }
  if (found == nullptr) return;
  for (int64_t i = 0; i < n; i++) found[i] = rows[static_cast<size_t>(i)] >= 0;
}

void Table::write(const Keys &k, const at::Tensor &values_in) {
  const int64_t n = k.n;
  at::Tensor values = check_rows(values_in, "values", n, dim_);
  values = raw_ ? values.to(at::kCPU) : values.to(device_);
  const double most = check_writable(values);
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
  raise_max(0, most);
  // A momentum buffer decays by m^k as assign catches it up: with m above 1 it grows.
  if (opt_.has_momentum() && opt_.p.momentum > 1) vmax_[1] = std::numeric_limits<double>::infinity();
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

void Table::update(const Keys &k, const at::Tensor &grads_in, const FoundRows *found) {
  const int64_t n = k.n;
  at::Tensor grads = check_rows(grads_in, "grads", n, dim_);
  if (opt_.kind == CT_OPT_NONE) throw arg_error("table \"" + name_ + "\" has no optimizer");
  grads = raw_ ? grads.to(at::kCPU) : grads.to(device_);
  // Sum the gradients of repeated ids, index_add style (never a sparse add_): in batch order.
  Dedupe dd = k.distinct ? Dedupe(k.ptr(), n, DistinctIds{}) : Dedupe(k.ptr(), n);
  int64_t u = dd.size();
  // Raw kernels: the gradient of a distinct id is read where it is (no copy of the batch): the
  // batch's own row for an id that occurs once, else a row of sums (first occurrence, plus the
  // others in batch order) in a small buffer. Before: a zero-filled [u, dim] copy of the whole
  // batch, which cost a third of an update at dim 64 (allocation, page faults, a pass).
  at::Tensor g;
  Scratch<const float *> scratch_gptr(0);
  std::vector<const float *> &gptr = scratch_gptr.v;
  std::vector<float> sums;
  // The largest |gradient| (NaN and Inf refused), times the most times an id can repeat: a
  // bound on every summed gradient.
  const double G = max_abs_finite(grads, "gradients") * static_cast<double>(n - u + 1);
  if (raw_) {
    const float *src = grads.data_ptr<float>();
    gptr.assign(static_cast<size_t>(u), nullptr);
    if (u < n) {
      // Ids occurring more than once get a row of sums.
      Scratch<int32_t> scratch_count(static_cast<size_t>(u), 0), scratch_slot(static_cast<size_t>(u), -1);
      std::vector<int32_t> &count = scratch_count.v, &slot = scratch_slot.v;
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
  if (step_ == std::numeric_limits<int64_t>::max()) {
    throw arg_error("the step counter is at its largest value (2^63 - 1): no step can follow");
  }
  Scratch<int64_t> scratch_rows(static_cast<size_t>(u), 0);
  std::vector<int64_t> &rows = scratch_rows.v;
  const bool admitting = adm_.after > 1;
  if (admitting) {  // no new ids: the rows of the admitted ones
    drop_unadmitted(dd.uids, g, gptr, rows);
    u = dd.size();
  }
  Scratch<uint8_t> scratch_is_new(static_cast<size_t>(u), 0);  // (the admitting path sets none)
  std::vector<uint8_t> &is_new = scratch_is_new.v;
  const int64_t t = step_ + 1;
  const StepConsts c = opt_.begin(t);
  const int64_t *ids = dd.uids.data();
  // Whether this step can overflow at all, given every stored value's bound and the gradients'
  // (with a margin for float rounding): almost never, and then the raw kernels need not keep
  // the rows to put back.
  double bounds[3];
  const bool safe = opt_.step_bound(c, vmax_, G, bounds) < FLT_MAX / 4;
  if (!admitting) {
    if (found != nullptr && found->remaps == remaps_ && static_cast<int64_t>(found->rows.size()) == u) {
      std::copy(found->rows.begin(), found->rows.end(), rows.begin());  // no id has moved since
    } else {
      find_then_insert(ids, u, rows.data(), is_new.data());
    }
  }
  guarded(ids, is_new.data(), u, [&] {
    init_rows(ids, rows.data(), is_new.data(), u, false);
    if (raw_) {
      step_raw(c, gptr.data(), rows.data(), u, safe, bounds);
    } else {
      step_tensor(c, g, rows);
    }
  });
  set_step_locked(t);
  touch(rows.data(), u, t);
  modified(rows.data(), u);
}

// SGD momentum: row r's weight w and buffer buf brought in place from its stamp up to step now
// (the moves of the steps it missed, at the present rate); the caller sets the stamp.
void Table::catch_up_raw(int64_t r, int64_t now, float *w, float *buf) const {
  const int64_t kk = now - stamp_[static_cast<size_t>(r)];
  if (kk <= 0) return;
  double S, decay;
  opt_.catch_up_factors(kk, &S, &decay);
  const float mv = static_cast<float>(-opt_.p.lr * S), dc = static_cast<float>(decay);
  for_lanes(dim_, [&](int64_t j, auto L) {
    const auto b = L.load(buf + j);
    L.store(w + j, L.load(w + j) + mv * b);
    L.store(buf + j, b * dc);
  });
}

// The same for gathered rows: w and buf are their weights and buffers.
void Table::catch_up_tensor(const std::vector<int64_t> &rows, int64_t now, at::Tensor &w, at::Tensor &buf) const {
  at::Tensor mv, dc;
  momentum_factors(rows, now, &mv, &dc);
  w.sub_(buf * mv);
  buf.mul_(dc);
}

namespace {
// The message of an update rejected because a result would not be finite.
std::string overflow_message(const std::string &name) {
  return "the update would make rows or optimizer states of table \"" + name +
         "\" NaN or Inf (float32 overflow): the batch is rejected";
}
}  // namespace

// One step of the raw kernels. A safe step (see update) cannot overflow; for a rule that
// tracks_bounds it runs as it is and keeps step_bound's bounds in vmax_, at no cost. Otherwise
// each row's largest magnitude per slot is taken after its step (the row is in the L1 cache
// then; max_abs_bits, above kFltMaxBits for NaN or Inf): it raises vmax_ and finds an
// overflow. A step that is not safe also copies each row's values (and stamp) aside as it
// reaches the row: when a row overflowed, every row of the batch is put back and the update is
// rejected, as a NaN gradient is.
void Table::step_raw(const StepConsts &c, const float *const *gp, const int64_t *rows, int64_t u, bool safe,
                     const double bounds[3]) {
  const int64_t t = c.t;
  const bool momentum = opt_.has_momentum();
  const bool exact = !safe || !opt_.tracks_bounds();
  const int ns = nslots();
  const int64_t rowf = width_[0] + width_[1] + width_[2];
  // From the thread's scratch pool (a fresh buffer would fault its pages in every time; the
  // pool's are freed by a release), and none for a safe step.
  Scratch<float> undo;
  Scratch<int64_t> undo_stamp;
  if (!safe) undo.v = scratch_pool<float>().take(static_cast<size_t>(u * rowf));
  if (!safe && momentum) undo_stamp.v = scratch_pool<int64_t>().take(static_cast<size_t>(u));
  float *const saved = undo.data();
  int64_t *const saved_stamp = undo_stamp.data();
  std::atomic<int32_t> most[3] = {{0}, {0}, {0}};
  // The slots' addresses and bytes, taken once (the kernel's stores and the undo copies may
  // write any float, so the compiler would load the table's fields again for every row).
  SlotAddr at[3] = {slot_addr(0), slot_addr(0), slot_addr(0)};
  size_t bytes[3] = {0, 0, 0};
  for (int s = 0; s < ns; s++) {
    at[s] = slot_addr(s);
    bytes[s] = sizeof(float) * static_cast<size_t>(width_[s]);
  }
  // Always inlined: GCC deletes calls of a function that only prefetches (see prefetch_lines).
  auto ahead = [&](int64_t r) __attribute__((always_inline)) {
    for (int s = 0; s < ns; s++) prefetch_lines(at[s](r), bytes[s], true);
  };
  // The loop over the rows, compiled once per rule with its kernel inline (optim_rows.h).
  with_row_kernel(opt_, c, [&](const auto &kernel) {
    auto body = [&](int64_t begin, int64_t end) {
      int32_t m[3] = {0, 0, 0};
      for (int64_t i = begin; i < end && i < begin + kAhead; i++) ahead(rows[i]);
      for (int64_t i = begin; i < end; i++) {
        if (i + kAhead < end) ahead(rows[i + kAhead]);
        const int64_t r = rows[i];
        float *w = at[0](r);
        float *s0 = nstates_ > 0 ? at[1](r) : nullptr;
        float *s1 = nstates_ > 1 ? at[2](r) : nullptr;
        if (!safe) {
          float *keep = saved + i * rowf;
          for (int s = 0; s < ns; s++) {
            std::memcpy(keep, at[s](r), bytes[s]);
            keep += width_[s];
          }
          if (momentum) saved_stamp[i] = stamp_[static_cast<size_t>(r)];
        }
        if (momentum) {
          catch_up_raw(r, t - 1, w, s0);  // steps stamp+1 .. t-1 had no gradient for this row
          stamp_[static_cast<size_t>(r)] = t;
        }
        kernel(gp[i], w, s0, s1);
        if (!exact) continue;
        for (int s = 0; s < ns; s++) m[s] = std::max(m[s], max_abs_bits(at[s](r), width_[s]));
      }
      for (int s = 0; s < ns && exact; s++) raise_atomic(most[s], m[s]);
    };
    for_work(u, rowf + dim_, body);  // (the row's slots and its gradient)
  });
  if (!exact) {
    for (int s = 0; s < ns; s++) raise_max(s, bounds[s]);
    return;
  }
  int32_t worst = 0;
  for (int s = 0; s < ns; s++) worst = std::max(worst, most[s].load());
  if (worst <= kFltMaxBits) {
    for (int s = 0; s < ns; s++) note_max(s, most[s].load());
    return;
  }
  if (safe) {  // step_bound said it could not happen: nothing to put back with
    for (double &v : vmax_) v = std::numeric_limits<double>::infinity();
    throw std::logic_error("table \"" + name_ + "\": an update the bounds called safe overflowed");
  }
  for (int64_t i = 0; i < u; i++) {
    const int64_t r = rows[i];
    const float *keep = saved + i * rowf;
    for (int s = 0; s < ns; s++) {
      std::memcpy(slot_ptr(s, r), keep, sizeof(float) * static_cast<size_t>(width_[s]));
      keep += width_[s];
    }
    if (momentum) stamp_[static_cast<size_t>(r)] = saved_stamp[i];
  }
  throw arg_error(overflow_message(name_));
}

void Table::step_tensor(const StepConsts &c, const at::Tensor &g, const std::vector<int64_t> &rows) {
  if (rows.empty()) return;
  const RowPlan p = plan(rows);
  at::Tensor w = gather_slot_tensor(p, 0);
  at::Tensor s0, s1;
  if (nstates_ > 0) s0 = gather_slot_tensor(p, 1);
  if (nstates_ > 1) s1 = gather_slot_tensor(p, 2);
  if (opt_.has_momentum()) catch_up_tensor(rows, c.t - 1, w, s0);
  opt_.apply(c, g, w, nstates_ > 0 ? &s0 : nullptr, nstates_ > 1 ? &s1 : nullptr);
  // Everything is computed (into gathered copies); an overflow is rejected before the scatters.
  double most[3] = {0, 0, 0};
  const at::Tensor *v[3] = {&w, &s0, &s1};
  for (int s = 0; s < nslots(); s++) {
    most[s] = v[s]->abs().max().item<double>();  // NaN when one is
    if (!std::isfinite(most[s])) throw arg_error(overflow_message(name_));
  }
  for (int s = 0; s < nslots(); s++) raise_max(s, most[s]);
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
    deltas_.deleted.insert(deltas_.deleted.end(), ids.begin(), ids.end());
  }
  ct_idmap_clear(map_);
  remaps_++;
  adm_.forget(meta_.tracked());
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
  bytes += meta_.bytes() + static_cast<int64_t>(deltas_.deleted.capacity() * sizeof(int64_t) + adm_.seen.size() * 32 +
                                                adm_.changed.size() * 24);
  s.bytes = bytes;
  s.dim = dim_;
  s.step = step_;
  s.num_states = nstates_;
  s.optimizer = opt_.kind;
  return s;
}

// (id, row index) of every id, ascending by id (16 bytes an id, twice that while sorting).
std::vector<std::pair<int64_t, int64_t>> Table::rows_by_id() const {
  const size_t m = ct_idmap_size(map_);
  std::vector<std::pair<int64_t, int64_t>> p(m);
  {
    std::vector<int64_t> ids(m), idx(m);
    ct_idmap_export(map_, ids.data(), idx.data(), m);
    for (size_t i = 0; i < m; i++) p[i] = {ids[i], idx[i]};
  }
  sort_by_first(p);
  return p;
}

Snapshot Table::snapshot() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  auto p = rows_by_id();
  const size_t m = p.size();
  Snapshot snap;
  snap.step = step_;
  const int64_t mm = static_cast<int64_t>(m);
  snap.ids = at::empty({mm}, at::kLong);
  std::vector<int64_t> rows(m);
  int64_t *pid = snap.ids.data_ptr<int64_t>();
  for (size_t i = 0; i < m; i++) {
    pid[i] = p[i].first;
    rows[i] = p[i].second;
  }
  std::vector<std::pair<int64_t, int64_t>>().swap(p);
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

// The snapshot's rows a chunk at a time: per chunk, the ids, their rows and states gathered
// (into host buffers reused by every chunk; tables on a GPU gather there and copy the chunk
// over) and, with access tracking, their last steps and frequencies.
void Table::export_chunks(int64_t chunk_rows, ct_table_sink sink, uintptr_t ctx) {
  if (sink == nullptr) throw arg_error("sink is NULL");
  if (chunk_rows <= 0) throw arg_error("chunk_rows must be > 0, got " + std::to_string(chunk_rows));
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  const auto p = rows_by_id();
  const int64_t m = static_cast<int64_t>(p.size());
  const int64_t cr = std::min<int64_t>(chunk_rows, m);
  const size_t ucr = static_cast<size_t>(cr);
  const bool meta = meta_.access();
  std::vector<int64_t> ids(ucr), rows(ucr), last(meta ? ucr : 0), freq(meta ? ucr : 0);
  std::vector<at::Tensor> buf(static_cast<size_t>(nslots()));
  for (int s = 0; s < nslots(); s++) buf[static_cast<size_t>(s)] = at::empty({cr, width_[s]}, float_opts());
  ct_table_chunk c{};
  c.kind = CT_CHUNK_ROWS;
  c.num_states = nstates_;
  c.total_rows = m;
  c.step = step_;
  for (int64_t b = 0; b < m; b += cr) {
    const int64_t n = std::min(cr, m - b);
    for (int64_t i = 0; i < n; i++) {
      const auto &x = p[static_cast<size_t>(b + i)];
      ids[static_cast<size_t>(i)] = x.first;
      rows[static_cast<size_t>(i)] = x.second;
      if (meta) {
        last[static_cast<size_t>(i)] = meta_.last(x.second);
        freq[static_cast<size_t>(i)] = meta_.freq(x.second);
      }
    }
    std::vector<at::Tensor> host(buf.size());
    for (size_t s = 0; s < buf.size(); s++) {
      auto out = buf[s].narrow(0, 0, n);
      gather(rows.data(), n, static_cast<int>(s), out);
      host[s] = device_.is_cpu() ? out : out.to(at::kCPU);
    }
    c.offset = b;
    c.count = n;
    c.ids = ids.data();
    c.rows = host[0].data_ptr<float>();
    for (int s = 0; s < 2; s++) c.states[s] = s < nstates_ ? host[static_cast<size_t>(s + 1)].data_ptr<float>() : nullptr;
    c.last_step = meta ? last.data() : nullptr;
    c.frequency = meta ? freq.data() : nullptr;
    if (sink(ctx, &c) != 0) throw std::runtime_error("aborted: the sink stopped the export");
  }
}

void Table::close() {
  closed_.store(true, std::memory_order_release);
  {
    std::unique_lock<std::shared_mutex> lock(mu_);  // waits for the operations in flight
    free_storage();
  }
  {
    std::lock_guard<std::mutex> g(grads_.mu);
    std::vector<at::Tensor>().swap(grads_.ids);
    std::vector<at::Tensor>().swap(grads_.grads);
    grads_.any = false;
    grads_.looked_up = at::Tensor();
    grads_.last = FoundRows();
    grads_.first = FoundRows();
  }
  // Prefetches in flight finish (with "closed: " if they had not started) before close returns.
  std::unique_lock<std::mutex> l(prefetches_.mu);
  prefetches_.cv.wait(l, [this] { return prefetches_.tasks == 0; });
  prefetches_.pending.clear();
}

}  // namespace table
}  // namespace ct
