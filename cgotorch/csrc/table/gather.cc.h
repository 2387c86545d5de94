// gather.cc.h: rows between the table and a batch: the tensor kernels' row plans, gathers
// and scatters per chunk, momentum catch-up factors, and the raw kernels' prefetching gather.
// Compiled as part of unity_table.cc, after table.cc.h (class Table) and the files listed there.

namespace ct {
namespace table {

namespace {
at::Tensor index_tensor(const std::vector<int64_t> &v, at::Device d) {
  auto t = staging({static_cast<int64_t>(v.size())}, at::kLong, d);
  if (!v.empty()) std::memcpy(t.data_ptr<int64_t>(), v.data(), v.size() * sizeof(int64_t));
  return upload(t, d);
}
}  // namespace

// Rows in one chunk (the usual case: a table given its capacity has one) keep the batch order;
// otherwise a counting sort by chunk, which keeps the batch order within each chunk.
RowPlan Table::plan(const std::vector<int64_t> &rows) const {
  const size_t n = rows.size();
  std::vector<int32_t> ch(n);
  bool mixed = false;
  for (size_t i = 0; i < n; i++) {
    const int64_t b = block_shift_ >= 0 ? rows[i] >> block_shift_ : rows[i] / block_rows_;
    ch[i] = block_chunk_[static_cast<size_t>(b)];
    mixed |= ch[i] != ch[0];
  }
  RowPlan p;
  p.n = static_cast<int64_t>(n);
  auto host = staging({mixed ? 2 : 1, p.n}, at::kLong, device_);
  int64_t *off = host.data_ptr<int64_t>(), *pos = mixed ? off + n : nullptr;
  if (!mixed) {
    if (n > 0) {
      p.chunks.push_back(ch[0]);
      p.begin.push_back(0);
    }
    for (size_t i = 0; i < n; i++) off[i] = rows[i] - chunk_row0_[static_cast<size_t>(ch[0])];
  } else {
    std::vector<int64_t> next(chunk_row0_.size() + 1, 0);  // counts, then where each chunk's rows go
    for (size_t i = 0; i < n; i++) next[static_cast<size_t>(ch[i]) + 1]++;
    for (size_t c = 0; c + 1 < next.size(); c++) {
      if (next[c + 1] > 0) {
        p.chunks.push_back(static_cast<int64_t>(c));
        p.begin.push_back(next[c]);
      }
      next[c + 1] += next[c];
    }
    for (size_t i = 0; i < n; i++) {
      const int64_t j = next[static_cast<size_t>(ch[i])]++;
      pos[j] = static_cast<int64_t>(i);
      off[j] = rows[i] - chunk_row0_[static_cast<size_t>(ch[i])];
    }
  }
  p.begin.push_back(p.n);
  auto dev = upload(host, device_);
  p.off = dev[0];
  if (mixed) p.pos = dev[1];
  return p;
}

at::Tensor Table::gather_slot_tensor(const std::vector<int64_t> &rows, int s) const {
  return gather_slot_tensor(plan(rows), s);
}

void Table::scatter_slot_tensor(const std::vector<int64_t> &rows, int s, const at::Tensor &src) {
  scatter_slot_tensor(plan(rows), s, src);
}

at::Tensor Table::gather_slot_tensor(const RowPlan &p, int s) const {
  auto slot = [&](size_t k) {
    return chunks_[static_cast<size_t>(p.chunks[k] * narr_ + arr_[s])].narrow(1, off_[s], width_[s]);
  };
  if (p.one_chunk()) return slot(0).index_select(0, p.off);
  auto out = at::empty({p.n, width_[s]}, float_opts());
  for (size_t k = 0; k < p.chunks.size(); k++) {
    const int64_t b0 = p.begin[k], m = p.begin[k + 1] - b0;
    out.index_copy_(0, p.pos.narrow(0, b0, m), slot(k).index_select(0, p.off.narrow(0, b0, m)));
  }
  return out;
}

void Table::scatter_slot_tensor(const RowPlan &p, int s, const at::Tensor &src) {
  for (size_t k = 0; k < p.chunks.size(); k++) {
    auto view = chunks_[static_cast<size_t>(p.chunks[k] * narr_ + arr_[s])].narrow(1, off_[s], width_[s]);
    const int64_t b0 = p.begin[k], m = p.begin[k + 1] - b0;
    auto part = p.one_chunk() ? src : src.index_select(0, p.pos.narrow(0, b0, m));
    view.index_copy_(0, p.off.narrow(0, b0, m), part);
  }
}

void Table::momentum_factors(const std::vector<int64_t> &rows, int64_t now, at::Tensor *move,
                             at::Tensor *decay) const {
  const int64_t n = static_cast<int64_t>(rows.size());
  auto mv = staging({n, 1}, at::kFloat, device_), dc = staging({n, 1}, at::kFloat, device_);
  float *pm = mv.data_ptr<float>(), *pd = dc.data_ptr<float>();
  for (int64_t i = 0; i < n; i++) {
    double S = 0, d = 1;
    const int64_t k = now - stamp_[static_cast<size_t>(rows[static_cast<size_t>(i)])];
    if (k > 0) opt_.catch_up_factors(k, &S, &d);
    pm[i] = static_cast<float>(opt_.p.lr * S);
    pd[i] = static_cast<float>(d);
  }
  *move = upload(mv, device_);
  *decay = upload(dc, device_);
}

// out: [n, width_[s]] on the storage device (CPU for raw tables).
void Table::gather(const int64_t *rows, int64_t n, int s, at::Tensor &out) const {
  const bool momentum = opt_.has_momentum();
  if (raw_) {
    float *o = out.data_ptr<float>();
    const int64_t w = width_[s];
    if (!momentum) {
      gather_plain(rows, n, s, o);
      return;
    }
    // SGD with momentum: rows brought up to date on the way.
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end && i < begin + kAhead; i++) prefetch(rows[i], s, s + 1, false);
      for (int64_t i = begin; i < end; i++) {
        if (i + kAhead < end) prefetch(rows[i + kAhead], s, s + 1, false);
        const int64_t r = rows[i];
        float *dst = o + i * w;
        std::memcpy(dst, slot_ptr(s, r), sizeof(float) * static_cast<size_t>(w));
        const int64_t k = step_ - stamp_[static_cast<size_t>(r)];
        if (k <= 0) continue;
        double S, decay;
        opt_.catch_up_factors(k, &S, &decay);
        const float *buf = slot_ptr(1, r);
        // dst + mv * buf for the row, buf * decay for the buffer
        const float mv = s == 0 ? static_cast<float>(-opt_.p.lr * S) : 0.f, dc = static_cast<float>(decay);
        for_lanes(w, [&](int64_t j, auto L) {
          const auto b = L.load(buf + j);
          L.store(dst + j, s == 0 ? L.load(dst + j) + mv * b : b * dc);
        });
      }
    };
    for_rows(n, w, body);
    return;
  }
  std::vector<int64_t> rv(rows, rows + n);
  const RowPlan p = plan(rv);
  auto g = gather_slot_tensor(p, s);
  if (momentum) {
    at::Tensor mv, dc;
    momentum_factors(rv, step_, &mv, &dc);
    if (s == 0) {
      g.sub_(gather_slot_tensor(p, 1) * mv);
    } else {
      g.mul_(dc);
    }
  }
  out.copy_(g);
}

