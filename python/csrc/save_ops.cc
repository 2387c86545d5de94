// save_ops.cc: what a checkpoint holds of a table, in and out (torch.ops.gorec.emb_save and
// emb_load), and the CRC-32C its files carry. python/gorec/checkpoint.py writes and reads the
// files of docs/checkpoint.md with them, as embedding/checkpoint_table.go does through the same
// C calls (ct_table_save, ct_table_set_step, ct_table_import, ct_table_import_counts).
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "handles.h"

namespace gorec {
namespace {

// The stored contents of a table (a save's chunks, gathered).
struct Stored {
  int64_t dim = 0;
  int64_t step = 0;
  at::Tensor ids, rows, last_step, frequency, stamp, adm_ids, adm_counts;
  std::vector<at::Tensor> states;
  std::vector<int64_t> widths;
};

void copy_into(const at::Tensor &dst, int64_t offset, const void *src, int64_t count) {
  if (count == 0) return;
  const int64_t row = dst.numel() / std::max<int64_t>(dst.size(0), 1) * static_cast<int64_t>(dst.element_size());
  std::memcpy(static_cast<char *>(dst.data_ptr()) + offset * row, src, static_cast<size_t>(count * row));
}

int32_t sink(uintptr_t ctx, const ct_table_chunk *c) {
  auto *s = reinterpret_cast<Stored *>(ctx);
  try {
    if (c->kind == CT_CHUNK_ROWS) {
      if (c->offset == 0) {
        const int64_t m = c->total_rows;
        s->step = c->step;
        s->ids = at::empty({m}, at::kLong);
        s->rows = at::empty({m, s->dim}, at::kFloat);
        for (int32_t i = 0; i < c->num_states; i++) s->states.push_back(at::empty({m, s->widths[i]}, at::kFloat));
        s->last_step = at::empty({m}, at::kLong);
        s->frequency = at::empty({m}, at::kLong);
        s->stamp = at::empty({m}, at::kLong);
        s->adm_ids = at::empty({c->total_counts}, at::kLong);
        s->adm_counts = at::empty({c->total_counts}, at::kLong);
      }
      copy_into(s->ids, c->offset, c->ids, c->count);
      copy_into(s->rows, c->offset, c->rows, c->count);
      for (int32_t i = 0; i < c->num_states; i++) copy_into(s->states[i], c->offset, c->states[i], c->count);
      copy_into(s->last_step, c->offset, c->last_step, c->count);
      copy_into(s->frequency, c->offset, c->frequency, c->count);
      copy_into(s->stamp, c->offset, c->stamp, c->count);
    } else {
      copy_into(s->adm_ids, c->offset, c->ids, c->count);
      copy_into(s->adm_counts, c->offset, c->counts, c->count);
    }
    return 0;
  } catch (...) {
    return 1;  // the save fails with "aborted: "
  }
}

using SaveResult = std::tuple<int64_t, at::Tensor, at::Tensor, std::vector<at::Tensor>, at::Tensor, at::Tensor,
                              at::Tensor, at::Tensor, at::Tensor>;

// A consistent snapshot of the stored values (docs/checkpoint.md, "A table file"): step, ids in
// row-index order, rows, states, last_step, frequency, stamp, admission ids and counts; CPU.
SaveResult emb_save(std::string table) {
  TableRef t(table);
  ct_table_config c;
  check(ct_table_config_get(&c, t.get()));
  Stored s;
  s.dim = c.dim;
  const int64_t w = c.optimizer == CT_OPT_ROWWISE_ADAGRAD ? 1 : c.dim;
  s.widths = {w, w};
  check(ct_table_save(t.get(), int64_t(1) << 16, &sink, reinterpret_cast<uintptr_t>(&s)));
  return {s.step, s.ids, s.rows, s.states, s.last_step, s.frequency, s.stamp, s.adm_ids, s.adm_counts};
}

// A host int64 or float32 tensor of n entries of width w, contiguous: its data.
template <class T>
const T *host(const at::Tensor &x, const char *what, int64_t n, int64_t w) {
  const at::ScalarType want = std::is_same<T, float>::value ? at::kFloat : at::kLong;
  const bool shape = w == 0 ? x.dim() == 1 && x.size(0) == n : x.dim() == 2 && x.size(0) == n && x.size(1) == w;
  if (x.scalar_type() != want || !x.device().is_cpu() || !x.is_contiguous() || !shape) {
    throw std::runtime_error(std::string("invalid argument: ") + what + " must be a contiguous CPU " +
                             c10::toString(want) + " tensor of " + std::to_string(n) + " entries" +
                             (w == 0 ? std::string() : " of width " + std::to_string(w)) + ", got " +
                             c10::toString(x.scalar_type()) + " " + c10::str(x.sizes()));
  }
  return x.data_ptr<T>();
}

// Loads what emb_save gave into a table of the same configuration: the step counter first, then
// the rows (checked by ct_table_import: finite, ids distinct, steps in range) and the admission
// counts. For a fresh table (gorec.load creates one and closes it on failure).
void emb_load(std::string table, int64_t step, const at::Tensor &ids, const at::Tensor &rows,
              std::vector<at::Tensor> states, const at::Tensor &last_step, const at::Tensor &frequency,
              const at::Tensor &stamp, const at::Tensor &adm_ids, const at::Tensor &adm_counts) {
  TableRef t(table);
  const ct_table_stats st = t.stats();
  const int64_t width = st.optimizer == CT_OPT_ROWWISE_ADAGRAD ? 1 : st.dim;
  if (static_cast<int64_t>(states.size()) != st.num_states) {
    throw std::runtime_error("invalid argument: " + std::to_string(states.size()) + " optimizer states, the table has " +
                             std::to_string(st.num_states));
  }
  if (ids.dim() != 1 || adm_ids.dim() != 1) throw std::runtime_error("invalid argument: ids must be one-dimensional");
  const int64_t n = ids.size(0);
  const int64_t *pi = host<int64_t>(ids, "ids", n, 0);
  const float *pr = host<float>(rows, "rows", n, st.dim);
  std::array<const float *, 2> ps{nullptr, nullptr};
  for (size_t i = 0; i < states.size(); i++) {
    ps[i] = host<float>(states[i], "state", n, width);
  }
  const int64_t *pl = host<int64_t>(last_step, "last_step", n, 0);
  const int64_t *pf = host<int64_t>(frequency, "frequency", n, 0);
  const int64_t *pt = host<int64_t>(stamp, "stamp", n, 0);
  const int64_t c = adm_ids.size(0);
  const int64_t *pai = host<int64_t>(adm_ids, "admission ids", c, 0);
  const int64_t *pac = host<int64_t>(adm_counts, "admission counts", c, 0);
  check(ct_table_set_step(t.get(), step));
  check(ct_table_import(t.get(), n, pi, pr, ps[0], ps[1], pl, pf, pt));
  check(ct_table_import_counts(t.get(), c, pai, pac));
}

// ---- CRC-32C (Castagnoli, reflected 0x82F63B78), as Go's hash/crc32 with crc32.Castagnoli -----

struct CrcTables {
  uint32_t t[8][256];
  CrcTables() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0);
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
      for (int k = 1; k < 8; k++) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
    }
  }
};

