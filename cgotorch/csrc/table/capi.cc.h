// capi.cc.h: the registry of named tables and the ct_table_* entry points of the core
// operations (cgotorch.h): each is one guard around a call into class Table.
// Compiled as part of unity_table.cc, after table.cc.h (class Table) and the files listed there.

namespace ct {
namespace table {

// ---- the registry ---------------------------------------------------------------------------

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Table>> tables;
};

Registry &registry() {
  static Registry *r = new Registry();  // never destroyed (see Pool)
  return *r;
}

std::shared_ptr<Table> find_table(const std::string &name) {
  Registry &r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto it = r.tables.find(name);
  if (it == r.tables.end()) throw not_found_error("no open table named \"" + name + "\"");
  return it->second;
}

}  // namespace

// cfg with CT_TABLE_SEED_FROM_NAME applied (seed.cc.h).
ct_table_config seeded(const std::string &name, ct_table_config cfg);

}  // namespace table
}  // namespace ct

// The object behind a ct_table handle: one reference to the table.
struct ct_table_s {
  std::shared_ptr<ct::table::Table> t;
};

using ct::guard;
using ct::need_out;
using ct::table::Keys;
using ct::table::Table;

namespace {
// The table behind h (the handle holds a reference for the call).
Table &tbl(ct_table h) {
  if (h == nullptr || !h->t) throw ct::closed_error("table handle is NULL");
  return *h->t;
}
// The table behind h, as a reference the caller keeps (autograd's nodes).
std::shared_ptr<Table> tbl_ref(ct_table h) {
  tbl(h);
  return h->t;
}
}  // namespace

namespace {
// The body of the entry points that take keys: f(t, checked keys) with grad mode off.
template <class F>
void keyed(Table &t, ct_tensor keys, F f) {
  Keys k = ct::table::check_keys(keys);
  c10::NoGradGuard no_grad;
  f(t, k);
}

// *a = wrap(x) and, when b is not NULL, *b = wrap(y): both or neither.
void wrap_pair(ct_tensor *a, ct_tensor *b, at::Tensor x, at::Tensor y) {
  ct_tensor ha = ct::wrap(std::move(x));
  if (b != nullptr) {
    try {
      *b = ct::wrap(std::move(y));
    } catch (...) {
      ct_tensor_free(ha);
      throw;
    }
  }
  *a = ha;
}

// n ids of the caller's memory as Keys, not copied: valid during the call only.
Keys host_keys(const int64_t *ids, int64_t n) {
  if (n < 0) throw ct::arg_error("n must be >= 0, got " + std::to_string(n));
  if (n > 0 && ids == nullptr) throw ct::arg_error("ids is NULL");
  Keys k;
  k.host = n > 0 ? at::from_blob(const_cast<int64_t *>(ids), {n}, at::kLong) : at::empty({0}, at::kLong);
  k.n = n;
  return k;
}

// f(out) fills out [n, dim]: the caller's rows themselves for a table on the host, else a
// tensor on the table's device, copied into them after.
template <class F>
void into_rows(Table &t, float *rows, int64_t rows_len, int64_t n, F f) {
  if (n > std::numeric_limits<int64_t>::max() / t.dim()) throw ct::arg_error("n is too large: " + std::to_string(n));
  if (rows_len != n * t.dim()) {
    throw ct::arg_error("rows holds " + std::to_string(rows_len) + " floats, " + std::to_string(n) + " ids of dim " +
                        std::to_string(t.dim()) + " need " + std::to_string(n * t.dim()));
  }
  if (n > 0 && rows == nullptr) throw ct::arg_error("rows is NULL");
  c10::NoGradGuard no_grad;
  at::Tensor dst = n > 0 ? at::from_blob(rows, {n, t.dim()}, at::kFloat) : at::empty({0, t.dim()}, at::kFloat);
  at::Tensor out = t.device().is_cpu() ? dst : t.new_rows(n);
  f(out);
  if (!out.is_same(dst)) dst.copy_(out);
}
}  // namespace

namespace {
// Wraps every tensor of v into out[i] (out may hold NULLs: skipped) or none of them.
void wrap_all(const std::vector<ct_tensor *> &out, const std::vector<at::Tensor> &v) {
  std::vector<ct_tensor> made;
  try {
    for (size_t i = 0; i < v.size(); i++) made.push_back(out[i] != nullptr ? ct::wrap(v[i]) : nullptr);
  } catch (...) {
    for (auto m : made) ct_tensor_free(m);
    throw;
  }
  for (size_t i = 0; i < v.size(); i++) {
    if (out[i] != nullptr) *out[i] = made[i];
  }
}
}  // namespace