namespace {
// Copies rows[begin, end) of one slot (w floats each, at addr(rows[i])) to out + i * w,
// prefetching rows kAhead ahead. W > 0: w == W, known to the compiler, whose inline copy of a
// short constant size is a few vector moves, where a call to memcpy of a run-time size costs
// about as much again (with the addressing below, lookups got 10-15% faster at D = 16 and 64).
// W == 0: any w, through memcpy (for 512 bytes and more GCC's inline copy is rep movs, slower
// here than the library's).
// (addr by value: a reference would be read again after every copy, as the fields were.)
template <int64_t W, class Addr>
void gather_span(const int64_t *rows, int64_t begin, int64_t end, int64_t w, const Addr addr, float *out) {
  const int64_t width = W > 0 ? W : w;
  const size_t bytes = sizeof(float) * static_cast<size_t>(width);
  for (int64_t i = begin; i < end && i < begin + kAhead; i++) prefetch_lines(addr(rows[i]), bytes, false);
  for (int64_t i = begin; i < end; i++) {
    if (i + kAhead < end) prefetch_lines(addr(rows[i + kAhead]), bytes, false);
    std::memcpy(out + i * width, addr(rows[i]), bytes);
  }
}
}  // namespace

void Table::gather_plain(const int64_t *rows, int64_t n, int s, float *out) const {
  const SlotAddr addr = slot_addr(s);
  const int64_t w = width_[s];
  auto body = [&](int64_t begin, int64_t end) {
    switch (w) {
      case 8: gather_span<8>(rows, begin, end, w, addr, out); break;
      case 16: gather_span<16>(rows, begin, end, w, addr, out); break;
      case 32: gather_span<32>(rows, begin, end, w, addr, out); break;
      case 64: gather_span<64>(rows, begin, end, w, addr, out); break;
      default: gather_span<0>(rows, begin, end, w, addr, out); break;
    }
  };
  for_rows(n, w, body);
}

