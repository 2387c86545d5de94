// read_state.cc.h: the rows and optimizer states of a few ids (ct_table_read_state), what
// Export gives for them without copying the whole table.
// Compiled as part of unity_table.cc, after gather.cc.h (gather, index_tensor).

namespace ct {
namespace table {

std::vector<at::Tensor> Table::read_state(const Keys &k, uint8_t *found) {
  const int64_t n = k.n;
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::vector<int64_t> present_pos, present_rows;
  std::vector<at::Tensor> out;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    check_open();
    find_rows(k.ptr(), n, rows.data());
    for (int64_t i = 0; i < n; i++) {
      if (rows[static_cast<size_t>(i)] < 0) continue;
      present_pos.push_back(i);
      present_rows.push_back(rows[static_cast<size_t>(i)]);
    }
    const int64_t m = static_cast<int64_t>(present_rows.size());
    for (int s = 0; s < nslots(); s++) {
      auto o = at::zeros({n, width_[s]}, float_opts());
      if (m > 0) {
        auto present = at::empty({m, width_[s]}, float_opts());
        gather(present_rows.data(), m, s, present);
        if (m == n) {
          o = present;
        } else {
          o.index_copy_(0, index_tensor(present_pos, device_), present);
        }
      }
      out.push_back(o);
    }
  }
  for (auto &o : out) o = to_caller(o, k);
  if (found != nullptr) {
    for (int64_t i = 0; i < n; i++) found[i] = rows[static_cast<size_t>(i)] >= 0;
  }
  return out;
}

}  // namespace table
}  // namespace ct

extern "C" {

ct_error ct_table_read_state(ct_tensor *rows, ct_tensor *states, int32_t cap, ct_tensor *found,
                             ct_table h, ct_tensor keys) {
  return guard([&] {
    need_out(rows);
    Table &t = tbl(h);
    const int32_t ns = t.stats().num_states;
    if (cap < ns) throw ct::arg_error("states has room for " + std::to_string(cap) + " tensors, the table has " + std::to_string(ns));
    if (ns > 0 && states == nullptr) throw ct::arg_error("states is NULL");
    keyed(t, keys, [&](Table &tb, const Keys &k) {
      at::Tensor f = at::empty({k.n}, at::kBool);
      auto got = tb.read_state(k, reinterpret_cast<uint8_t *>(f.data_ptr<bool>()));
      if (f.device() != k.device) f = f.to(k.device);
      // Wrap last: nothing is handed out unless everything is.
      std::vector<ct_tensor> made;
      try {
        for (auto &g : got) made.push_back(ct::wrap(g));
        if (found != nullptr) made.push_back(ct::wrap(f));
      } catch (...) {
        for (auto m : made) ct_tensor_free(m);
        throw;
      }
      *rows = made[0];
      for (int32_t i = 0; i < ns; i++) states[i] = made[static_cast<size_t>(1 + i)];
      if (found != nullptr) *found = made.back();
    });
  });
}

}  // extern "C"
