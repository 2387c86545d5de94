// autograd.cc.h: the embedding tables inside libtorch's autograd graph (ct_table_forward,
// ct_table_forward_bag, ct_table_step, ct_table_zero_grad, ct_table_pending_grad).
//
// Design
//   One differentiable primitive, unique_rows: the rows of a batch's distinct ids as a [U, dim]
//   tensor whose gradient goes to the table. Its backward node (RowsBackward) receives the
//   gradient of those U rows, already summed per distinct id by libtorch, and hands it to the
//   table: kept as a pending gradient until ct_table_step (accumulate mode: several backward
//   passes or micro-batches add up; duplicates across passes are summed by the step), or applied
//   as one optimizer step at the end of the backward pass (fused mode: see FusedSum).
//   Both lookups are compositions on top of it, so libtorch supplies their backward:
//     - Embedding: rows[inverse[i]] at position i, shaped ids.shape + [dim]: for CPU ids a raw
//       copy with its own backward node (GatherBackward: the bits of index_select's, a dense
//       index_add_ into [U, dim] from zeros), for device ids rows.index_select(0, inverse)
//       (never a sparse add_, which loses the single-entry gradient of a dim-1 table in this
//       libtorch: see the regression test).
//     - EmbeddingBag: sum and mean bags of CPU ids (per-sample weights without a gradient)
//       are pooled from the [U, dim] rows in raw loops with their own backward node
//       (bags.cc.h); the others (max, device ids, weights with a gradient) go through
//       at::embedding_bag on the rows with the ids remapped to 0..U-1 and its backward.
//   A padding id is left out of the distinct ids (never looked up, never inserted, no
//   gradient): its occurrences point at an extra constant zero row U (Embedding) or at U with
//   embedding_bag's padding_idx = U (left out of the reduction and of the mean's count).
//
// Joining the graph: RecIS-style implementations pass a dummy tensor with requires_grad as an
//   input of a torch::autograd::Function so that its output gets a grad_fn. Here the backward
//   node is built directly (a torch::autograd::Node with no next edges, attached to the rows
//   with set_history), which makes the rows part of the graph without an anchor tensor and
//   lets the node hold the table (a std::shared_ptr) and the distinct ids as plain members.
//   The node runs whenever a backward pass reaches the rows; an autograd::grad call for other
//   inputs does not run it (the table is not among its inputs), as it should.
//
// Only training lookups with grad mode on build a node; evaluation lookups are plain reads.
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/version.h>

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "internal.h"

