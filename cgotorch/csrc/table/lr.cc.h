// lr.cc.h: changing a table's learning rate between steps (learning-rate schedules), and
// its ct_table_set_lr entry point.
// Compiled as part of unity_table.cc, after capi.cc.h (tbl) and the files it needs.

namespace ct {
namespace table {

// The rule's learning rate is p.lr for every optimizer (FTRL's alpha). A step reads it when it
// runs, so a change takes effect at the next step, as a change of torch's param_groups' lr
// does. SGD with momentum is the exception that needs work: rows absent from steps move
// lazily, in closed form over the steps they missed, with the learning rate of now; so before
// the rate changes every row is brought up to date with the old one (a pass over the table),
// and marked changed for deltas (a copy kept by ApplyDelta must not catch them up with the
// new rate either).
void Table::set_lr(double lr) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  check_open();
  if (!std::isfinite(lr) || lr < 0) throw arg_error("the learning rate must be finite and >= 0");
  if (opt_.kind == CT_OPT_NONE) throw arg_error("the table has no optimizer");
  Optim next = opt_;
  next.p.lr = lr;
  next.validate();
  if (opt_.has_momentum() && next.p.lr != opt_.p.lr) catch_up_all();
  // p.lr alone: the steps read it under the lock, but update reads the rule's kind before it
  // takes the lock (the kind never changes).
  opt_.p.lr = lr;  // ct_table_config_get and checkpoints report it (config)
}

// Brings every row's weight and momentum buffer up to the current step (stamps = step_).
void Table::catch_up_all() {
  std::vector<int64_t> rows;
  each_row_by_index(map_, [&](int64_t r, int64_t) {
    if (stamp_[static_cast<size_t>(r)] < step_) rows.push_back(r);
  });
  if (rows.empty()) return;
  const int64_t n = static_cast<int64_t>(rows.size());
  if (raw_) {
    for_rows(n, dim_ * 4, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; i++) {
        const int64_t r = rows[static_cast<size_t>(i)];
        catch_up_raw(r, step_, slot_ptr(0, r), slot_ptr(1, r));
      }
    });
    for (int64_t r : rows) {  // vmax_ bounds what the table holds (set_lr is rare)
      for (int s = 0; s < 2; s++) note_max(s, max_abs_bits(slot_ptr(s, r), dim_));
    }
  } else {
    const RowPlan p = plan(rows);
    at::Tensor w = gather_slot_tensor(p, 0), b = gather_slot_tensor(p, 1);
    catch_up_tensor(rows, step_, w, b);
    scatter_slot_tensor(p, 0, w);
    scatter_slot_tensor(p, 1, b);
    raise_max(0, max_abs(w));
    raise_max(1, max_abs(b));
  }
  for (int64_t r : rows) stamp_[static_cast<size_t>(r)] = step_;
  modified(rows.data(), n);
}

}  // namespace table
}  // namespace ct

extern "C" {

ct_error ct_table_set_lr(ct_table h, double lr) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).set_lr(lr);
  });
}

}  // extern "C"