extern "C" {

ct_error ct_table_new(ct_table *out, const char *name, const ct_table_config *cfg) {
  return guard([&] {
    need_out(out);
    const bool named = name != nullptr && name[0] != '\0';
    std::string n = named ? ct::table::check_name(name) : std::string();
    if (cfg == nullptr) throw ct::arg_error("table config is NULL");
    auto &r = ct::table::registry();
    if (named) {
      std::lock_guard<std::mutex> l(r.mu);
      if (r.tables.count(n) != 0) throw ct::table::name_taken_error("a table named \"" + n + "\" is open");
    }
    // Built outside the registry lock (it may allocate a lot); the name is checked again.
    auto t = std::make_shared<Table>(n, ct::table::seeded(n, *cfg));
    auto h = std::make_unique<ct_table_s>();
    h->t = t;
    if (named) {
      std::lock_guard<std::mutex> l(r.mu);
      if (!r.tables.emplace(n, t).second) {
        throw ct::table::name_taken_error("a table named \"" + n + "\" is open");
      }
    }
    *out = h.release();
  });
}

ct_error ct_table_open(ct_table *out, const char *name) {
  return guard([&] {
    need_out(out);
    if (name == nullptr) throw ct::arg_error("table name is NULL");
    auto h = std::make_unique<ct_table_s>();
    h->t = ct::table::find_table(name);
    *out = h.release();
  });
}

ct_error ct_table_close(ct_table h) {
  return guard([&] {
    Table &t = tbl(h);
    {
      // The name goes first: a table being closed is not open (Names, Get), and New may take
      // its name while close waits for the operations in flight.
      auto &r = ct::table::registry();
      std::lock_guard<std::mutex> l(r.mu);
      auto it = r.tables.find(t.name());
      if (it != r.tables.end() && it->second.get() == &t) r.tables.erase(it);
    }
    t.close();
  });
}

void ct_table_free(ct_table h) { delete h; }

ct_error ct_table_names(char **out) {
  return guard([&] {
    need_out(out);
    std::string s;
    {
      auto &r = ct::table::registry();
      std::lock_guard<std::mutex> l(r.mu);
      for (const auto &kv : r.tables) {
        if (!s.empty()) s += '\n';
        s += kv.first;
      }
    }
    char *c = strdup(s.c_str());
    if (c == nullptr) throw std::bad_alloc();
    *out = c;
  });
}

ct_error ct_table_name(char **out, ct_table h) {
  return guard([&] {
    need_out(out);
    char *c = strdup(tbl(h).name().c_str());
    if (c == nullptr) throw std::bad_alloc();
    *out = c;
  });
}

ct_error ct_table_serial(uint64_t *out, ct_table h) {
  return guard([&] {
    need_out(out);
    *out = tbl(h).serial();
  });
}

const char *ct_table_state_name(int32_t optimizer, int32_t i) {
  switch (optimizer) {
    case CT_OPT_SGD: return i == 0 ? "momentum_buffer" : nullptr;
    case CT_OPT_ADAGRAD:
    case CT_OPT_ROWWISE_ADAGRAD: return i == 0 ? "sum" : nullptr;
    case CT_OPT_SPARSE_ADAM:
    case CT_OPT_ADAMW: return i == 0 ? "exp_avg" : i == 1 ? "exp_avg_sq" : nullptr;
    case CT_OPT_FTRL: return i == 0 ? "z" : i == 1 ? "n" : nullptr;
    default: return nullptr;
  }
}

ct_error ct_table_lookup(ct_tensor *rows, ct_table h, ct_tensor keys) {
  return guard([&] {
    need_out(rows);
    keyed(tbl(h), keys, [&](Table &t, const Keys &k) { *rows = ct::wrap(t.lookup(k)); });
  });
}

ct_error ct_table_indices(ct_tensor *out, ct_table h, ct_tensor keys, int32_t insert) {
  return guard([&] {
    need_out(out);
    keyed(tbl(h), keys, [&](Table &t, const Keys &k) { *out = ct::wrap(t.indices(k, insert != 0)); });
  });
}

ct_error ct_table_read(ct_tensor *rows, ct_tensor *found, ct_table h, ct_tensor keys,
                       int32_t default_mode) {
  return guard([&] {
    need_out(rows);
    keyed(tbl(h), keys, [&](Table &t, const Keys &k) {
      auto r = t.read(k, default_mode);
      wrap_pair(rows, found, std::move(r.first), std::move(r.second));
    });
  });
}

ct_error ct_table_lookup_into(float *rows, int64_t rows_len, ct_table h, const int64_t *ids, int64_t n) {
  return guard([&] {
    Table &t = tbl(h);
    const Keys k = host_keys(ids, n);
    into_rows(t, rows, rows_len, n, [&](at::Tensor &out) { t.lookup_into(k, out); });
  });
}

ct_error ct_table_read_into(float *rows, int64_t rows_len, uint8_t *found, ct_table h, const int64_t *ids,
                            int64_t n, int32_t default_mode) {
  return guard([&] {
    Table &t = tbl(h);
    const Keys k = host_keys(ids, n);
    into_rows(t, rows, rows_len, n, [&](at::Tensor &out) { t.read_into(k, default_mode, out, found); });
  });
}

ct_error ct_table_write(ct_table h, ct_tensor keys, ct_tensor values) {
  return guard([&] { keyed(tbl(h), keys, [&](Table &t, const Keys &k) { t.write(k, ct::get(values)); }); });
}

ct_error ct_table_update(ct_table h, ct_tensor keys, ct_tensor grads) {
  return guard([&] { keyed(tbl(h), keys, [&](Table &t, const Keys &k) { t.update(k, ct::get(grads)); }); });
}

ct_error ct_table_update_by_name(const char *name, ct_tensor keys, ct_tensor grads) {
  return guard([&] {
    if (name == nullptr) throw ct::arg_error("table name is NULL");
    auto t = ct::table::find_table(name);
    keyed(*t, keys, [&](Table &tt, const Keys &k) { tt.update(k, ct::get(grads)); });
  });
}

ct_error ct_table_prefetch(int64_t *id, ct_table h, ct_tensor keys, int32_t default_mode) {
  return guard([&] {
    need_out(id);
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys);
    *id = t.prefetch(k, default_mode);
  });
}