namespace ct {
namespace table {
namespace {

using torch::autograd::variable_list;

struct Options {
  bool train = false, fused = false, has_padding = false;
  int64_t padding_id = 0;
  int32_t default_mode = CT_READ_ZEROS;
  double max_norm = 0;
};

Options check_options(const ct_table_forward_options *o, const Table &t) {
  if (o == nullptr) throw arg_error("forward options are NULL");
  Options r;
  r.train = o->train != 0;
  r.fused = o->fused != 0;
  r.has_padding = o->has_padding_id != 0;
  r.padding_id = o->padding_id;
  r.default_mode = o->default_mode;
  r.max_norm = o->max_norm;
  if (r.default_mode != CT_READ_ZEROS && r.default_mode != CT_READ_INITIAL) {
    throw arg_error("unknown read default " + std::to_string(r.default_mode));
  }
  if (!(r.max_norm >= 0) || r.max_norm == std::numeric_limits<double>::infinity()) {
    throw arg_error("max_norm must be finite and >= 0 (0: off), got " + std::to_string(r.max_norm));
  }
  if (r.train && r.fused && !t.has_optimizer()) {
    throw arg_error("fused mode needs a table with an optimizer");
  }
  return r;
}

at::Tensor long_tensor(const std::vector<int64_t> &v) {
  auto t = at::empty({static_cast<int64_t>(v.size())}, at::kLong);
  if (!v.empty()) std::memcpy(t.data_ptr<int64_t>(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

// The ids of a lookup: int64, any shape, any device; a contiguous host copy for the id map.
at::Tensor host_ids(const at::Tensor &ids) {
  if (ids.scalar_type() != at::kLong) {
    throw arg_error(std::string("ids must be int64, got ") + c10::toString(ids.scalar_type()));
  }
  return ids.detach().to(at::kCPU).contiguous().reshape({-1});
}

// Fused mode: one optimizer step per backward pass and table, on the sum of the gradients of
// every lookup of the table the pass reaches (what accumulate mode and a Step give, and what
// torch gives a weight indexed twice; a step per lookup had stepped such a table several times).
// The first node of a pass to reach a table queues a final callback on the pass, which the
// engine runs once every node has run, on the thread that called backward; later nodes of the
// pass add to the same sum. A pass is told apart by its graph task (the address of its
// execution info, unique while it runs). A pass that fails before its end destroys its
// callbacks unrun, and with them its sums (the destructor forgets the pass).
class FusedSum {
 public:
  using Key = std::pair<const void *, const Table *>;

  // Adds the gradient g of rows uids to the current pass's sum for t (queued on first use).
  static void add(const std::shared_ptr<Table> &t, const at::Tensor &uids, const at::Tensor &g) {
    const void *pass = torch::autograd::get_current_graph_task_exec_info();
    if (pass == nullptr) throw std::runtime_error("a fused table gradient outside a backward pass");
    std::shared_ptr<FusedSum> sum;  // (declared before the lock: never destroyed under it)
    std::lock_guard<std::mutex> lock(mu());
    const Key key{pass, t.get()};
    sum = live()[key].lock();
    if (!sum) {
      sum = std::shared_ptr<FusedSum>(new FusedSum(t, key));
      torch::autograd::Engine::get_default_engine().queue_callback([sum] { sum->apply(); });
      live()[key] = sum;
    }
    sum->uids_.push_back(uids);
    sum->grads_.push_back(g.to(at::kFloat));
  }

  ~FusedSum() {
    std::lock_guard<std::mutex> lock(mu());
    auto it = live().find(key_);
    if (it != live().end() && it->second.expired()) live().erase(it);
  }

 private:
  FusedSum(std::shared_ptr<Table> t, Key key) : table_(std::move(t)), key_(key) {}

  // The step (the pass's end: no node of it adds any more).
  void apply() {
    std::vector<at::Tensor> uids, grads;
    {
      std::lock_guard<std::mutex> lock(mu());
      uids.swap(uids_);
      grads.swap(grads_);
    }
    if (uids.empty()) return;
    if (uids.size() == 1) {  // one lookup of the table in the pass: its ids are distinct
      table_->autograd_grad(uids[0], grads[0], /*fused=*/true, /*distinct=*/true);
      return;
    }
    table_->autograd_grad(at::cat(uids), at::cat(grads), /*fused=*/true, /*distinct=*/false);
  }

  static std::mutex &mu() {
    static std::mutex m;
    return m;
  }
  static std::map<Key, std::weak_ptr<FusedSum>> &live() {
    static std::map<Key, std::weak_ptr<FusedSum>> m;
    return m;
  }

  std::shared_ptr<Table> table_;
  Key key_;
  std::vector<at::Tensor> uids_, grads_;
};

// Receives the gradient of the rows of distinct ids and hands it to the table: only that of the
// ids that had a row at the lookup (keep: their positions, undefined when all had). An id that
// admission kept out got a zero row that is no row of the table; its gradient is dropped, even
// if the id is admitted before the step (a gradient taken against a zero row applied to its
// initial row would be no gradient of it).
struct RowsBackward : torch::autograd::Node {
  RowsBackward(std::shared_ptr<Table> t, at::Tensor uids, bool fused)
      : table(std::move(t)), uids(std::move(uids)), fused(fused) {}

  variable_list apply(variable_list &&grads) override {
    if (!uids.defined()) {
      throw std::runtime_error("the table lookup's graph was freed by an earlier backward pass (retain_graph)");
    }
    at::Tensor g = grads.empty() ? at::Tensor() : std::move(grads[0]);  // (the only reference: see own_grads)
    c10::NoGradGuard no_grad;
    if (!g.defined()) g = at::zeros({uids.size(0), table->dim()}, at::kFloat);
    if (keep.defined()) {
      at::Tensor ids = uids.index_select(0, keep);
      g = g.index_select(0, keep.to(g.device()));
      return hand_over(ids, g);
    }
    return hand_over(uids, g);
  }

  variable_list hand_over(const at::Tensor &ids, const at::Tensor &g) {
    if (fused) {
      FusedSum::add(table, ids, g);
    } else {
      table->autograd_grad(ids, g, /*fused=*/false, /*distinct=*/true);
    }
    return {};  // no next edges
  }
  std::string name() const override { return "gorec::TableRowsBackward"; }
  void release_variables() override {
    uids = at::Tensor();
    keep = at::Tensor();
  }

  std::shared_ptr<Table> table;
  at::Tensor uids;  // int64 [U], CPU
  at::Tensor keep;  // int64 [K], CPU: the positions of the admitted ids; undefined: all
  bool fused;
};

// Admission kept some of uids out at a training lookup (admitted: the positions of the others):
// the rows' backward node, if any, hands on only the admitted ids' gradients.
void keep_admitted(const at::Tensor &rows, const at::Tensor &uids, const std::vector<int64_t> &admitted) {
  if (static_cast<int64_t>(admitted.size()) == uids.size(0)) return;
  auto *node = dynamic_cast<RowsBackward *>(rows.grad_fn().get());
  if (node != nullptr) node->keep = long_tensor(admitted);
}

// Adds to counts[j] (zeroed, one per distinct id) the occurrences of distinct id j in the batch
// (padding left out).
void count_occurrences(const Dedupe &dd, int64_t *counts) {
  for (int64_t v : dd.inverse) {
    if (v >= 0) counts[static_cast<size_t>(v)]++;
  }
}

// The rows of the distinct ids uids as [U, dim] on device (counts: their occurrences in the
// batch); with a training lookup and grad mode on, their gradient goes to the table.
at::Tensor unique_rows(const std::shared_ptr<Table> &t, const at::Tensor &uids, const int64_t *counts,
                       at::Device device, const Options &o) {
  at::Tensor rows;
  Scratch<int64_t> admitted(0);
  {
    c10::NoGradGuard no_grad;
    rows = t->autograd_rows(uids, device, o.train, o.default_mode, o.max_norm, counts, &admitted.v);
  }
  if (o.train && c10::GradMode::is_enabled()) {
    // libtorch 2.13 made autograd nodes intrusive_ptr-counted (and dropped deleteNode).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13)
    auto node = c10::make_intrusive<RowsBackward>(t, uids, o.fused);
#else
    std::shared_ptr<RowsBackward> node(new RowsBackward(t, uids, o.fused), torch::autograd::deleteNode);
#endif
    torch::autograd::set_history(rows, node);
  }
  keep_admitted(rows, uids, admitted.v);
  return rows;
}

// The distinct ids of a batch (padding left out), their rows and the remapped indices: the row
// of position i of the batch is weight[index[i]], where weight is the rows of the distinct ids
// plus, when the padding id occurs, a zero row at U.
struct Gathered {
  at::Tensor weight, index;
  int64_t padding_row = -1;  // U when the padding id occurs
};

Gathered gather_batch(const std::shared_ptr<Table> &t, const at::Tensor &flat_ids, at::Device device,
                      const Options &o) {
  const int64_t n = flat_ids.size(0);
  Dedupe dd(flat_ids.data_ptr<int64_t>(), n, o.has_padding ? &o.padding_id : nullptr);
  Scratch<int64_t> counts(dd.uids.size(), 0);  // a training lookup counts every occurrence
  count_occurrences(dd, counts.data());
  Gathered g;
  g.weight = unique_rows(t, long_tensor(dd.uids), counts.data(), device, o);
  if (dd.skipped > 0) {
    g.padding_row = dd.size();
    for (auto &v : dd.inverse) {
      if (v < 0) v = g.padding_row;
    }
    g.weight = at::cat({g.weight, at::zeros({1, g.weight.size(1)}, g.weight.options().requires_grad(false))});
  }
  g.index = long_tensor(dd.inverse);
  if (!device.is_cpu()) g.index = g.index.to(device);
  return g;
}

// Embedding's lookup on the host (CPU ids, CPU rows): position i of the output is row
// inverse[i] of the distinct ids' rows (a zero row for the padding id, inverse -1), copied in a
// raw loop; its backward (GatherBackward) sums each distinct id's gradient into [U, dim] in
// position order, each sum starting from zero (0 + g, then + g in order), as index_select's
// backward (index_add_ into zeros) does, so the numbers are the same bit for bit. Before: an
// index_select forward and an index_add_ backward, which dispatched per op and per slice (4-5%
// of BenchmarkCTRStep's CPU time), and a view.
struct GatherBackward : torch::autograd::Node {
  std::vector<int64_t> inverse;  // per position: its distinct id's row, -1 for padding
  int64_t u = 0, dim = 0;
  bool released = false;

  variable_list apply(variable_list &&grads) override {
    if (released) {
      throw std::runtime_error("the table lookup's graph was freed by an earlier backward pass (retain_graph)");
    }
    if (grads.empty() || !grads[0].defined()) return {at::Tensor()};
    c10::NoGradGuard no_grad;
    const int64_t n = static_cast<int64_t>(inverse.size());
    at::Tensor g = grads[0].to(at::kCPU, at::kFloat).contiguous();
    at::Tensor sum = at::empty({u, dim}, at::kFloat);
    const float *src = g.data_ptr<float>();
    float *dst = sum.data_ptr<float>();
    const int64_t d = dim;
    int64_t next = 0;  // distinct ids come in order of first occurrence
    for (int64_t i = 0; i < n; i++) {
      const int64_t j = inverse[static_cast<size_t>(i)];
      if (j < 0) continue;
      const float *s = src + i * d;
      float *r = dst + j * d;
      if (j == next) {
        next++;
        for_lanes(d, [&](int64_t c, auto L) { L.store(r + c, decltype(L.load(s)){} + L.load(s + c)); });
      } else {
        for_lanes(d, [&](int64_t c, auto L) { L.store(r + c, L.load(r + c) + L.load(s + c)); });
      }
    }
    return {sum};
  }
  std::string name() const override { return "gorec::TableGatherBackward"; }
  void release_variables() override {
    released = true;
    scratch_pool<int64_t>().give(std::move(inverse));  // (Dedupe's: see forward_host)
    inverse = std::vector<int64_t>();
  }
  ~GatherBackward() override { scratch_pool<int64_t>().give(std::move(inverse)); }
};

at::Tensor forward_host(const std::shared_ptr<Table> &t, const at::Tensor &ids, const at::Tensor &flat,
                        const Options &o) {
  const int64_t n = flat.size(0), d = t->dim();
  Dedupe dd(flat.data_ptr<int64_t>(), n, o.has_padding ? &o.padding_id : nullptr);
  Scratch<int64_t> counts(dd.uids.size(), 0);  // a training lookup counts every occurrence
  count_occurrences(dd, counts.data());
  at::Tensor rows = unique_rows(t, long_tensor(dd.uids), counts.data(), at::kCPU, o).contiguous();
  std::vector<int64_t> shape(ids.sizes().begin(), ids.sizes().end());
  shape.push_back(d);
  at::Tensor out = at::empty(shape, at::kFloat);
  const float *src = rows.data_ptr<float>();
  float *dst = out.data_ptr<float>();
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(d);
  for (int64_t i = 0; i < n; i++) {
    const int64_t j = dd.inverse[static_cast<size_t>(i)];
    if (j < 0) {
      std::memset(dst + i * d, 0, row_bytes);
    } else {
      std::memcpy(dst + i * d, src + j * d, row_bytes);
    }
  }
  if (rows.requires_grad()) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13)
    auto node = c10::make_intrusive<GatherBackward>();
#else
    std::shared_ptr<GatherBackward> node(new GatherBackward(), torch::autograd::deleteNode);
#endif
    node->inverse = std::move(dd.inverse);
    node->u = dd.size();
    node->dim = d;
    node->set_next_edges({torch::autograd::impl::gradient_edge(rows)});
    torch::autograd::set_history(out, node);
  }
  return out;
}

at::Tensor forward(const std::shared_ptr<Table> &t, const at::Tensor &ids, const Options &o) {
  at::Tensor flat = host_ids(ids);
  if (ids.device().is_cpu() && t->device().is_cpu()) return forward_host(t, ids, flat, o);
  Gathered g = gather_batch(t, flat, ids.device(), o);
  std::vector<int64_t> shape(ids.sizes().begin(), ids.sizes().end());
  shape.push_back(t->dim());
  return g.weight.index_select(0, g.index).view(shape);
}

// Sum and mean bags of CPU ids (bags.cc.h).
bool bags_fast_path(const at::Tensor &ids, const at::Tensor *weights, int32_t mode);
at::Tensor forward_bag_fast(const std::shared_ptr<Table> &t, const at::Tensor &ids, const at::Tensor *offsets,
                            const at::Tensor *weights, int32_t mode, const Options &o);

at::Tensor forward_bag(const std::shared_ptr<Table> &t, const at::Tensor &ids, const at::Tensor *offsets,
                       const at::Tensor *weights, int32_t mode, const Options &o) {
  if (mode != CT_BAG_SUM && mode != CT_BAG_MEAN && mode != CT_BAG_MAX) {
    throw arg_error("unknown bag mode " + std::to_string(mode));
  }
  if (bags_fast_path(ids, weights, mode)) return forward_bag_fast(t, ids, offsets, weights, mode, o);
  at::Tensor flat = host_ids(ids);
  const int64_t n = flat.size(0);
  at::Tensor offs;  // int64 [B], CPU
  if (offsets != nullptr) {
    if (ids.dim() != 1) throw arg_error("ids with offsets must be one-dimensional, got " + std::to_string(ids.dim()) + " dimensions");
    if (offsets->scalar_type() != at::kLong) throw arg_error("offsets must be int64");
    if (offsets->dim() != 1) throw arg_error("offsets must be one-dimensional");
    offs = offsets->detach().to(at::kCPU).contiguous();
    const int64_t *p = offs.data_ptr<int64_t>();
    const int64_t b = offs.size(0);
    if (b > 0 && p[0] != 0) throw arg_error("offsets must start at 0, got " + std::to_string(p[0]));
    // (libtorch 1.13 reads memory it never wrote, or crashes in max mode, for ids in no bag)
    if (b == 0 && n > 0) throw arg_error("offsets is empty, so the " + std::to_string(n) + " ids are in no bag");
    for (int64_t i = 0; i < b; i++) {
      if (p[i] < 0 || p[i] > n || (i > 0 && p[i] < p[i - 1])) {
        throw arg_error("offsets must be non-decreasing within [0, " + std::to_string(n) + "]");
      }
    }
  } else {
    if (ids.dim() != 2) throw arg_error("ids without offsets must be two-dimensional [bags, length], got " + std::to_string(ids.dim()) + " dimensions");
    const int64_t b = ids.size(0), len = ids.size(1);
    offs = len == 0 ? at::zeros({b}, at::kLong) : at::arange(0, b * len, len, at::kLong);
  }
  at::Tensor psw;
  if (weights != nullptr) {
    if (mode != CT_BAG_SUM) throw arg_error("per-sample weights need the sum mode");
    if (weights->scalar_type() != at::kFloat) throw arg_error("per-sample weights must be float32");
    if (weights->numel() != n || (offsets == nullptr ? weights->sizes() != ids.sizes() : weights->dim() != 1)) {
      throw arg_error("per-sample weights must be shaped like ids");
    }
    psw = weights->reshape({-1});
    if (psw.device() != ids.device()) psw = psw.to(ids.device());
  }
  Gathered g = gather_batch(t, flat, ids.device(), o);
  if (!ids.device().is_cpu()) offs = offs.to(ids.device());
  c10::optional<int64_t> padding_idx;
  if (g.padding_row >= 0) padding_idx = g.padding_row;
  c10::optional<at::Tensor> psw_opt;
  if (psw.defined()) psw_opt = psw;
  auto r = at::embedding_bag(g.weight, g.index, offs, /*scale_grad_by_freq=*/false, mode,
                             /*sparse=*/false, psw_opt, /*include_last_offset=*/false, padding_idx);
  return std::get<0>(r);
}

}  // namespace
}  // namespace table
}  // namespace ct

using ct::guard;
using ct::need_out;

extern "C" {

ct_error ct_table_forward(ct_tensor *out, ct_table h, ct_tensor ids,
                          const ct_table_forward_options *opts) {
  return guard([&] {
    need_out(out);
    auto t = tbl_ref(h);
    auto o = ct::table::check_options(opts, *t);
    *out = ct::wrap(ct::table::forward(t, ct::get(ids), o));
  });
}

ct_error ct_table_forward_bag(ct_tensor *out, ct_table h, ct_tensor ids, ct_tensor offsets,
                              ct_tensor per_sample_weights, int32_t mode,
                              const ct_table_forward_options *opts) {
  return guard([&] {
    need_out(out);
    auto t = tbl_ref(h);
    auto o = ct::table::check_options(opts, *t);
    *out = ct::wrap(ct::table::forward_bag(t, ct::get(ids), ct::get_optional(offsets),
                                           ct::get_optional(per_sample_weights), mode, o));
  });
}

ct_error ct_table_step(int32_t *stepped, ct_table h) {
  return guard([&] {
    Table &t = tbl(h);
    c10::NoGradGuard no_grad;
    const bool s = t.step_pending();
    if (stepped != nullptr) *stepped = s ? 1 : 0;
  });
}

ct_error ct_table_zero_grad(ct_table h) {
  return guard([&] { tbl(h).zero_grad(); });
}

ct_error ct_table_pending_grad(ct_tensor *ids, ct_tensor *grads, ct_table h) {
  return guard([&] {
    need_out(ids);
    need_out(grads);
    c10::NoGradGuard no_grad;
    auto p = tbl(h).pending();
    ct_tensor a = ct::wrap(std::move(p.first));
    try {
      *grads = ct::wrap(std::move(p.second));
    } catch (...) {
      ct_tensor_free(a);
      throw;
    }
    *ids = a;
  });
}

}  // extern "C"
