// internal.h: the C++ side of the embedding tables (table.cc.h, math.cc.h); never
// included by callers of the C ABI.
#ifndef CGOTORCH_TABLE_INTERNAL_H
#define CGOTORCH_TABLE_INTERNAL_H

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../tensor/internal.h"
#include "scratch.h"

namespace ct {
namespace table {

// The home slot of id in an open-addressed table of 2^bits slots (distinct_ids): Fibonacci
// hashing, the top bits of the id times 2^64 / phi. Every bit of the id moves the product's top
// bits, while its low bits depend only on the id's low ones: ids that differ only in their high
// bits (a field tag above a value) all landed in one slot when the home was taken from there.
inline size_t id_home(int64_t id, int bits) {
  return static_cast<size_t>((static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
}

// The table's errors, with their codes (CT_ERR_*; see arg_error and closed_error).
struct prefetch_error : prefixed_error<CT_ERR_UNKNOWN_PREFETCH> {
  explicit prefetch_error(const std::string &m) : prefixed_error("unknown prefetch: ", m) {}
};
struct name_taken_error : prefixed_error<CT_ERR_NAME_TAKEN> {
  explicit name_taken_error(const std::string &m) : prefixed_error("name taken: ", m) {}
};
struct not_found_error : prefixed_error<CT_ERR_NOT_FOUND> {
  explicit not_found_error(const std::string &m) : prefixed_error("not found: ", m) {}
};
// A delta out of the table's chain (ct_table_apply_delta).
struct incompatible_error : prefixed_error<CT_ERR_INCOMPATIBLE> {
  explicit incompatible_error(const std::string &m) : prefixed_error("incompatible: ", m) {}
};

// The distinct ids of ids[0, n) in first-appearance order into uids (n elements), and each
// id's place among them into inverse[i]; with skip, occurrences of *skip are left out and get
// inverse -1 (a padding id). A hash table kept per thread and sized by the distinct ids
// (batch.cc.h): no allocation or clearing per call, none per id.
struct DistinctCount {
  int64_t distinct, skipped;
};
DistinctCount distinct_ids(const int64_t *ids, int64_t n, const int64_t *skip, int64_t *uids, int64_t *inverse);

// Unique ids of a batch in first-appearance order (distinct_ids): inverse[i] is the position of
// ids[i] in uids.
struct DistinctIds {};
// uids and inverse come from the thread's scratch pool (scratch.h) and go back to it when the
// Dedupe ends; a vector moved out of it is the taker's (freed or given back by it).
struct Dedupe {
  std::vector<int64_t> uids, inverse;
  int64_t skipped = 0;  // occurrences of *skip
  Dedupe(const int64_t *ids, int64_t n, const int64_t *skip = nullptr);
  // ids known to be distinct already (a backward pass's, deduplicated at its lookup): uids is
  // ids, inverse the identity, without the hash table.
  Dedupe(const int64_t *ids, int64_t n, DistinctIds);
  Dedupe(Dedupe &&) = default;
  Dedupe &operator=(Dedupe &&) = delete;
  ~Dedupe() {
    scratch_pool<int64_t>().give(std::move(uids));
    scratch_pool<int64_t>().give(std::move(inverse));
  }
  int64_t size() const { return static_cast<int64_t>(uids.size()); }
};

// The bits of FLT_MAX, and of the largest float below 2^64 (as an int32).
constexpr int32_t kFltMaxBits = 0x7f7fffff;
constexpr int32_t kBelow2to64Bits = 0x5f7fffff;
// The bits (as an int32, the sign cleared) of the largest |p[i]|, i < n: above kFltMaxBits
// when one is NaN or Inf; 0 for n = 0. batch.cc.h; vectorised.
int32_t max_abs_bits(const float *p, int64_t n);
// True when every |p[i]| (i < n) has at most max_bits as bits: is at most the float with those
// bits (so false for NaN and Inf). batch.cc.h; vectorised.
bool all_within(const float *p, int64_t n, int32_t max_bits);
// True when none of p[0, n) is NaN or Inf.
bool all_finite(const float *p, int64_t n);

// The entries of a batch that a find left at -1: their places, ids and rows (to be filled by a
// find or insert of ids), which put() writes back.
struct Missing {
  std::vector<int64_t> pos, ids, rows;
  Missing(const int64_t *all_ids, const int64_t *all_rows, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
      if (all_rows[i] < 0) {
        pos.push_back(i);
        ids.push_back(all_ids[i]);
      }
    }
    rows.resize(ids.size());
  }
  void put(int64_t *all_rows) const {
    for (size_t j = 0; j < pos.size(); j++) all_rows[pos[j]] = rows[j];
  }
};

// Scales, in place, the rows of rows [u, dim] whose Euclidean norm exceeds max_norm by
// max_norm / (norm + 1e-7) (PyTorch's embedding_renorm_); returns the positions it scaled
// (gradients.cc.h).
std::vector<int64_t> renorm_rows(at::Tensor &rows, double max_norm);

// ---- initializers (math.cc.h) ---------------------------------------------------------

// A row's initial value is a pure function of (kind, params, seed, id, column): a counter-based
// generator (splitmix64 keyed by seed and id, counted by column) replaces libtorch's global RNG,
// so insertion order, batch composition and thread count never change it.
struct Init {
  int32_t kind = CT_INIT_ZEROS;
  double p[4] = {0, 0, 0, 0};
  uint64_t seed = 0;
  int64_t dim = 0;
  // Throws arg_error for bad parameters (not finite, std < 0, low > high, unknown kind, ...),
  // among them those with which a row value could be beyond float32's range (a constant or
  // bounds beyond it, a normal's |mean| + 8.66 std, Xavier's bound or std for this dim).
  void validate() const;
  // Writes the initial value of the row of id into out[0, dim).
  void row(int64_t id, float *out) const;
  // An upper bound on the magnitude of every value row() writes.
  double bound() const;
};

// ---- optimizers (math.cc.h) -----------------------------------------------------------

// One optimizer state slot: a row-aligned array of `width` floats per row (dim or 1), set to
// `init` when a row is created.
struct StateSpec {
  const char *name;
  bool per_element;  // width dim (true) or 1 (false)
  float init;
  bool nonneg;  // the rule keeps it >= 0 (it takes its square root)
};

// Per-step constants shared by every row of one step.
struct StepConsts {
  int64_t t = 0;        // the table's step counter after this step's increment
  double clr = 0;       // Adagrad: lr / (1 + (t - 1) * lr_decay)
  double step_size = 0; // SparseAdam: lr * sqrt(1 - b2^t) / (1 - b1^t); AdamW: lr / (1 - b1^t)
  double bc2_sqrt = 1;  // AdamW: sqrt(1 - b2^t)
};

// An optimizer's parameters by name. The C ABI passes them by position (opt_params of
// ct_table_config and ct_table_delta_info, in the order cgotorch.h lists for each optimizer):
// from_array and to_array convert by the optimizer's kind. A parameter the kind does not take
// is 0 (and a position it does not read comes back as 0).
struct OptimParams {
  double lr = 0;                         // every rule's step size (FTRL: alpha)
  double momentum = 0, dampening = 0;    // SGD
  double nesterov = 0;                   // SGD: 0 or 1
  double lr_decay = 0;                   // Adagrad, row-wise Adagrad
  double initial_accumulator_value = 0;  // Adagrad, row-wise Adagrad, FTRL
  double eps = 0;                        // Adagrad, row-wise Adagrad, SparseAdam, AdamW
  double beta1 = 0, beta2 = 0;           // SparseAdam, AdamW
  double weight_decay = 0;               // AdamW
  double beta = 0, l1 = 0, l2 = 0;       // FTRL
  // Throws arg_error unless all eight values are finite (the unused ones too).
  static OptimParams from_array(int32_t kind, const double a[8]);
  void to_array(int32_t kind, double a[8]) const;
};

struct Optim {
  int32_t kind = CT_OPT_NONE;
  OptimParams p;
  int64_t dim = 0;

  void validate() const;
  int num_states() const;
  StateSpec state(int i) const;
  // state(i) without its initial value: it reads the kind alone, not the parameters, which a
  // swap of two tables' contents changes under the table's lock (so a check before the lock
  // can use it).
  StateSpec state_shape(int i) const;
  // SGD with momentum: rows absent from a step keep moving (PyTorch's semantics), applied
  // lazily from a per-row stamp (see math.cc.h).
  bool has_momentum() const { return kind == CT_OPT_SGD && p.momentum != 0; }
  StepConsts begin(int64_t t) const;

  // The raw CPU kernels (one row at a time) are optim_rows.h's with_row_kernel.
  // Tensor kernel (any device): the step on gathered rows [U, dim] and states [U, width].
  void apply(const StepConsts &c, const at::Tensor &g, at::Tensor &w, at::Tensor *s0,
             at::Tensor *s1) const;

  // Bounds of one step (c), momentum catch-up included, when every value of slot s (the row,
  // state 0, state 1) is at most M[s] in magnitude and every summed gradient at most G (the
  // states a rule keeps >= 0 being >= 0): returns a bound of every value the step computes,
  // intermediate ones included (+Inf when none is known: SGD momentum above 1, FTRL with
  // beta = l2 = 0), and sets out[s] to a bound of slot s after it. Exact arithmetic: callers
  // leave a margin. The bounds grow additively step after step (the caller keeps them), but
  // FTRL's (see tracks_bounds).
  double step_bound(const StepConsts &c, const double M[3], double G, double out[3]) const;
  // Whether step_bound's out[] can be kept from step to step: FTRL's grow geometrically (z's
  // bound takes sigma * w's), so its steps take the stored values' maxima instead.
  bool tracks_bounds() const { return kind != CT_OPT_FTRL; }
  // Momentum catch-up over k steps without a gradient: the weight moves by -lr * S(k) * buf
  // and the buffer decays to m^k * buf.
  void catch_up_factors(int64_t k, double *S, double *decay) const;
};

}  // namespace table
}  // namespace ct

#endif
