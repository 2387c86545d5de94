// check.cc.h: Table::check (ct_table_check), the table's invariants checked on demand: a
// long-running job, a test or a load can ask whether a table is whole. Compiled as part of
// unity_table.cc, after the files of the operations it checks.
//
// What holds between operations (mu_ held shared here, so nothing changes meanwhile):
//   - the id map's own invariants (ct_idmap_check), its size + free list = high water mark,
//     and every index below the storage's capacity;
//   - storage: raw tables hold narr_ block tensors per block with their data pointers, tensor
//     tables a chunk per growth covering every block; the per-row metadata and momentum stamps
//     cover every block too;
//   - per row: the last step and the momentum stamp at most the step counter;
//   - admission: counts only for ids without a row, each >= 1, none with admission off;
//   - deltas: no deletion or count log before the first mark; a lineage != 0;
//   - configuration: flags, kind, kernels and states as the table was built, parameters valid;
//   - values: rows and optimizer states finite, accumulators and second moments >= 0.

namespace ct {
namespace table {

namespace {
[[noreturn]] void broken(const std::string &name, const std::string &what) {
  throw arg_error("table \"" + name + "\" is inconsistent: " + what);
}
}  // namespace

void Table::check() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  check_open();
  const int rc = ct_idmap_check(map_);
  if (rc != 0) broken(name_, "the id map breaks its invariant " + std::to_string(rc));
  const int64_t hw = ct_idmap_high_water(map_), m = static_cast<int64_t>(ct_idmap_size(map_));
  if (m > hw || hw > capacity()) {
    broken(name_, std::to_string(m) + " ids, high water " + std::to_string(hw) + ", capacity " + std::to_string(capacity()));
  }
  // configuration
  if (cfg_.dim != dim_ || opt_.kind != cfg_.optimizer || nstates_ != opt_.num_states() ||
      ((cfg_.flags & CT_TABLE_TRACK_ACCESS) != 0) != meta_.access() ||
      raw_ != (device_.is_cpu() && (cfg_.flags & CT_TABLE_TENSOR_KERNELS) == 0)) {
    broken(name_, "its configuration does not match its storage");
  }
  try {
    opt_.validate();
  } catch (const std::exception &e) {
    broken(name_, std::string("optimizer parameters: ") + e.what());
  }
  // storage
  if (raw_) {
    if (static_cast<int64_t>(blocks_.size()) != nblocks_ * narr_ || ptr_.size() != blocks_.size()) {
      broken(name_, "block arrays do not match the block count");
    }
    for (size_t i = 0; i < blocks_.size(); i++) {
      const at::Tensor &b = blocks_[i];
      const int64_t a = static_cast<int64_t>(i) % narr_;
      if (b.data_ptr<float>() != ptr_[i] || b.size(0) != block_rows_ || b.size(1) != arr_width_[static_cast<size_t>(a)]) {
        broken(name_, "block " + std::to_string(i) + " does not match its pointer or shape");
      }
    }
  } else {
    const int64_t nchunks = static_cast<int64_t>(chunk_row0_.size());
    if (static_cast<int64_t>(block_chunk_.size()) != nblocks_ || static_cast<int64_t>(chunks_.size()) != nchunks * narr_) {
      broken(name_, "chunks do not match the block count");
    }
    int64_t rows = 0;
    for (int64_t c = 0; c < nchunks; c++) rows += chunks_[static_cast<size_t>(c * narr_)].size(0);
    if (rows < capacity()) broken(name_, "chunks hold fewer rows than the capacity");
  }
  if (!meta_.chunks_held(nblocks_) || ((meta_.access() || meta_.tracked()) && meta_.chunks() != nblocks_)) {
    broken(name_, "per-row metadata does not cover the blocks");
  }
  if (opt_.has_momentum() ? static_cast<int64_t>(stamp_.size()) < capacity() : !stamp_.empty()) {
    broken(name_, "momentum stamps do not cover the rows");
  }
  // deltas and admission
  if (deltas_.lineage == 0 || deltas_.seq < 0) broken(name_, "no delta lineage");
  if (!meta_.tracked() && (!deltas_.deleted.empty() || !adm_.changed.empty() || adm_.all_changed)) {
    broken(name_, "a deletion or count log before the first mark");
  }
  if (adm_.after <= 1 && !adm_.seen.empty()) broken(name_, "admission counts with admission off");
  std::vector<int64_t> counted, found;
  for (const auto &p : adm_.seen) {
    if (p.second < 1) broken(name_, "admission count " + std::to_string(p.second) + " of id " + std::to_string(p.first));
    counted.push_back(p.first);
  }
  found.resize(counted.size());
  if (ct_idmap_find(map_, counted.data(), counted.size(), found.data()) != 0) {
    broken(name_, "an id has both a row and an admission count");
  }
  // rows
  std::vector<int64_t> rows;
  rows.reserve(static_cast<size_t>(m));
  each_row_by_index(map_, [&](int64_t r, int64_t id) {
    if (r < 0 || r >= hw) broken(name_, "id " + std::to_string(id) + " has row index " + std::to_string(r));
    if (meta_.access() && meta_.last(r) > step_) {
      broken(name_, "id " + std::to_string(id) + " was last seen at step " + std::to_string(meta_.last(r)) +
                        ", beyond the step counter " + std::to_string(step_));
    }
    if (!stamp_.empty() && (stamp_[static_cast<size_t>(r)] < 0 || stamp_[static_cast<size_t>(r)] > step_)) {
      broken(name_, "id " + std::to_string(id) + " has momentum stamp " + std::to_string(stamp_[static_cast<size_t>(r)]) +
                        ", the step counter is " + std::to_string(step_));
    }
    rows.push_back(r);
  });
  if (static_cast<int64_t>(rows.size()) != m) broken(name_, "the id map lists " + std::to_string(rows.size()) + " of its " + std::to_string(m) + " ids");
  check_values(rows);
}

// Rows and states, a chunk of rows at a time: finite, and the states that only grow from a
// non-negative start (Adagrad's sums, Adam's second moments, FTRL's n) >= 0.
void Table::check_values(const std::vector<int64_t> &rows) const {
  constexpr size_t kChunk = 4096;
  std::vector<float> buf;
  for (size_t off = 0; off < rows.size(); off += kChunk) {
    const std::vector<int64_t> part(rows.begin() + static_cast<std::ptrdiff_t>(off),
                                    rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), off + kChunk)));
    for (int s = 0; s < nslots(); s++) {
      const size_t w = static_cast<size_t>(width_[s]);
      buf.resize(part.size() * w);
      read_raw(part, s, buf.data());
      const bool nonneg = s > 0 && (opt_.kind == CT_OPT_ADAGRAD || opt_.kind == CT_OPT_ROWWISE_ADAGRAD ||
                                    ((opt_.kind == CT_OPT_SPARSE_ADAM || opt_.kind == CT_OPT_ADAMW || opt_.kind == CT_OPT_FTRL) && s == 2));
      for (size_t i = 0; i < buf.size(); i++) {
        if (!std::isfinite(buf[i]) || (nonneg && buf[i] < 0)) {
          broken(name_, std::string(s == 0 ? "row" : opt_.state(s - 1).name) + " value " + std::to_string(buf[i]) +
                            " at row index " + std::to_string(part[i / w]));
        }
      }
    }
  }
}

#ifdef CT_TEST_HOOKS
// Test builds only (make table-sanitize): breaks one invariant behind the API's back, so that a
// test sees check() find it. 0: an admission count for an id with a row; 1: the step counter
// set back below the rows' last steps and stamps; 2: a NaN in the first live row.
void Table::test_break(int what) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  int64_t row = -1, id = 0;
  each_row_by_index(map_, [&](int64_t r, int64_t i) {
    if (row < 0) {
      row = r;
      id = i;
    }
  });
  if (row < 0) throw arg_error("test_break needs a row");
  if (what == 0) {
    adm_.seen[id] = 1;
    adm_.after = std::max<int64_t>(adm_.after, 2);
  } else if (what == 1) {
    step_ = 0;
  } else {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    write_raw({row}, 0, std::vector<float>(static_cast<size_t>(dim_), nan).data());
  }
}
#endif

}  // namespace table
}  // namespace ct

#ifdef CT_TEST_HOOKS
extern "C" ct_error ct_test_table_break(ct_table h, int32_t what) {
  return guard([&] { tbl(h).test_break(what); });
}
#endif

extern "C" ct_error ct_table_check(ct_table h) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).check();
  });
}
