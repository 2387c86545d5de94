// bags.cc.h: embedding bags pooled on the C side: the bags of several features, each from
// its table, looked up and pooled in one call (ct_table_bags_forward, FBGEMM's table-batched
// embedding bags), the steps and gradient resets of several tables in one call
// (ct_table_step_all, ct_table_zero_grad_all), and the sum and mean bags of
// ct_table_forward_bag on the CPU (bags_fast_path).
// Compiled as part of unity_table.cc, after autograd.cc.h (unique_rows, check_options).
//
// Design
//   Per feature: the distinct ids of its bags (bag_ids, padding left out), their rows [U, dim]
//   through unique_rows (whose node hands the rows' gradient to the table, as for every lookup),
//   then raw loops: forward, each bag's row is the fused multiply-add of its ids' rows (times
//   their per-sample weights) in bag order, then for mean divided by the bag's count of
//   non-padding ids; backward (BagsBackward, one node for every feature of the call, whose next
//   edges are the features' rows), each distinct id's gradient is the fused multiply-add of its
//   bags' gradients (times weight, times 1/count for mean) in position order. No [N, dim]
//   intermediate, no sort, no per-id Go work.
//   The forward's operations and order are PyTorch's CPU embedding_bag's (caffe2's
//   EmbeddingLookupIdx: fma per id in bag order, then output / bag_size), so its output equals
//   torch's bit for bit; the backward's order is per id in position order (torch's dense
//   backward adds in sorted-index order: equal up to rounding). The kernel (AVX-512, AVX2 or
//   plain, the same numbers) is bags_kernels.cc.h's.
//   Bags that repeat an earlier bag of their feature (same ids and weights) are pooled once
//   (bags_repeats.cc.h).
//   Threads: forward splits the bags, backward the distinct ids (each range scans every bag):
//   both give the same numbers at any thread count.
//   Memory: the per-call scratch (first bags' ids, row pointers and weights) comes from the
//   thread's scratch pool (scratch.h), the inverse a tensor buffer: vectors of megabytes a
//   call were otherwise mapped and page-faulted afresh whenever glibc's mmap threshold stood
//   below them.
#include <torch/csrc/autograd/variable.h>

#include "bags_scratch.cc.h"
#include "bags_dedupe.cc.h"
#include "bags_repeats.cc.h"
#include "bags_kernels.cc.h"

namespace ct {
namespace table {
namespace {

// Work (ids x dim) below which a pooling runs in the calling thread: a parallel region costs
// tens of microseconds on a small VM (see for_rows).
constexpr int64_t kBagsSerialWork = int64_t{1} << 20;

struct BagsBatch;

// One feature of a call: where its bags lie and what its backward needs.
struct BagFeature {
  int64_t first_bag = 0;  // its bags are bounds[first_bag, first_bag + batch]
  int64_t base = 0;       // the position of its first id
  int64_t u = 0, dim = 0, col = 0;  // distinct ids, row width, first output column
  bool mean = false, padding = false;  // padding: the feature has a padding id
  LongArray inverse;  // per id of a first bag: its row among the distinct ids, -1: padding
  std::vector<int64_t> count;    // mean: each bag's ids other than padding
  std::vector<int64_t> same;     // per bag: the first bag equal to it (find_repeats); empty: none repeat
  std::vector<int64_t> pos0;     // per bag: where its ids start in inverse (a repeat's: its first's)
  std::vector<int64_t> start;    // [u + 1]: distinct id k's occurrences in inverse are start[k + 1] - start[k]

