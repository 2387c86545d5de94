// table_internal.h: the C++ side of the embedding tables (table.cc, table_math.cc); never
// included by callers of the C ABI.
#ifndef CGOTORCH_TABLE_INTERNAL_H
#define CGOTORCH_TABLE_INTERNAL_H

#include <cstdint>
#include <string>

#include "internal.h"

namespace ct {
namespace table {

// Thrown for "unknown prefetch id" and "name already taken"; the prefixes let the Go side map
// them to its sentinels (like "invalid argument: " and "closed: ").
struct prefetch_error : std::runtime_error {
  explicit prefetch_error(const std::string &m) : std::runtime_error("unknown prefetch: " + m) {}
};
struct name_taken_error : std::runtime_error {
  explicit name_taken_error(const std::string &m) : std::runtime_error("name taken: " + m) {}
};
struct not_found_error : std::runtime_error {
  explicit not_found_error(const std::string &m) : std::runtime_error("not found: " + m) {}
};

// ---- initializers (table_math.cc) ---------------------------------------------------------

// A row's initial value is a pure function of (kind, params, seed, id, column): a counter-based
// generator (splitmix64 keyed by seed and id, counted by column) replaces libtorch's global RNG,
// so insertion order, batch composition and thread count never change it.
struct Init {
  int32_t kind = CT_INIT_ZEROS;
  double p[4] = {0, 0, 0, 0};
  uint64_t seed = 0;
  int64_t dim = 0;
  // Throws arg_error for bad parameters (std < 0, low > high, unknown kind, ...).
  void validate() const;
  // Writes the initial value of the row of id into out[0, dim).
  void row(int64_t id, float *out) const;
};

// ---- optimizers (table_math.cc) -----------------------------------------------------------

// One optimizer state slot: a row-aligned array of `width` floats per row (dim or 1), set to
// `init` when a row is created.
struct StateSpec {
  const char *name;
  bool per_element;  // width dim (true) or 1 (false)
  float init;
};

// Per-step constants shared by every row of one step.
struct StepConsts {
  int64_t t = 0;        // the table's step counter after this step's increment
  double clr = 0;       // Adagrad: lr / (1 + (t - 1) * lr_decay)
  double step_size = 0; // SparseAdam: lr * sqrt(1 - b2^t) / (1 - b1^t); AdamW: lr / (1 - b1^t)
  double bc2_sqrt = 1;  // AdamW: sqrt(1 - b2^t)
};

struct Optim {
  int32_t kind = CT_OPT_NONE;
  double p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t dim = 0;

  void validate() const;
  int num_states() const;
  StateSpec state(int i) const;
  // SGD with momentum: rows absent from a step keep moving (PyTorch's semantics), applied
  // lazily from a per-row stamp (see table_math.cc).
  bool has_momentum() const { return kind == CT_OPT_SGD && p[1] != 0; }
  StepConsts begin(int64_t t) const;

  // Raw CPU kernel: one step of one row (g is the summed gradient of the row); s0/s1 are the
  // row's states (nullptr when absent).
  void apply(const StepConsts &c, const float *g, float *w, float *s0, float *s1) const;
  // Tensor kernel (any device): the same step on gathered rows [U, dim] and states [U, width].
  void apply(const StepConsts &c, const at::Tensor &g, at::Tensor &w, at::Tensor *s0,
             at::Tensor *s1) const;

  // Momentum catch-up over k steps without a gradient: the weight moves by -lr * S(k) * buf
  // and the buffer decays to m^k * buf.
  void catch_up_factors(int64_t k, double *S, double *decay) const;
};

}  // namespace table
}  // namespace ct

#endif
