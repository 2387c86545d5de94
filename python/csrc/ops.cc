// ops.cc: the table ops in the PyTorch dispatcher, torch.ops.gorec.* (docs/python.md).
//
// RecStore's op set under its names (init_embedding_table, emb_read, emb_write, emb_prefetch,
// emb_wait_result, emb_update, emb_update_with_table): as in RecStore they act on the table that
// init_embedding_table made last, unless the optional `table` argument names another. Then
// gorec's own: a table with a full configuration, an autograd lookup (and a pooled one) whose
// backward hands the rows' gradient to the table, one optimizer step from it, delete, len, close.
// Each kernel calls the C ABI (handles.h): its checks, its error texts.
#include <torch/library.h>

#include <mutex>
#include <string>
#include <vector>

#include "handles.h"

namespace gorec {
namespace {

// ---- RecStore's default table ---------------------------------------------------------------

std::mutex default_mu;
std::string default_name;  // the table init_embedding_table made last

std::string resolve(const c10::optional<std::string> &table) {
  if (table.has_value()) return *table;
  std::lock_guard<std::mutex> l(default_mu);
  if (default_name.empty()) {
    throw std::runtime_error("not found: no default table: call init_embedding_table first or pass table=");
  }
  return default_name;
}

// RecStore's ops take the embedding dim; it must be the table's.
void check_dim(const TableRef &t, int64_t dim) {
  const int64_t d = t.stats().dim;
  if (dim != d) {
    throw std::runtime_error("invalid argument: embedding_dim is " + std::to_string(dim) + ", the table's dim is " +
                             std::to_string(d));
  }
}

// ---- tables -----------------------------------------------------------------------------------

template <size_t N>
void fill(double (&dst)[N], const std::vector<double> &src, const char *what) {
  if (src.size() > N) {
    throw std::runtime_error(std::string("invalid argument: ") + what + " has " + std::to_string(src.size()) +
                             " values, at most " + std::to_string(N));
  }
  for (size_t i = 0; i < N; i++) dst[i] = i < src.size() ? src[i] : 0;
}

void create_table(std::string name, int64_t dim, int64_t initializer, std::vector<double> init_params,
                  int64_t optimizer, std::vector<double> opt_params, int64_t seed, int64_t capacity,
                  int64_t block_rows, int64_t layout, bool track_access, c10::optional<at::Device> device,
                  bool seed_from_name) {
  ct_table_config c{};
  c.dim = dim;
  c.capacity = capacity;
  c.block_rows = block_rows;
  c.initializer = enum32(initializer, "initializer");
  c.optimizer = enum32(optimizer, "optimizer");
  fill(c.init_params, init_params, "init_params");
  fill(c.opt_params, opt_params, "opt_params");
  c.device = device.has_value() ? ct::from_device(*device) : ct_device{CT_CPU, -1};
  c.seed = static_cast<uint64_t>(seed);
  c.layout = enum32(layout, "layout");
  c.flags = (track_access ? CT_TABLE_TRACK_ACCESS : 0) | (seed_from_name ? CT_TABLE_SEED_FROM_NAME : 0);
  ct_table t = nullptr;
  check(ct_table_new(&t, name.c_str(), &c));
  ct_table_free(t);  // the registry holds the table until close_table
}

// RecStore's: a table with gorec's defaults (embedding.Config: normal(0, 1) rows, SGD with lr
// 0.01, the seed derived from the name), room for num_embeddings ids, which becomes the
// default table.
bool init_embedding_table(std::string name, int64_t num_embeddings, int64_t embedding_dim) {
  create_table(name, embedding_dim, CT_INIT_NORMAL, {0, 1}, CT_OPT_SGD, {0.01}, 0, num_embeddings, 0,
               CT_LAYOUT_SEPARATE, false, c10::nullopt, true);
  std::lock_guard<std::mutex> l(default_mu);
  default_name = name;
  return true;
}

void close_table(std::string name) {
  TableRef t(name);
  check(ct_table_close(t.get()));
}

std::vector<std::string> table_names() {
  char *s = nullptr;
  check(ct_table_names(&s));
  std::string all(s);
  ct_string_free(s);
  std::vector<std::string> out;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\n', start);
    if (end == std::string::npos) end = all.size();
    out.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// [size, capacity, bytes, dim, step, num_states, optimizer]
std::vector<int64_t> table_stats(std::string name) {
  const ct_table_stats s = TableRef(name).stats();
  return {s.size, s.capacity, s.bytes, s.dim, s.step, s.num_states, s.optimizer};
}

int64_t table_len(std::string name) { return TableRef(name).stats().size; }

// The serial of the open table of that name (ct_table_serial): a handle tells by it that the
// table it holds was closed and another opened under its name.
int64_t table_serial(std::string name) {
  uint64_t s = 0;
  check(ct_table_serial(&s, TableRef(name).get()));
  return static_cast<int64_t>(s);
}

// The configuration: ([dim, capacity, block_rows, initializer, optimizer, seed, layout, flags,
// admit_after], init_params, opt_params).
std::tuple<std::vector<int64_t>, std::vector<double>, std::vector<double>> table_config(std::string name) {
  TableRef t(name);
  ct_table_config c;
  check(ct_table_config_get(&c, t.get()));
  int64_t k = 0;
  check(ct_table_admission(&k, nullptr, t.get()));
  return {{c.dim, c.capacity, c.block_rows, c.initializer, c.optimizer, static_cast<int64_t>(c.seed), c.layout,
           c.flags, k},
          std::vector<double>(c.init_params, c.init_params + 4),
          std::vector<double>(c.opt_params, c.opt_params + 8)};
}

void set_admission(std::string name, int64_t k) { check(ct_table_set_admission(TableRef(name).get(), k)); }

void set_lr(std::string name, double lr) { check(ct_table_set_lr(TableRef(name).get(), lr)); }

// ---- RecStore's op set ------------------------------------------------------------------------

at::Tensor emb_read(const at::Tensor &keys, int64_t embedding_dim, c10::optional<std::string> table,
                    int64_t read_default) {
  TableRef t(resolve(table));
  check_dim(t, embedding_dim);
  ct_tensor rows = nullptr;
  check(ct_table_read(&rows, nullptr, t.get(), TensorArg(keys).get(), enum32(read_default, "read_default")));
  return take(rows);
}

void emb_write(const at::Tensor &keys, const at::Tensor &values, c10::optional<std::string> table) {
  TableRef t(resolve(table));
  check(ct_table_write(t.get(), TensorArg(keys).get(), TensorArg(values).get()));
}

int64_t emb_prefetch(const at::Tensor &keys, c10::optional<std::string> table, int64_t read_default) {
  TableRef t(resolve(table));
  int64_t id = 0;
  check(ct_table_prefetch(&id, t.get(), TensorArg(keys).get(), enum32(read_default, "read_default")));
  return id;
}

at::Tensor emb_wait_result(int64_t prefetch_id, int64_t embedding_dim, c10::optional<std::string> table) {
  TableRef t(resolve(table));
  check_dim(t, embedding_dim);
  ct_tensor rows = nullptr;
  int32_t ready = 0;
  check(ct_table_prefetch_wait(&rows, nullptr, &ready, t.get(), prefetch_id, -1));
  return take(rows);  // ready: no time limit
}

void emb_discard(int64_t prefetch_id, c10::optional<std::string> table) {
  check(ct_table_prefetch_discard(TableRef(resolve(table)).get(), prefetch_id));
}

void emb_update(const at::Tensor &keys, const at::Tensor &grads, c10::optional<std::string> table) {
  TableRef t(resolve(table));
  check(ct_table_update(t.get(), TensorArg(keys).get(), TensorArg(grads).get()));
}

void emb_update_with_table(std::string table, const at::Tensor &keys, const at::Tensor &grads) {
  check(ct_table_update_by_name(table.c_str(), TensorArg(keys).get(), TensorArg(grads).get()));
}

int64_t emb_delete(std::string table, const at::Tensor &keys) {
  int64_t n = 0;
  check(ct_table_delete(&n, TableRef(table).get(), TensorArg(keys).get()));
  return n;
}

// ---- autograd lookups -------------------------------------------------------------------------
// With grad mode on, a training lookup's result has a grad_fn (the table's node,
// csrc/table/autograd.cc.h): its backward keeps the rows' gradient as the table's pending gradient
// (emb_step applies it) or, fused, applies one optimizer step at once. These kernels are
// registered for the Autograd key as well as CPU and CUDA: the node is made by the C side, not
// by a torch::autograd::Function, because the lookup has no input that requires grad.

ct_table_forward_options options(bool train, bool fused, c10::optional<int64_t> padding_idx, double max_norm,
                                 int64_t read_default) {
  ct_table_forward_options o{};
  o.train = train ? 1 : 0;
  o.fused = fused ? 1 : 0;
  o.has_padding_id = padding_idx.has_value() ? 1 : 0;
  o.padding_id = padding_idx.value_or(0);
  o.default_mode = enum32(read_default, "read_default");
  o.max_norm = max_norm;
  return o;
}

at::Tensor emb_lookup(std::string table, const at::Tensor &ids, bool train, bool fused,
                      c10::optional<int64_t> padding_idx, double max_norm, int64_t read_default) {
  TableRef t(table);
  const auto o = options(train, fused, padding_idx, max_norm, read_default);
  ct_tensor out = nullptr;
  check(ct_table_forward(&out, t.get(), TensorArg(ids).get(), &o));
  return take(out);
}

at::Tensor emb_lookup_bag(std::string table, const at::Tensor &ids, const c10::optional<at::Tensor> &offsets,
                          const c10::optional<at::Tensor> &per_sample_weights, int64_t mode, bool train, bool fused,
                          c10::optional<int64_t> padding_idx, double max_norm, int64_t read_default) {
  TableRef t(table);
  const auto o = options(train, fused, padding_idx, max_norm, read_default);
  c10::optional<TensorArg> off, w;
  if (offsets.has_value() && offsets->defined()) off.emplace(*offsets);
  if (per_sample_weights.has_value() && per_sample_weights->defined()) w.emplace(*per_sample_weights);
  ct_tensor out = nullptr;
  check(ct_table_forward_bag(&out, t.get(), TensorArg(ids).get(), off ? off->get() : nullptr,
                             w ? w->get() : nullptr, enum32(mode, "mode"), &o));
  return take(out);
}

bool emb_step(std::string table) {
  int32_t stepped = 0;
  check(ct_table_step(&stepped, TableRef(table).get()));
  return stepped != 0;
}

void emb_zero_grad(std::string table) { check(ct_table_zero_grad(TableRef(table).get())); }

}  // namespace
}  // namespace gorec

TORCH_LIBRARY(gorec, m) {
  // Tables (no tensor inputs: one kernel for every backend).
  m.def(gorec::stateful("init_embedding_table(str name, int num_embeddings, int embedding_dim) -> bool"),
        &gorec::init_embedding_table);
  m.def(gorec::stateful("create_table(str name, int dim, int initializer, float[] init_params, int optimizer, "
        "float[] opt_params, int seed=0, int capacity=0, int block_rows=0, int layout=0, "
        "bool track_access=False, Device? device=None, bool seed_from_name=False) -> ()"),
        &gorec::create_table);
  m.def(gorec::stateful("close_table(str name) -> ()"), &gorec::close_table);
  m.def(gorec::stateful("table_names() -> str[]"), &gorec::table_names);
  m.def(gorec::stateful("table_stats(str table) -> int[]"), &gorec::table_stats);
  m.def(gorec::stateful("table_config(str table) -> (int[], float[], float[])"), &gorec::table_config);
  m.def(gorec::stateful("emb_len(str table) -> int"), &gorec::table_len);
  m.def(gorec::stateful("table_serial(str table) -> int"), &gorec::table_serial);
  m.def(gorec::stateful("set_admission(str table, int k) -> ()"), &gorec::set_admission);
  m.def(gorec::stateful("set_lr(str table, float lr) -> ()"), &gorec::set_lr);
  m.def(gorec::stateful("emb_step(str table) -> bool"), &gorec::emb_step);
  m.def(gorec::stateful("emb_zero_grad(str table) -> ()"), &gorec::emb_zero_grad);
  m.def(gorec::stateful("emb_wait_result(int prefetch_id, int embedding_dim, str? table=None) -> Tensor"), &gorec::emb_wait_result);
  m.def(gorec::stateful("emb_discard(int prefetch_id, str? table=None) -> ()"), &gorec::emb_discard);
  // Ops on keys: CPU and CUDA kernels below.
  m.def(gorec::stateful("emb_read(Tensor keys, int embedding_dim, str? table=None, int read_default=0) -> Tensor"));
  m.def(gorec::stateful("emb_write(Tensor keys, Tensor values, str? table=None) -> ()"));
  m.def(gorec::stateful("emb_prefetch(Tensor keys, str? table=None, int read_default=0) -> int"));
  m.def(gorec::stateful("emb_update(Tensor keys, Tensor grads, str? table=None) -> ()"));
  m.def(gorec::stateful("emb_update_with_table(str table, Tensor keys, Tensor grads) -> ()"));
  m.def(gorec::stateful("emb_delete(str table, Tensor keys) -> int"));
  m.def(gorec::stateful("emb_lookup(str table, Tensor ids, bool train=True, bool fused=False, int? padding_idx=None, "
        "float max_norm=0., int read_default=0) -> Tensor"));
  m.def(gorec::stateful("emb_lookup_bag(str table, Tensor ids, Tensor? offsets=None, Tensor? per_sample_weights=None, "
        "int mode=0, bool train=True, bool fused=False, int? padding_idx=None, float max_norm=0., "
        "int read_default=0) -> Tensor"));
}

// The keyed kernels for one backend. A CUDA kernel is the CPU one: the C ABI copies keys on a
// GPU to the host and gives results back on the keys' device (registering for the CUDA key needs
// no CUDA headers, so a CPU-only libtorch builds it too; nothing reaches it there).
#define GOREC_KEYED_KERNELS(m)                                  \
  m.impl("emb_read", &gorec::emb_read);                         \
  m.impl("emb_write", &gorec::emb_write);                       \
  m.impl("emb_prefetch", &gorec::emb_prefetch);                 \
  m.impl("emb_update", &gorec::emb_update);                     \
  m.impl("emb_update_with_table", &gorec::emb_update_with_table); \
  m.impl("emb_delete", &gorec::emb_delete);                     \
  m.impl("emb_lookup", &gorec::emb_lookup);                     \
  m.impl("emb_lookup_bag", &gorec::emb_lookup_bag)

TORCH_LIBRARY_IMPL(gorec, CPU, m) { GOREC_KEYED_KERNELS(m); }
TORCH_LIBRARY_IMPL(gorec, CUDA, m) { GOREC_KEYED_KERNELS(m); }

// The lookups' autograd kernels: the same functions, run with autograd on (see above).
TORCH_LIBRARY_IMPL(gorec, Autograd, m) {
  m.impl("emb_lookup", &gorec::emb_lookup);
  m.impl("emb_lookup_bag", &gorec::emb_lookup_bag);
}