  bool repeat(int64_t b) const { return !same.empty() && same[static_cast<size_t>(b)] != b; }
};

// The bags of a call: bag b holds positions [bounds[b], bounds[b + 1]) of ids and weights.
struct BagsBatch {
  std::vector<int64_t> bounds;
  int64_t batch = 0;  // bags per feature (segment)
  const float *weights = nullptr;
  at::Tensor weights_t;  // keeps weights alive (CPU, contiguous)
};

// Pools feature f's bags from its rows [u, dim] into out's columns [col, col + dim) (ld floats a
// row); mean divides by the bag's count (kept in f.count for the backward).
void pool_forward(BagFeature &f, const BagsBatch &bb, const float *rows, float *out, int64_t ld) {
  // (PyTorch: weighted bags with a padding index are summed as products then added)
  const SumRows sum_rows = sum_rows_kernel(bb.weights == nullptr || !f.padding);
  const int64_t d = f.dim, n = static_cast<int64_t>(f.inverse.size());
  // Each bag's rows and weights, padding left out: bag b's are [at[b], at[b + 1]).
  Scratch<const float *> src_s(static_cast<size_t>(n));
  Scratch<float> w_s(static_cast<size_t>(n));
  const float **src = src_s.data();
  float *w = w_s.data();
  Scratch<int64_t> at_s(static_cast<size_t>(bb.batch) + 1);
  int64_t *at = at_s.data();
  {
    const float **__restrict sp = src;
    float *__restrict wp = w;
    const int64_t *inv = f.inverse.p;
    int64_t m = 0;
    at[0] = 0;
    for (int64_t b = 0; b < bb.batch; b++) {
      if (!f.repeat(b)) {
        const int64_t p0 = bb.bounds[static_cast<size_t>(f.first_bag + b)];
        const int64_t len = bb.bounds[static_cast<size_t>(f.first_bag + b) + 1] - p0;
        const int64_t *ib = inv + f.pos0[static_cast<size_t>(b)];
        const float *wb = bb.weights != nullptr ? bb.weights + p0 : nullptr;
        for (int64_t p = 0; p < len; p++) {
          const int64_t k = ib[p];
          if (k < 0) continue;
          sp[m] = rows + k * d;
          if (wb != nullptr) wp[m] = wb[p];
          m++;
        }
      }
      at[b + 1] = m;
    }
  }
  if (f.mean) f.count.assign(static_cast<size_t>(bb.batch), 0);
  auto body = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
      if (f.repeat(b)) continue;
      float *o = out + b * ld + f.col;
      const int64_t i0 = at[b], cnt = at[b + 1] - i0;
      sum_rows(o, d, src + i0, bb.weights != nullptr ? w + i0 : nullptr, cnt);
      if (f.mean) {
        f.count[static_cast<size_t>(b)] = cnt;
        if (cnt > 0) {
          const float c = static_cast<float>(cnt);
          for (int64_t j = 0; j < d; j++) o[j] /= c;
        }
      }
    }
  };
  if (n * d < kBagsSerialWork) {
    body(0, bb.batch);
  } else {
    at::parallel_for(0, bb.batch, std::max<int64_t>(1, bb.batch * kBagsSerialWork / (4 * n * d)), body);
  }
  for (int64_t b = 0; b < bb.batch; b++) {  // repeats: their first's row
    if (!f.repeat(b)) continue;
    const int64_t r = f.same[static_cast<size_t>(b)];
    std::memcpy(out + b * ld + f.col, out + r * ld + f.col, static_cast<size_t>(d) * sizeof(float));
    if (f.mean) f.count[static_cast<size_t>(b)] = f.count[static_cast<size_t>(r)];
  }
}

// The gradient [u, dim] of feature f's rows from the gradient g of the pooled output (ld floats
// a row): each id's is the sum over its occurrences, in position order, of the bag's gradient
// times the id's weight (times 1 / count for mean). The occurrences are first grouped by id (a
// counting sort, which keeps their order), so that each id's row is summed in the L1 cache from
// the bags' gradients (B rows: in the L2 cache) and written once.
at::Tensor pool_backward(const BagFeature &f, const BagsBatch &bb, const float *g, int64_t ld) {
  const SumRows sum_rows = sum_rows_kernel(true);
  const int64_t d = f.dim, n = static_cast<int64_t>(f.inverse.size());
  const int64_t *start = f.start.data();  // (the forward's counting)
  Scratch<const float *> src_s(static_cast<size_t>(n));
  Scratch<float> scale_s(static_cast<size_t>(n));
  const float **src = src_s.data();
  float *scale = scale_s.data();
  // A first bag with repeats: its gradient plus theirs, in bag order (gsum's row slot[b]).
  Scratch<int64_t> slot(f.same.empty() ? 0 : static_cast<size_t>(bb.batch), -1);
  std::vector<float> gsum;
  if (!f.same.empty()) {
    int64_t r = 0;
    for (int64_t b = 0; b < bb.batch; b++) {
      const int64_t c = f.same[static_cast<size_t>(b)];
      if (c != b && slot.v[static_cast<size_t>(c)] < 0) slot.v[static_cast<size_t>(c)] = r++;
    }
    gsum.resize(static_cast<size_t>(r * d));
    for (int64_t b = 0; b < bb.batch; b++) {  // (a first comes before its repeats)
      const int64_t c = f.same[static_cast<size_t>(b)];
      const float *gb = g + b * ld + f.col;
      if (slot.v[static_cast<size_t>(c)] < 0) continue;
      float *acc = gsum.data() + slot.v[static_cast<size_t>(c)] * d;
      if (c == b) {
        std::memcpy(acc, gb, static_cast<size_t>(d) * sizeof(float));
      } else {
        for (int64_t j = 0; j < d; j++) acc[j] += gb[j];
      }
    }
  }
  {
    // Each occurrence into its id's group, in position order: the bag's gradient row and scale.
    Scratch<int64_t> next_s(static_cast<size_t>(f.u));
    int64_t *__restrict next = next_s.data();
    std::memcpy(next, start, static_cast<size_t>(f.u) * sizeof(int64_t));
    const float **__restrict sp = src;
    float *__restrict sc = scale;
    const int64_t *inv = f.inverse.p;
    for (int64_t b = 0; b < bb.batch; b++) {
      if (f.repeat(b)) continue;
      const float *gb = !slot.v.empty() && slot.v[static_cast<size_t>(b)] >= 0
                            ? gsum.data() + slot.v[static_cast<size_t>(b)] * d
                            : g + b * ld + f.col;
      float s = 1.f;
      if (f.mean) {
        const int64_t c = f.count[static_cast<size_t>(b)];
        s = c == 0 ? 0.f : static_cast<float>(1.0 / static_cast<double>(c));
      }
      const int64_t p0 = bb.bounds[static_cast<size_t>(f.first_bag + b)];
      const int64_t len = bb.bounds[static_cast<size_t>(f.first_bag + b) + 1] - p0;
      const int64_t *ib = inv + f.pos0[static_cast<size_t>(b)];
      if (bb.weights != nullptr) {
        const float *wb = bb.weights + p0;
        for (int64_t p = 0; p < len; p++) {
          const int64_t k = ib[p];
          if (k < 0) continue;
          const int64_t q = next[k]++;
          sp[q] = gb;
          sc[q] = wb[p] * s;
        }
      } else {
        for (int64_t p = 0; p < len; p++) {
          const int64_t k = ib[p];
          if (k < 0) continue;
          const int64_t q = next[k]++;
          sp[q] = gb;
          sc[q] = s;
        }
      }
    }
  }
  auto grad = at::empty({f.u, f.dim}, at::kFloat);
  float *gr = grad.data_ptr<float>();
  auto body = [&](int64_t u0, int64_t u1) {
    for (int64_t k = u0; k < u1; k++) {
      const int64_t q0 = start[k];
      sum_rows(gr + k * d, d, src + q0, scale + q0, start[k + 1] - q0);
    }
  };
  if (n * d < kBagsSerialWork) {
    body(0, f.u);
  } else {
    at::parallel_for(0, f.u, std::max<int64_t>(1, f.u * kBagsSerialWork / (4 * n * d)), body);
  }
  return grad;
}

// The backward of a call's pooled output: the gradient of each feature's rows (its next edge).
struct BagsBackward : torch::autograd::Node {
  std::shared_ptr<const BagsBatch> bb;
  std::vector<BagFeature> features;  // those with an edge, in edge order
  bool released = false;

