// gradients.cc.h: the table's side of autograd (autograd.cc.h calls these members): the rows
// of a forward pass (autograd_rows), lookups that renormalise rows (max_norm), and gradients
// (autograd_grad): pending ones (accept_grad, step_pending, zero_grad) or a fused step.
// Compiled as part of unity_table.cc, after table.cc.h (class Table) and the files listed there.

namespace ct {
namespace table {

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

at::Tensor Table::lookup_renorm(const Keys &k, double max_norm, std::vector<int64_t> *rows_out,
                                uint64_t *remaps_out) {
  const int64_t n = k.n;
  std::vector<int64_t> rows(static_cast<size_t>(n));
  auto out = new_rows(n);
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
  if (remaps_out != nullptr) *remaps_out = remaps_;
  lock.unlock();
  if (rows_out != nullptr) rows_out->swap(rows);
  return to_caller(out, k);
}

namespace {
// grads as dense float32 [n, dim] memory on the device of opts that nothing else refers to:
// grads itself when it is that already (the gradient a backward node made and handed over,
// which no one else holds: saves a copy per table and pass), else a copy (the incoming
// gradient may be a view, expanded, of another type, on the caller's device, or shared).
at::Tensor own_grads(const at::Tensor &grads, int64_t n, int64_t dim, const at::TensorOptions &opts) {
  if (grads.defined() && grads.scalar_type() == at::kFloat && grads.device() == opts.device() &&
      grads.dim() == 2 && grads.size(0) == n && grads.size(1) == dim && grads.is_contiguous() &&
      grads.storage_offset() == 0 && !grads.is_view() && !grads.requires_grad() && grads.use_count() == 1 &&
      grads.storage().use_count() == 1) {
    return grads;
  }
  auto g = at::empty({n, dim}, opts);
  g.copy_(grads);
  return g;
}
}  // namespace

void Table::accept_grad(const at::Tensor &uids, const at::Tensor &grads) {
  at::Tensor g = own_grads(grads, uids.size(0), dim_, float_opts());
  std::lock_guard<std::mutex> l(grads_.mu);
  check_open();
  if (grads_.ids.empty()) {  // the first chunk: its rows, if the last training lookup found them
    grads_.first.valid = grads_.last.valid && grads_.looked_up.defined() &&
                         grads_.looked_up.unsafeGetTensorImpl() == uids.unsafeGetTensorImpl();
    if (grads_.first.valid) {
      grads_.first.rows.swap(grads_.last.rows);
      grads_.first.remaps = grads_.last.remaps;
      grads_.last.valid = false;
      grads_.looked_up = at::Tensor();
    }
  }
  grads_.ids.push_back(uids);
  grads_.grads.push_back(std::move(g));
  grads_.any = true;
}

namespace {
at::Tensor cat_or(const std::vector<at::Tensor> &v, at::Tensor empty) {
  if (v.empty()) return empty;
  return v.size() == 1 ? v[0] : at::cat(v);
}
}  // namespace

bool Table::step_pending() {
  std::lock_guard<std::mutex> l(grads_.mu);
  check_open();
  if (!grads_.any) return false;
  Keys k;
  k.host = cat_or(grads_.ids, at::empty({0}, at::kLong));
  k.n = k.host.size(0);
  k.distinct = grads_.ids.size() == 1;  // each chunk's ids are distinct
  at::Tensor g = cat_or(grads_.grads, at::empty({0, dim_}, float_opts()));
  // Sums the duplicates across passes; throws (keeping them) on bad gradients.
  update(k, g, k.distinct && grads_.first.valid ? &grads_.first : nullptr);
  drop_pending();
  return true;
}

void Table::drop_pending() {
  grads_.ids.clear();
  grads_.grads.clear();
  grads_.any = false;
  grads_.first.valid = false;
}

void Table::zero_grad() {
  std::lock_guard<std::mutex> l(grads_.mu);
  check_open();
  drop_pending();
}

std::pair<at::Tensor, at::Tensor> Table::pending() {
  std::lock_guard<std::mutex> l(grads_.mu);
  check_open();
  at::Tensor ids = cat_or(grads_.ids, at::empty({0}, at::kLong)).contiguous();
  at::Tensor g = cat_or(grads_.grads, at::empty({0, dim_}, float_opts()));
  Dedupe dd(ids.data_ptr<int64_t>(), ids.size(0));
  auto sum = at::zeros({dd.size(), dim_}, float_opts());
  if (ids.size(0) > 0) sum.index_add_(0, index_tensor(dd.inverse, device_), g);
  std::vector<std::pair<int64_t, int64_t>> p(dd.uids.size());  // (id, position)
  for (size_t i = 0; i < p.size(); i++) p[i] = {dd.uids[i], static_cast<int64_t>(i)};
  sort_by_first(p);
  std::vector<int64_t> sorted(p.size()), order(p.size());
  for (size_t i = 0; i < p.size(); i++) {
    sorted[i] = p[i].first;
    order[i] = p[i].second;
  }
  return {index_tensor(sorted, device_), sum.index_select(0, index_tensor(order, device_))};
}

at::Tensor Table::autograd_rows(const at::Tensor &uids, at::Device device, bool train, int32_t default_mode,
                                double max_norm, const int64_t *counts, std::vector<int64_t> *admitted) {
  Keys k;
  k.host = uids;
  k.n = uids.size(0);
  k.device = device;
  k.counts = counts;
  if (train) {
    Scratch<int64_t> rows(0);
    uint64_t remaps = 0;
    at::Tensor out = max_norm > 0 ? lookup_renorm(k, max_norm, &rows.v, &remaps) : lookup(k, &rows.v, &remaps);
    if (admitted != nullptr) {
      admitted->clear();
      admitted->reserve(rows.size());
      for (size_t j = 0; j < rows.size(); j++) {
        if (rows.v[j] >= 0) admitted->push_back(static_cast<int64_t>(j));
      }
    }
    keep_found(uids, rows.v, remaps);
    return out;
  }
  at::Tensor rows = read(k, default_mode).first;
  if (max_norm > 0) renorm_rows(rows, max_norm);
  return rows;
}

void Table::keep_found(const at::Tensor &uids, const std::vector<int64_t> &rows, uint64_t remaps) {
  std::lock_guard<std::mutex> l(grads_.mu);
  FoundRows &f = grads_.last;
  f.valid = std::all_of(rows.begin(), rows.end(), [](int64_t r) { return r >= 0; });
  grads_.looked_up = f.valid ? uids : at::Tensor();
  if (!f.valid) return;
  f.rows.assign(rows.begin(), rows.end());
  f.remaps = remaps;
}

void Table::autograd_grad(const at::Tensor &uids, const at::Tensor &grads, bool fused, bool distinct) {
  if (!fused) {
    accept_grad(uids, grads);  // (pending chunks are distinct ids: the lookups')
    return;
  }
  Keys k;
  k.host = uids;
  k.n = uids.size(0);
  k.distinct = distinct;
  update(k, own_grads(grads, k.n, dim_, grads.options().dtype(at::kFloat)));
}

}  // namespace table
}  // namespace ct