// out: [n, dim] on the storage device.
void Table::gather_rows(const int64_t *ids, const int64_t *rows, int64_t n, int32_t mode, at::Tensor &out) const {
  if (n == 0) return;
  std::vector<int64_t> present_pos, present_rows, absent_pos;
  for (int64_t i = 0; i < n; i++) {
    if (rows[i] >= 0) {
      present_pos.push_back(i);
      present_rows.push_back(rows[i]);
    } else {
      absent_pos.push_back(i);
    }
  }
  if (absent_pos.empty()) {
    gather(rows, n, 0, out);
    return;
  }
  // Defaults first, then the present rows.
  auto defaults = at::zeros({static_cast<int64_t>(absent_pos.size()), dim_}, at::kFloat);
  if (mode == CT_READ_INITIAL) {
    float *p = defaults.data_ptr<float>();
    for (size_t i = 0; i < absent_pos.size(); i++) {
      init_.row(ids[absent_pos[i]], p + static_cast<int64_t>(i) * dim_);
    }
  }
  auto present = at::empty({static_cast<int64_t>(present_rows.size()), dim_}, float_opts());
  gather(present_rows.data(), static_cast<int64_t>(present_rows.size()), 0, present);
  out.index_copy_(0, index_tensor(absent_pos, device_), defaults.to(device_));
  out.index_copy_(0, index_tensor(present_pos, device_), present);
}

// Slot s of rows (rows[i] >= 0) to and from host memory [n, width]: saves, imports, deltas.
void Table::read_raw(const std::vector<int64_t> &rows, int s, float *out) const {
  const int64_t w = width_[s];
  if (raw_) {
    for (size_t i = 0; i < rows.size(); i++) {
      std::memcpy(out + static_cast<int64_t>(i) * w, slot_ptr(s, rows[i]), sizeof(float) * static_cast<size_t>(w));
    }
    return;
  }
  if (rows.empty()) return;
  at::Tensor t = gather_slot_tensor(rows, s).to(at::kCPU).contiguous();
  std::memcpy(out, t.data_ptr<float>(), sizeof(float) * static_cast<size_t>(t.numel()));
}

void Table::write_raw(const std::vector<int64_t> &rows, int s, const float *src) {
  const int64_t w = width_[s];
  if (raw_) {
    for (size_t i = 0; i < rows.size(); i++) {
      std::memcpy(slot_ptr(s, rows[i]), src + static_cast<int64_t>(i) * w, sizeof(float) * static_cast<size_t>(w));
    }
    return;
  }
  if (rows.empty()) return;
  const int64_t n = static_cast<int64_t>(rows.size());
  at::Tensor t = at::empty({n, w}, at::kFloat);
  std::memcpy(t.data_ptr<float>(), src, sizeof(float) * static_cast<size_t>(n * w));
  scatter_slot_tensor(rows, s, t.to(device_));
}

}  // namespace table
}  // namespace ct