  variable_list apply(variable_list &&grads) override {
    if (released) {
      throw std::runtime_error("the embedding bags' graph was freed by an earlier backward pass (retain_graph)");
    }
    variable_list out(features.size());
    if (grads.empty() || !grads[0].defined()) return out;  // (undefined: zero gradients)
    c10::NoGradGuard no_grad;
    at::Tensor g = grads[0].to(at::kCPU).to(at::kFloat).contiguous();
    for (size_t i = 0; i < features.size(); i++) {
      out[i] = pool_backward(features[i], *bb, g.data_ptr<float>(), g.size(1));
    }
    return out;
  }
  std::string name() const override { return "gorec::TableBagsBackward"; }
  void release_variables() override {
    released = true;
    features.clear();
    bb.reset();
  }
};

// The bag bounds from offsets or lengths (kind: ct_bags_bounds), checked against n ids: bags
// S * batch bags, batch = bags / segments.
BagsBatch bags_batch(const at::Tensor &bounds, int32_t kind, int64_t n, int64_t segments) {
  if (bounds.scalar_type() != at::kLong) throw arg_error("offsets and lengths must be int64");
  if (bounds.dim() != 1) throw arg_error("offsets and lengths must be one-dimensional");
  at::Tensor h = bounds.detach().to(at::kCPU).contiguous();
  const int64_t *p = h.data_ptr<int64_t>();
  const int64_t m = h.size(0);
  BagsBatch bb;
  if (kind == CT_BAGS_LENGTHS) {
    bb.bounds.resize(static_cast<size_t>(m) + 1);
    bb.bounds[0] = 0;
    for (int64_t i = 0; i < m; i++) {
      if (p[i] < 0 || p[i] > n - bb.bounds[static_cast<size_t>(i)]) {
        throw arg_error("lengths must be >= 0 and add up to the " + std::to_string(n) + " ids");
      }
      bb.bounds[static_cast<size_t>(i) + 1] = bb.bounds[static_cast<size_t>(i)] + p[i];
    }
    if (bb.bounds.back() != n) throw arg_error("lengths add up to " + std::to_string(bb.bounds.back()) + ", not to the " + std::to_string(n) + " ids");
  } else if (kind == CT_BAGS_OFFSETS || kind == CT_BAGS_OFFSETS_INCLUDE_LAST) {
    bb.bounds.assign(p, p + m);
    if (kind == CT_BAGS_OFFSETS) {
      // (libtorch 1.13 reads memory it never wrote, or crashes in max mode, for ids in no bag)
      if (m == 0 && n > 0) throw arg_error("offsets is empty, so the " + std::to_string(n) + " ids are in no bag");
      bb.bounds.push_back(n);
    } else if (m == 0 || p[m - 1] != n) {
      throw arg_error("the last offset (include_last_offset) must be the number of ids, " + std::to_string(n));
    }
    if (bb.bounds[0] != 0) throw arg_error("offsets must start at 0, got " + std::to_string(bb.bounds[0]));
    for (size_t i = 1; i < bb.bounds.size(); i++) {
      if (bb.bounds[i] < bb.bounds[i - 1] || bb.bounds[i] > n) {
        throw arg_error("offsets must be non-decreasing within [0, " + std::to_string(n) + "]");
      }
    }
  } else {
    throw arg_error("unknown bounds kind " + std::to_string(kind));
  }
  const int64_t bags = static_cast<int64_t>(bb.bounds.size()) - 1;
  if (bags % segments != 0) {
    throw arg_error(std::to_string(bags) + " bags do not split into " + std::to_string(segments) + " features of equal batch");
  }
  bb.batch = bags / segments;
  return bb;
}

// The per-sample weights (float32, n of them, without gradient), on the host.
void bags_weights(BagsBatch &bb, const at::Tensor &w, int64_t n) {
  if (w.scalar_type() != at::kFloat) throw arg_error("per-sample weights must be float32");
  if (w.numel() != n) throw arg_error("per-sample weights must be shaped like ids");
  if (w.requires_grad() && c10::GradMode::is_enabled()) {
    throw arg_error("per-sample weights that require a gradient are not supported here");
  }
  bb.weights_t = w.detach().to(at::kCPU).contiguous().reshape({-1});
  bb.weights = bb.weights_t.data_ptr<float>();
}

// One feature of a call (its table, options and pooling, and which segment of bags it pools).
struct BagsFeatureArg {
  std::shared_ptr<Table> table;
  Options opts;
  int32_t mode = CT_BAG_SUM;
  int64_t segment = 0;
};

// Pools the bags of every feature into [batch, sum of dims] (features' columns in order); ids
// int64 [N] with bounds, or [B, L] (one segment of B bags of L) with bounds undefined.
at::Tensor forward_bags(const std::vector<BagsFeatureArg> &args, int64_t segments, const at::Tensor &ids,
                        const at::Tensor *bounds, int32_t kind, const at::Tensor *weights) {
  if (segments < 1) throw arg_error("segments must be >= 1, got " + std::to_string(segments));
  at::Tensor flat = host_ids(ids);
  const int64_t n = flat.size(0);
  auto bb = std::make_shared<BagsBatch>();
  if (bounds != nullptr) {
    if (ids.dim() != 1) throw arg_error("ids with offsets or lengths must be one-dimensional, got " + std::to_string(ids.dim()) + " dimensions");
    *bb = bags_batch(*bounds, kind, n, segments);
  } else {
    if (ids.dim() != 2) throw arg_error("ids without offsets must be two-dimensional [bags, length], got " + std::to_string(ids.dim()) + " dimensions");
    if (segments != 1) throw arg_error("two-dimensional ids are one feature's bags");
    const int64_t b = ids.size(0), len = ids.size(1);
    for (int64_t i = 0; i <= b; i++) bb->bounds.push_back(i * len);
    bb->batch = b;
  }
  if (weights != nullptr) bags_weights(*bb, *weights, n);
  std::vector<BagFeature> fs(args.size());
  int64_t cols = 0;
  for (size_t i = 0; i < args.size(); i++) {
    const BagsFeatureArg &a = args[i];
    if (a.mode != CT_BAG_SUM && a.mode != CT_BAG_MEAN) throw arg_error("bag mode " + std::to_string(a.mode) + " is not sum or mean");
    if (a.mode != CT_BAG_SUM && weights != nullptr) throw arg_error("per-sample weights need the sum mode");
    if (a.segment < 0 || a.segment >= segments) throw arg_error("segment " + std::to_string(a.segment) + " out of [0, " + std::to_string(segments) + ")");
    fs[i].first_bag = a.segment * bb->batch;
    fs[i].base = bb->bounds[static_cast<size_t>(fs[i].first_bag)];
    fs[i].dim = a.table->dim();
    fs[i].col = cols;
    fs[i].mean = a.mode == CT_BAG_MEAN;
    fs[i].padding = a.opts.has_padding;
    cols += fs[i].dim;
  }
  // Everything checked: the lookups (training ones insert), then the pooling.
  auto out = at::empty({bb->batch, cols}, at::kFloat);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13)
  auto node = c10::make_intrusive<BagsBackward>();
#else
  std::shared_ptr<BagsBackward> node(new BagsBackward(), torch::autograd::deleteNode);
#endif
  torch::autograd::edge_list edges;
  for (size_t i = 0; i < args.size(); i++) {
    BagFeature &f = fs[i];
    const int64_t end = bb->bounds[static_cast<size_t>(f.first_bag + bb->batch)];
    const Options &o = args[i].opts;
    const int64_t *all = flat.data_ptr<int64_t>();
    f.same = find_repeats(bb->bounds, f.first_bag, bb->batch, all, bb->weights);
    // The ids of the first bags (every bag's when none repeats), and where each bag's start.
    Scratch<int64_t> kept_s;  // (from the thread's pool, when bags repeat)
    if (!f.same.empty()) kept_s.v = scratch_pool<int64_t>().reserve(static_cast<size_t>(end - f.base));
    std::vector<int64_t> &kept = kept_s.v;
    f.pos0.resize(static_cast<size_t>(bb->batch));
    for (int64_t b = 0; b < bb->batch; b++) {
      const int64_t p0 = bb->bounds[static_cast<size_t>(f.first_bag + b)];
      if (f.same.empty()) {
        f.pos0[static_cast<size_t>(b)] = p0 - f.base;
      } else if (f.repeat(b)) {
        f.pos0[static_cast<size_t>(b)] = f.pos0[static_cast<size_t>(f.same[static_cast<size_t>(b)])];
      } else {
        f.pos0[static_cast<size_t>(b)] = static_cast<int64_t>(kept.size());
        kept.insert(kept.end(), all + p0, all + bb->bounds[static_cast<size_t>(f.first_bag + b) + 1]);
      }
    }
    BagIds dd = bag_ids(f.same.empty() ? all + f.base : kept.data(),
                        f.same.empty() ? end - f.base : static_cast<int64_t>(kept.size()), o.has_padding ? &o.padding_id : nullptr);
    // Each distinct id's occurrences in the first bags (the backward groups them by these), then
    // in every bag: a training lookup counts every occurrence.
    std::vector<int64_t> &start = f.start;
    start.assign(dd.uids.size() + 1, 0);
    for (int64_t v : dd.inverse) start[static_cast<size_t>(v + 1)]++;  // (padding, -1: start[0])
    std::vector<int64_t> counts(start.begin() + 1, start.end());
    start[0] = 0;
    for (size_t k = 0; k < dd.uids.size(); k++) start[k + 1] += start[k];
    if (!f.same.empty()) {  // a first bag's ids once more for each of its repeats
      Scratch<int64_t> more(static_cast<size_t>(bb->batch), 0);
      for (int64_t b = 0; b < bb->batch; b++) {
        if (f.repeat(b)) more.v[static_cast<size_t>(f.same[static_cast<size_t>(b)])]++;
      }
      for (int64_t b = 0; b < bb->batch; b++) {
        const int64_t m = more.v[static_cast<size_t>(b)];
        if (m == 0) continue;
        const int64_t q0 = f.pos0[static_cast<size_t>(b)];
        const int64_t len = bb->bounds[static_cast<size_t>(f.first_bag + b) + 1] - bb->bounds[static_cast<size_t>(f.first_bag + b)];
        for (int64_t q = q0; q < q0 + len; q++) {
          const int64_t v = dd.inverse[static_cast<size_t>(q)];
          if (v >= 0) counts[static_cast<size_t>(v)] += m;
        }
      }
    }
    at::Tensor rows = unique_rows(args[i].table, long_tensor(dd.uids), counts.data(), at::kCPU, o);
    f.u = dd.size();
    f.inverse = std::move(dd.inverse);
    kept_s.give_back();
    pool_forward(f, *bb, rows.contiguous().data_ptr<float>(), out.data_ptr<float>(), cols);
    if (rows.requires_grad()) {
      edges.push_back(torch::autograd::impl::gradient_edge(rows));
      node->features.push_back(std::move(f));
    }
  }
  if (!edges.empty()) {
    node->bb = bb;
    node->set_next_edges(std::move(edges));
    torch::autograd::set_history(out, node);
  }
  return out;
}