ct_error ct_table_prefetch_wait(ct_tensor *rows, ct_tensor *found, int32_t *ready, ct_table h,
                                int64_t id, int64_t timeout_us) {
  return guard([&] {
    need_out(rows);
    need_out(ready);
    at::Tensor r, f;
    bool done = tbl(h).wait(id, timeout_us, &r, found != nullptr ? &f : nullptr);
    *ready = done ? 1 : 0;
    if (!done) return;
    wrap_pair(rows, found, std::move(r), std::move(f));
  });
}

ct_error ct_table_prefetch_discard(ct_table h, int64_t id) {
  return guard([&] { tbl(h).discard(id); });
}

ct_error ct_table_delete(int64_t *deleted, ct_table h, ct_tensor keys) {
  return guard([&] {
    Table &t = tbl(h);
    Keys k = ct::table::check_keys(keys);
    int64_t n = t.erase(k);
    if (deleted != nullptr) *deleted = n;
  });
}

ct_error ct_table_clear(ct_table h) {
  return guard([&] { tbl(h).clear(); });
}

ct_error ct_table_scratch_stats(int64_t *kept_bytes, int64_t *allocated) {
  return guard([&] {
    need_out(kept_bytes);
    need_out(allocated);
    ct::table::scratch_stats(kept_bytes, allocated);
  });
}

ct_error ct_table_stats_get(ct_table_stats *out, ct_table h) {
  return guard([&] {
    need_out(out);
    *out = tbl(h).stats();
  });
}

ct_error ct_table_export(ct_tensor *ids, ct_tensor *rows, ct_tensor *states, int32_t cap,
                         int64_t *step, ct_table h) {
  return guard([&] {
    need_out(ids);
    need_out(rows);
    c10::NoGradGuard no_grad;
    auto snap = tbl(h).snapshot();
    const int32_t ns = static_cast<int32_t>(snap.states.size());
    if (cap < ns) throw ct::arg_error("states has room for " + std::to_string(cap) + " tensors, the table has " + std::to_string(ns));
    if (ns > 0 && states == nullptr) throw ct::arg_error("states is NULL");
    // Wrap last: nothing is handed out unless everything is.
    std::vector<ct_tensor> made;
    try {
      made.push_back(ct::wrap(snap.ids));
      made.push_back(ct::wrap(snap.rows));
      for (auto &s : snap.states) made.push_back(ct::wrap(s));
    } catch (...) {
      for (auto m : made) ct_tensor_free(m);
      throw;
    }
    *ids = made[0];
    *rows = made[1];
    for (int32_t i = 0; i < ns; i++) states[i] = made[static_cast<size_t>(2 + i)];
    if (step != nullptr) *step = snap.step;
  });
}

}  // extern "C"
