// storage.cc.h: a table's construction and its row storage: blocks appended as the indices
// grow (carved from huge-page slabs once large, or one chunk per growth for tensor kernels), the
// per-row state that follows them, and the insertion of new ids with their rows' initial values.
// Compiled as part of unity_table.cc, after table.cc.h (class Table) and the files listed there.

namespace ct {
namespace table {

// ---- construction ---------------------------------------------------------------------------

namespace {
at::Device table_device(const ct_table_config &cfg) {
  at::Device d = to_device(cfg.device);
  if (d.is_cuda() && !at::hasCUDA()) throw arg_error("CUDA is not available to this libtorch");
  return d;
}
}  // namespace

Table::Table(std::string name, const ct_table_config &cfg)
    : name_(std::move(name)),
      dim_(cfg.dim),
      block_rows_(cfg.block_rows != 0 ? cfg.block_rows
                  : cfg.device.type == CT_CUDA ? kDefaultCudaBlockRows
                                               : kDefaultBlockRows),
      device_(table_device(cfg)),
      raw_(device_.is_cpu() && (cfg.flags & CT_TABLE_TENSOR_KERNELS) == 0),
      cfg_(cfg) {
  if (dim_ <= 0 || dim_ > kMaxDim) throw arg_error("dim must be in [1, 2^20], got " + std::to_string(dim_));
  if (block_rows_ <= 0 || block_rows_ > kMaxBlockRows) {
    throw arg_error("block_rows must be in [1, 2^24], got " + std::to_string(cfg.block_rows));
  }
  if ((block_rows_ & (block_rows_ - 1)) == 0) block_shift_ = __builtin_ctzll(static_cast<uint64_t>(block_rows_));
  if (cfg.layout != CT_LAYOUT_INTERLEAVED && cfg.layout != CT_LAYOUT_SEPARATE) {
    throw arg_error("unknown layout " + std::to_string(cfg.layout));
  }
  if ((cfg.flags & ~(CT_TABLE_TENSOR_KERNELS | CT_TABLE_TRACK_ACCESS)) != 0) throw arg_error("unknown flags");
  deltas_.lineage = fresh_lineage();
  init_.kind = cfg.initializer;
  std::copy(cfg.init_params, cfg.init_params + 4, init_.p);
  init_.seed = cfg.seed;
  init_.dim = dim_;
  init_.validate();
  opt_.kind = cfg.optimizer;
  opt_.p = OptimParams::from_array(opt_.kind, cfg.opt_params);
  opt_.dim = dim_;
  opt_.validate();

  nstates_ = opt_.num_states();
  width_[0] = dim_;
  for (int s = 0; s < nstates_; s++) {
    StateSpec st = opt_.state(s);
    width_[s + 1] = st.per_element ? dim_ : 1;
    sinit_[s + 1] = st.init;
    vmax_[s + 1] = std::fabs(static_cast<double>(st.init));
  }
  vmax_[0] = init_.bound();
  if (cfg.layout == CT_LAYOUT_INTERLEAVED) {
    narr_ = 1;
    int64_t off = 0;
    for (int s = 0; s < nslots(); s++) {
      arr_[s] = 0;
      off_[s] = off;
      off += width_[s];
    }
    for (int s = 0; s < nslots(); s++) stride_[s] = off;
    arr_width_ = {off};
  } else {
    narr_ = nslots();
    for (int s = 0; s < nslots(); s++) {
      arr_[s] = s;
      off_[s] = 0;
      stride_[s] = width_[s];
      arr_width_.push_back(width_[s]);
    }
  }

  const int64_t cap = cfg.capacity;
  check_capacity(cap);
  map_ = ct_idmap_new(static_cast<size_t>(cap));
  if (map_ == nullptr) throw std::bad_alloc();
  try {
    ensure_rows(cap);
  } catch (...) {
    ct_idmap_free(map_);
    throw;
  }
}

Table::~Table() { ct_idmap_free(map_); }

// A capacity is refused at once, before anything is allocated, when it is beyond
// kMaxCapacity or when the memory it asks for up front exceeds the machine's physical memory
// (it could only end in std::bad_alloc after seconds of allocating, or in swap): its rows'
// floats (the embedding and the states, 4 bytes each) and kBytesPerId of id map and
// bookkeeping a row, on the host for CPU tables; for a table on a GPU only the id map's share
// is host memory (the GPU's allocator refuses what does not fit its memory).
void Table::check_capacity(int64_t cap) const {
  if (cap < 0) throw arg_error("capacity must be >= 0");
  if (cap > kMaxCapacity) {
    throw arg_error("capacity " + std::to_string(cap) + " is beyond the limit of 2^40 (" + std::to_string(kMaxCapacity) + ") ids");
  }
  const double per_row = kBytesPerId + (device_.is_cpu() ? 4.0 * static_cast<double>(width_[0] + width_[1] + width_[2]) : 0.0);
  const double need = static_cast<double>(cap) * per_row;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const double have = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
  if (have > 0 && need > have) {
    char b[160];
    std::snprintf(b, sizeof b, "capacity %lld needs %.3g bytes up front, more than the machine's %.3g bytes of memory",
                  static_cast<long long>(cap), need, have);
    throw arg_error(b);
  }
}

// Tensor-kernel tables grow at least by the capacity they have (so a table of n blocks grown
// from nothing has about log2(n) chunks, and a table given its capacity up front has one), by
// at most kChunkGrowMax bytes beyond what is asked for: a doubling of a large GPU table could
// otherwise fail for want of memory the rows themselves do not need.
int64_t Table::chunk_growth(int64_t want) const {
  int64_t row_bytes = 0;
  for (int64_t w : arr_width_) row_bytes += w * static_cast<int64_t>(sizeof(float));
  const int64_t max_extra = std::max<int64_t>(1, static_cast<int64_t>(kChunkGrowMax) / (row_bytes * block_rows_));
  return std::max(want, nblocks_ + std::min(nblocks_, max_extra));
}

void Table::ensure_rows(int64_t need) {
  if (need <= capacity()) return;
  const int64_t want = (need + block_rows_ - 1) / block_rows_;
  if (raw_) {
    add_blocks(want);
  } else {
    add_chunk(chunk_growth(want));
  }
}

// Momentum stamps and metadata for `want` blocks. If this throws, the vectors may be longer
// than the rows, which nothing relies on.
void Table::grow_row_state(int64_t want) {
  if (opt_.has_momentum()) stamp_.resize(static_cast<size_t>(want * block_rows_), 0);
  meta_.grow(want);
}

// Raw kernels: blocks of their own while small, then carved out of slabs.
void Table::add_blocks(int64_t want) {
  const size_t total = static_cast<size_t>(want * narr_);
  std::shared_ptr<Mapping> slab_next[3];
  size_t used_next[3] = {0, 0, 0};
  std::vector<at::Tensor> fresh(total - blocks_.size());
  for (int a = 0; a < narr_; a++) {
    const size_t bb = static_cast<size_t>(block_rows_ * arr_width_[a]) * sizeof(float);
    std::shared_ptr<Mapping> slab = slab_[a];
    size_t used = slab_used_[a];
    for (int64_t b = nblocks_; b < want; b++) {
      const size_t k = static_cast<size_t>((b - nblocks_) * narr_ + a);
      if (static_cast<size_t>(want) * bb < kSlabMin) {
        fresh[k] = at::zeros({block_rows_, arr_width_[a]}, float_opts());
        continue;
      }
      if (slab == nullptr || slab->bytes - used < bb) {
        // A new slab: room for the blocks still wanted, and for growth (a quarter of what the
        // array holds), within [kSlabMin, kSlabMax] unless one block is larger.
        const size_t held = static_cast<size_t>(b) * bb, still = static_cast<size_t>(want - b) * bb;
        size_t bytes = std::max(still, std::min(std::max(held / 4, kSlabMin), kSlabMax));
        bytes = std::max(bytes, bb);
        bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
        slab = map_slab(bytes);
        used = 0;
      }
      std::shared_ptr<Mapping> keep = slab;
      fresh[k] = at::from_blob(static_cast<char *>(slab->p) + used, {block_rows_, arr_width_[a]},
                               [keep](void *) {}, float_opts());
      used += (bb + 63) / 64 * 64;
    }
    slab_next[a] = slab;
    used_next[a] = used;
  }
  blocks_.reserve(total);
  ptr_.reserve(total);
  grow_row_state(want);
  // nothing below throws
  for (int a = 0; a < narr_; a++) {
    slab_[a] = std::move(slab_next[a]);
    slab_used_[a] = used_next[a];
  }
  for (auto &t : fresh) {
    ptr_.push_back(t.data_ptr<float>());
    blocks_.push_back(std::move(t));
  }
  nblocks_ = want;
}

// Tensor kernels: one chunk per array holds all the new blocks.
void Table::add_chunk(int64_t want) {
  std::vector<at::Tensor> chunk;
  for (int a = 0; a < narr_; a++) {
    chunk.push_back(at::zeros({(want - nblocks_) * block_rows_, arr_width_[a]}, float_opts()));
  }
  chunks_.reserve(chunks_.size() + chunk.size());
  chunk_row0_.reserve(chunk_row0_.size() + 1);
  block_chunk_.reserve(static_cast<size_t>(want));
  grow_row_state(want);
  // nothing below throws
  block_chunk_.resize(static_cast<size_t>(want), static_cast<int32_t>(chunk_row0_.size()));
  chunk_row0_.push_back(nblocks_ * block_rows_);
  for (auto &c : chunk) chunks_.push_back(std::move(c));
  nblocks_ = want;
}

void Table::free_storage() {
  if (freed_) return;
  freed_ = true;
  std::vector<at::Tensor>().swap(blocks_);
  std::vector<at::Tensor>().swap(chunks_);
  std::vector<int64_t>().swap(chunk_row0_);
  std::vector<int32_t>().swap(block_chunk_);
  std::vector<float *>().swap(ptr_);
  std::vector<int64_t>().swap(stamp_);
  for (auto &sl : slab_) sl.reset();
  meta_.truncate(0);
  std::vector<int64_t>().swap(deltas_.deleted);
  std::unordered_map<int64_t, int64_t>().swap(adm_.seen);
  nblocks_ = 0;
  ct_idmap_free(map_);
  map_ = nullptr;
}

// ---- inserting ------------------------------------------------------------------------------

void Table::insert_ids(const int64_t *ids, int64_t n, int64_t *rows, uint8_t *is_new) {
  if (n == 0) return;
  const int64_t hw = ct_idmap_high_water(map_);
  if (n > std::numeric_limits<int64_t>::max() - hw) throw arg_error("too many ids");
  ensure_rows(hw + n);
  if (ct_idmap_find_or_insert(map_, ids, static_cast<size_t>(n), rows, is_new) < 0) {
    throw std::bad_alloc();
  }
}

void Table::insert_missing(const int64_t *ids, int64_t n, int64_t *rows, uint8_t *is_new) {
  std::fill_n(is_new, n, uint8_t{0});
  Missing m(ids, rows, n);
  std::vector<uint8_t> mnew(m.ids.size());
  insert_ids(m.ids.data(), static_cast<int64_t>(m.ids.size()), m.rows.data(), mnew.data());
  m.put(rows);
  for (size_t j = 0; j < m.pos.size(); j++) is_new[m.pos[j]] = mnew[j];
}

size_t Table::find_rows(const int64_t *ids, int64_t n, int64_t *rows) const {
  // Slices of at least kFindGrain ids (~250 us of finds): a parallel region costs tens of
  // microseconds (see for_rows). (parallel_for calls the body once over the whole range with
  // one thread or inside a parallel region.)
  constexpr int64_t kFindGrain = 16384;
  if (n < 2 * kFindGrain) return ct_idmap_find(map_, ids, static_cast<size_t>(n), rows);
  std::atomic<size_t> found{0};
  at::parallel_for(0, n, kFindGrain, [&](int64_t b, int64_t e) {
    found.fetch_add(ct_idmap_find(map_, ids + b, static_cast<size_t>(e - b), rows + b), std::memory_order_relaxed);
  });
  return found.load();
}

void Table::find_then_insert(const int64_t *ids, int64_t n, int64_t *rows, uint8_t *is_new) {
  if (find_rows(ids, n, rows) == static_cast<size_t>(n)) {
    std::fill_n(is_new, n, uint8_t{0});
    return;
  }
  insert_missing(ids, n, rows, is_new);
}

void Table::rollback(const int64_t *ids, const uint8_t *is_new, int64_t n) {
  std::vector<int64_t> fresh;
  for (int64_t i = 0; i < n; i++) {
    if (is_new[i]) fresh.push_back(ids[i]);
  }
  // If even this fails (out of memory), the ids stay with initialised or stale rows.
  ct_idmap_erase(map_, fresh.data(), fresh.size(), nullptr);
}

void Table::init_rows_raw(const int64_t *ids, const int64_t *rows, const uint8_t *is_new,
                          int64_t n, bool skip_embedding) {
  const int64_t now = step_;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) {
      if (!is_new[i]) continue;
      const int64_t r = rows[i];
      if (!skip_embedding) init_.row(ids[i], slot_ptr(0, r));
      for (int s = 1; s < nslots(); s++) std::fill_n(slot_ptr(s, r), width_[s], sinit_[s]);
      if (!stamp_.empty()) stamp_[static_cast<size_t>(r)] = now;
    }
  };
  for_rows(n, dim_ * 4, body);
}

void Table::init_rows_tensor(const int64_t *ids, const int64_t *rows, const uint8_t *is_new,
                             int64_t n, bool skip_embedding) {
  std::vector<int64_t> fresh_rows, fresh_ids;
  for (int64_t i = 0; i < n; i++) {
    if (is_new[i]) {
      fresh_rows.push_back(rows[i]);
      fresh_ids.push_back(ids[i]);
    }
  }
  const int64_t m = static_cast<int64_t>(fresh_rows.size());
  if (m == 0) return;
  const RowPlan p = plan(fresh_rows);
  if (!skip_embedding) {
    auto host = staging({m, dim_}, at::kFloat, device_);
    float *v = host.data_ptr<float>();
    for (int64_t i = 0; i < m; i++) init_.row(fresh_ids[static_cast<size_t>(i)], v + i * dim_);
    scatter_slot_tensor(p, 0, upload(host, device_));
  }
  for (int s = 1; s < nslots(); s++) {
    scatter_slot_tensor(p, s, at::full({m, width_[s]}, sinit_[s], float_opts()));
  }
  for (int64_t r : fresh_rows) {
    if (!stamp_.empty()) stamp_[static_cast<size_t>(r)] = step_;
  }
}

}  // namespace table
}  // namespace ct