// ct_table_forward_bag's sum and mean bags of CPU ids (weights without gradient): the pooling
// above; others (max, device ids, weights with a gradient) go through at::embedding_bag.
bool bags_fast_path(const at::Tensor &ids, const at::Tensor *weights, int32_t mode) {
  return (mode == CT_BAG_SUM || mode == CT_BAG_MEAN) && ids.device().is_cpu() &&
         (weights == nullptr || !weights->requires_grad() || !c10::GradMode::is_enabled());
}

at::Tensor forward_bag_fast(const std::shared_ptr<Table> &t, const at::Tensor &ids, const at::Tensor *offsets,
                            const at::Tensor *weights, int32_t mode, const Options &o) {
  if (weights != nullptr && (offsets == nullptr ? weights->sizes() != ids.sizes() : weights->dim() != 1)) {
    throw arg_error("per-sample weights must be shaped like ids");
  }
  if (weights != nullptr && mode != CT_BAG_SUM) throw arg_error("per-sample weights need the sum mode");
  return forward_bags({BagsFeatureArg{t, o, mode, 0}}, 1, ids, offsets, CT_BAGS_OFFSETS, weights);
}

}  // namespace
}  // namespace table
}  // namespace ct

extern "C" {

ct_error ct_table_bags_forward(ct_tensor *out, int32_t n, const ct_table *tables,
                               const ct_table_forward_options *opts, const int32_t *modes,
                               const int32_t *segments, int32_t num_segments, ct_tensor ids,
                               ct_tensor bounds, int32_t bounds_kind, ct_tensor per_sample_weights) {
  return ct::guard([&] {
    ct::need_out(out);
    if (n < 0 || (n > 0 && (tables == nullptr || opts == nullptr || modes == nullptr || segments == nullptr))) {
      throw ct::arg_error("bags: n < 0, or a NULL array");
    }
    std::vector<ct::table::BagsFeatureArg> args(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; i++) {
      auto &a = args[static_cast<size_t>(i)];
      a.table = tbl_ref(tables[i]);
      a.opts = ct::table::check_options(&opts[i], *a.table);
      a.mode = modes[i];
      a.segment = segments[i];
    }
    *out = ct::wrap(ct::table::forward_bags(args, num_segments, ct::get(ids), ct::get_optional(bounds),
                                            bounds_kind, ct::get_optional(per_sample_weights)));
  });
}

ct_error ct_table_step_all(int32_t *stepped, int32_t n, const ct_table *tables) {
  return ct::guard([&] {
    if (n < 0 || (n > 0 && tables == nullptr)) throw ct::arg_error("step all: n < 0, or tables NULL");
    std::vector<std::shared_ptr<ct::table::Table>> ts;
    for (int32_t i = 0; i < n; i++) ts.push_back(tbl_ref(tables[i]));
    c10::NoGradGuard no_grad;
    std::exception_ptr first;  // every table steps; the first failure is reported
    for (int32_t i = 0; i < n; i++) {
      bool s = false;
      try {
        s = ts[static_cast<size_t>(i)]->step_pending();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
      if (stepped != nullptr) stepped[i] = s ? 1 : 0;
    }
    if (first) std::rethrow_exception(first);
  });
}

ct_error ct_table_zero_grad_all(int32_t n, const ct_table *tables) {
  return ct::guard([&] {
    if (n < 0 || (n > 0 && tables == nullptr)) throw ct::arg_error("zero grad all: n < 0, or tables NULL");
    std::vector<std::shared_ptr<ct::table::Table>> ts;
    for (int32_t i = 0; i < n; i++) ts.push_back(tbl_ref(tables[i]));
    for (auto &t : ts) t->zero_grad();
  });
}

}  // extern "C"
