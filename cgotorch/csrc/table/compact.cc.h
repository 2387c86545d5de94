// compact.cc.h: compaction (ct_table_compact, and a budget eviction's): row indices packed
// into [0, size), the blocks above freed, and the id map rebuilt at the size its ids need when
// it holds far more. Compiled as part of unity_table.cc.

namespace ct {

void release_tensor_cache() noexcept;  // tensor/allocator.cc.h

// Frees every thread's kept scratch vectors (scratch.h); release_tensor_cache calls it.
void release_table_scratch() noexcept { table::release_scratch_pools(); }

namespace table {

namespace {

// A fresh map holding map's ids at the indices they get from the packing moves from[k] ->
// to[k] (what ct_idmap_pack reports): a fresh map numbers the ids of a batch 0, 1, 2, ... in
// batch order, so the batch is the ids in packed index order. Sized for them (the load a
// reserve gives), whatever the map they come from grew to. Throws std::bad_alloc, nothing
// changed, when memory runs out.
ct_idmap *packed_copy(const ct_idmap *map, const std::vector<int64_t> &from, const std::vector<int64_t> &to) {
  const size_t m = ct_idmap_size(map), hw = static_cast<size_t>(ct_idmap_high_water(map));
  std::vector<int64_t> id_at(hw), idx(m);
  {
    std::vector<uint8_t> live(hw, 0);
    ct_idmap_export_by_index(map, id_at.data(), live.data(), hw);
  }
  for (size_t k = 0; k < from.size(); k++) id_at[static_cast<size_t>(to[k])] = id_at[static_cast<size_t>(from[k])];
  ct_idmap *nm = ct_idmap_new(m);
  if (nm == nullptr || ct_idmap_find_or_insert(nm, id_at.data(), m, idx.data(), nullptr) < 0) {
    ct_idmap_free(nm);
    throw std::bad_alloc();
  }
  return nm;
}

// Hands the heap's free memory back to the system (glibc: malloc_trim). What compaction frees
// besides its slab blocks (those it gives back itself: release_slab_block) is heap memory: the
// blocks of small tables, the old id map, per-row metadata and stamps. glibc keeps freed
// chunks in its free lists and arenas and returns only the top of the main heap by itself: with
// 2M ids, 90% evicted, about 110 MB stayed resident after a Compact (see TestCompactReturnsMemory).
// Other C libraries: nothing (their own policy applies). The tensor allocator's cached buffers
// and every thread's table scratch are freed first (release_tensor_cache, which then calls
// malloc_trim). Takes no table lock.
void return_free_memory() { release_tensor_cache(); }

}  // namespace

std::vector<at::Tensor> Table::gather_chunk(const std::vector<int64_t> &rows, int64_t nb) const {
  std::vector<at::Tensor> one;
  for (int a = 0; a < narr_; a++) one.push_back(at::zeros({nb * block_rows_, arr_width_[a]}, float_opts()));
  if (rows.empty()) return one;
  const RowPlan p = plan(rows);
  const int64_t m = static_cast<int64_t>(rows.size());
  for (int s = 0; s < nslots(); s++) {
    one[static_cast<size_t>(arr_[s])].narrow(1, off_[s], width_[s]).narrow(0, 0, m).copy_(gather_slot_tensor(p, s));
  }
  return one;
}

void Table::set_chunk(std::vector<at::Tensor> one, int64_t nb) {
  chunks_ = nb > 0 ? std::move(one) : std::vector<at::Tensor>();
  chunk_row0_.assign(nb > 0 ? 1 : 0, 0);
  block_chunk_.assign(static_cast<size_t>(nb), 0);
}

void Table::compact() {
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    check_open();
    compact_locked(false);
  }
  return_free_memory();
}

// Compaction packs the row indices into [0, size) (ct_idmap_pack: each row at or above size
// moves into a free index below it, the others stay where they are) and frees the blocks
// above: it moves as many rows as there were free indices below size. When the id map has
// room for over twice its ids at its maximum load (over 43 bytes an id: more than a map grown
// by inserts ever holds, as after removing a quarter of its ids or more; the map never
// shrinks by itself; a capacity reserved up front goes too), or with shrink_map whenever that
// is smaller, compaction builds a map sized for the ids instead, with the same packed indices.
void Table::compact_locked(bool shrink_map) {
  const size_t m = ct_idmap_size(map_), moves = ct_idmap_pack_moves(map_);
  std::vector<int64_t> from(moves), to(moves);
  const bool rebuild = ct_idmap_capacity(map_) > 2 * m || (shrink_map && ct_idmap_capacity(map_) > m + m / 3);
  if (rebuild || !raw_) ct_idmap_pack(map_, from.data(), to.data(), moves, 0);  // the moves, nothing changed
  const int64_t nb = (static_cast<int64_t>(m) + block_rows_ - 1) / block_rows_;
  // What can fail comes first: the smaller map, and for tensor kernels the rows as they will
  // be, copied into one new chunk of nb blocks (out of GPU memory, say; the old chunks are
  // freed whole after). A failure leaves the table as it was.
  ct_idmap *smaller = rebuild ? packed_copy(map_, from, to) : nullptr;
  std::vector<at::Tensor> one;
  if (!raw_) {
    try {
      std::vector<int64_t> src(m);
      for (size_t i = 0; i < m; i++) src[i] = static_cast<int64_t>(i);
      for (size_t k = 0; k < moves; k++) src[static_cast<size_t>(to[k])] = from[k];
      one = gather_chunk(src, nb);
    } catch (...) {
      ct_idmap_free(smaller);
      throw;
    }
  }
  if (smaller != nullptr) {
    ct_idmap_free(map_);
    map_ = smaller;
  } else {
    ct_idmap_pack(map_, from.data(), to.data(), moves, 1);  // allocates nothing: cannot fail
  }
  for (size_t k = 0; k < moves; k++) {
    if (raw_) {  // (tensor kernels copied theirs into `one` above)
      for (int s = 0; s < nslots(); s++) {
        std::memcpy(slot_ptr(s, to[k]), slot_ptr(s, from[k]), sizeof(float) * static_cast<size_t>(width_[s]));
      }
    }
    meta_.move(to[k], from[k]);
    if (!stamp_.empty()) stamp_[static_cast<size_t>(to[k])] = stamp_[static_cast<size_t>(from[k])];
  }
  const size_t arrays = static_cast<size_t>(nb * narr_), slots = static_cast<size_t>(nb * block_rows_);
  if (raw_) {
    for (size_t i = arrays; i < blocks_.size(); i++) release_slab_block(blocks_[i]);
    blocks_.resize(arrays);
    blocks_.shrink_to_fit();
    ptr_.resize(arrays);
    ptr_.shrink_to_fit();
  } else {
    set_chunk(std::move(one), nb);
  }
  nblocks_ = nb;
  meta_.truncate(nb);
  if (!stamp_.empty()) {
    stamp_.resize(slots);
    if (stamp_.capacity() - slots > slots / 8) stamp_.shrink_to_fit();  // (a copy: worth 1/8)
  }
  remaps_++;
}

}  // namespace table
}  // namespace ct

extern "C" {

ct_error ct_table_compact(ct_table h) {
  return guard([&] {
    c10::NoGradGuard no_grad;
    tbl(h).compact();
  });
}

}  // extern "C"