// The CRC-32C of data's bytes, continuing crc (0 for a fresh one); data: a contiguous CPU tensor.
int64_t crc32c(const at::Tensor &data, int64_t crc) {
  static const CrcTables tab;
  if (!data.device().is_cpu() || !data.is_contiguous()) {
    throw std::runtime_error("invalid argument: data must be a contiguous CPU tensor");
  }
  const auto *p = static_cast<const uint8_t *>(data.data_ptr());
  size_t n = static_cast<size_t>(data.numel()) * data.element_size();
  uint32_t c = ~static_cast<uint32_t>(crc);
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= c;
    c = tab.t[7][v & 0xff] ^ tab.t[6][(v >> 8) & 0xff] ^ tab.t[5][(v >> 16) & 0xff] ^ tab.t[4][(v >> 24) & 0xff] ^
        tab.t[3][(v >> 32) & 0xff] ^ tab.t[2][(v >> 40) & 0xff] ^ tab.t[1][(v >> 48) & 0xff] ^ tab.t[0][v >> 56];
  }
  for (; n > 0; n--, p++) c = (c >> 8) ^ tab.t[0][(c ^ *p) & 0xff];
  return static_cast<int64_t>(~c);
}

}  // namespace
}  // namespace gorec

TORCH_LIBRARY_FRAGMENT(gorec, m) {
  m.def(gorec::stateful("emb_save(str table) -> (int, Tensor, Tensor, Tensor[], Tensor, Tensor, Tensor, Tensor, Tensor)"),
        &gorec::emb_save);
  m.def(gorec::stateful("emb_load(str table, int step, Tensor ids, Tensor rows, Tensor[] states, Tensor last_step, "
        "Tensor frequency, Tensor stamp, Tensor admission_ids, Tensor admission_counts) -> ()"),
        &gorec::emb_load);
  m.def("crc32c(Tensor data, int crc=0) -> int", &gorec::crc32c);
}
