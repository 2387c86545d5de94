/*
 * cgotorch.h: the C ABI of gorec over libtorch. Pure C (C99 and C++), one prefix: ct_.
 *
 * Conventions
 *  - Handles are typed opaque pointers (ct_tensor, ct_scope, ...), created by the library and
 *    released with the matching _free/_end function; every _free accepts NULL.
 *  - Every function that can fail returns ct_error: NULL on success, otherwise a heap string
 *    describing the failure (libtorch's message without its C++ backtrace) with a code saying its
 *    kind (ct_error_code, CT_ERR_*). The caller releases it with ct_error_free. No error state is kept anywhere else (no thread-local "last error").
 *  - Results come back through out-parameters, which are listed first. On failure the
 *    out-parameters are left untouched.
 *  - No function keeps a pointer to caller memory after it returns: data is copied in and out.
 *  - Every entry point catches c10::Error, std::exception and anything else.
 */
#ifndef CGOTORCH_H
#define CGOTORCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Errors and strings                                                                          */

/* An error message; NULL means success. Release with ct_error_free, never with free: the code is
 * stored in front of the message. */
typedef char *ct_error;
void ct_error_free(ct_error err);

/* The kinds of errors. The messages keep their prefixes ("invalid argument: ", "closed: ", ...)
 * for people; callers that act on the kind read the code. */
enum {
  CT_OK = 0,                   /* no error (a NULL ct_error) */
  CT_ERR_TORCH = 1,            /* libtorch or the C layer failed for another reason */
  CT_ERR_INVALID_ARGUMENT = 2, /* "invalid argument: " */
  CT_ERR_CLOSED = 3,           /* "closed: " a NULL, closed or released handle */
  CT_ERR_NAME_TAKEN = 4,       /* "name taken: " */
  CT_ERR_NOT_FOUND = 5,        /* "not found: " */
  CT_ERR_UNKNOWN_PREFETCH = 6, /* "unknown prefetch: " */
  CT_ERR_INCOMPATIBLE = 7,     /* "incompatible: " */
  CT_ERR_TIMEOUT = 8,          /* "timeout: " a process group's peers did not take part in time */
  CT_ERR_PEER = 9,             /* "peer: " a process group's peer failed or left */
  CT_ERR_REFUSED = 10,         /* "refused: " a rank of another job or world size */
  CT_ERR_MISMATCH = 11,        /* "mismatch: " the ranks' collectives do not match */
  CT_ERR_BROKEN = 12           /* "broken: " the process group is out of step */
};
/* The code of err (CT_ERR_*); CT_OK for NULL. */
int32_t ct_error_code(ct_error err);
/* Strings returned by the library (ct_tensor_string, ...). */
void ct_string_free(char *s);

/* ------------------------------------------------------------------------------------------ */
/* Types                                                                                       */

typedef struct ct_tensor_s *ct_tensor;
typedef struct ct_scope_s *ct_scope;

/* Element types; the values are libtorch's c10::ScalarType numbers. */
typedef enum {
  CT_UINT8 = 0,
  CT_INT8 = 1,
  CT_INT16 = 2,
  CT_INT32 = 3,
  CT_INT64 = 4,
  CT_FLOAT16 = 5,
  CT_FLOAT32 = 6,
  CT_FLOAT64 = 7,
  CT_BOOL = 11,
  CT_BFLOAT16 = 15
} ct_dtype;

/* Device kinds; the values are libtorch's c10::DeviceType numbers. */
typedef enum { CT_CPU = 0, CT_CUDA = 1 } ct_device_type;

typedef struct {
  int32_t type;  /* ct_device_type */
  int32_t index; /* -1: the current device of that type; a CPU has -1 or 0, nothing else */
} ct_device;

/* Options of the tensor factories. */
typedef struct {
  int32_t dtype; /* ct_dtype */
  ct_device device;
  int32_t requires_grad; /* 0 or 1 */
} ct_options;

/* ------------------------------------------------------------------------------------------ */
/* Memory accounting and library state                                                         */

/* Live ct_tensor handles (created and not yet freed). */
int64_t ct_live_handles(void);
/* Bytes of CPU tensor memory currently allocated by libtorch (all tensors, temporaries too). */
int64_t ct_live_bytes(void);
/* Address of the live-bytes counter: an aligned int64 updated atomically, readable without a
 * call (the Go side polls it on every tensor creation). Valid for the life of the process. */
const volatile int64_t *ct_live_bytes_counter(void);
/* Bytes of freed tensor buffers the allocator keeps for reuse (its per-thread caches and central
 * pool; not counted in ct_live_bytes). */
int64_t ct_tensor_cache_bytes(void);
/* Frees the central pool and the calling thread's cache now, has every other thread free its
 * cache at its next tensor allocation or free, then returns the heap's free memory to the
 * system (glibc: malloc_trim). */
ct_error ct_tensor_cache_release(void);

ct_error ct_set_num_threads(int32_t n);
ct_error ct_get_num_threads(int32_t *out);
ct_error ct_manual_seed(uint64_t seed);
/* The state of libtorch's default CPU generator (the one ct_manual_seed seeds and ct_dropout, the
 * random fills, ... draw from): a new 1-D CPU uint8 tensor, libtorch's own serialised form (the
 * bytes of torch.get_rng_state()). Read under the generator's mutex. Save it with a checkpoint
 * and give it back to ct_set_rng_state to resume the same random draws. */
ct_error ct_rng_state(ct_tensor *out);
/* Restores a state taken by ct_rng_state (or torch.get_rng_state()): the next draws are those that
 * followed it. state must be a 1-D contiguous CPU uint8 tensor of the size libtorch expects, with
 * valid contents; anything else is an "invalid argument" error (a NULL or released handle:
 * "closed") and leaves the generator unchanged. Set under the generator's mutex; the generator
 * copies the bytes (state may be freed afterwards). */
ct_error ct_set_rng_state(ct_tensor state);
/* Checks state as ct_set_rng_state does (libtorch's own checks of its size and contents
 * included) by setting it on a private generator: the same errors, and the default generator is
 * not touched. A checkpoint loader validates the state this way before it changes anything. */
ct_error ct_rng_check_state(ct_tensor state);
ct_error ct_cuda_available(int32_t *out);
ct_error ct_cuda_device_count(int32_t *out);
/* The libtorch version, e.g. "1.13.1"; a static string, do not free. */
const char *ct_torch_version(void);

/* ------------------------------------------------------------------------------------------ */
/* Tensor lifecycle and properties                                                              */

void ct_tensor_free(ct_tensor t);

/* A new CPU tensor holding a copy of nbytes bytes at data (row-major, elements of dtype).
 * nbytes must equal numel(shape) * element size; data may be NULL when nbytes is 0. */
ct_error ct_tensor_from_data(ct_tensor *out, const void *data, size_t nbytes, int32_t dtype,
                             const int64_t *shape, int32_t ndim);
/* Copies the elements of t (any device, any layout) into dst as row-major dtype elements;
 * dtype must be t's dtype and nbytes its numel times the element size. */
ct_error ct_tensor_copy_to(void *dst, size_t nbytes, ct_tensor t, int32_t dtype);

ct_error ct_tensor_ndim(int32_t *out, ct_tensor t);
/* Writes min(cap, ndim) sizes. */
ct_error ct_tensor_shape(int64_t *out, int32_t cap, ct_tensor t);
ct_error ct_tensor_numel(int64_t *out, ct_tensor t);
ct_error ct_tensor_dtype(int32_t *out, ct_tensor t);
ct_error ct_tensor_device(ct_device *out, ct_tensor t);
/* A readable rendering of t (libtorch's printer); release with ct_string_free. */
ct_error ct_tensor_string(char **out, ct_tensor t);
/* A new handle sharing t's storage (same as at::Tensor copy): both must be freed. */
ct_error ct_tensor_shallow_clone(ct_tensor *out, ct_tensor t);
/* t on another device and/or dtype (dtype -1 keeps t's dtype), with at::Tensor::to's semantics:
 * a copy when something changes, else a new handle sharing t's storage (as
 * ct_tensor_shallow_clone) when t already has that dtype and device (type and index). */
ct_error ct_tensor_to(ct_tensor *out, ct_tensor t, ct_device device, int32_t dtype);

/* ------------------------------------------------------------------------------------------ */
/* Factories                                                                                   */

typedef enum {
  CT_FILL_ZEROS = 0,
  CT_FILL_ONES = 1,
  CT_FILL_FULL = 2,  /* value */
  CT_FILL_RAND = 3,  /* uniform [0, 1) */
  CT_FILL_RANDN = 4, /* standard normal */
  CT_FILL_EMPTY = 5  /* uninitialised */
} ct_fill;

ct_error ct_tensor_new(ct_tensor *out, int32_t fill, double value, const int64_t *shape,
                       int32_t ndim, ct_options opts);
ct_error ct_tensor_arange(ct_tensor *out, double start, double end, double step, ct_options opts);

/* ------------------------------------------------------------------------------------------ */
/* Autograd                                                                                    */

ct_error ct_tensor_set_requires_grad(ct_tensor t, int32_t requires_grad);
ct_error ct_tensor_requires_grad(int32_t *out, ct_tensor t);
/* Backpropagates from t; grad may be NULL for a scalar t. */
ct_error ct_tensor_backward(ct_tensor t, ct_tensor grad, int32_t retain_graph);
/* The accumulated gradient of t, or *out = NULL when t has none. */
ct_error ct_tensor_grad(ct_tensor *out, ct_tensor t);
/* Zeroes (and keeps) t's gradient if it has one. */
ct_error ct_tensor_zero_grad(ct_tensor t);
ct_error ct_tensor_detach(ct_tensor *out, ct_tensor t);
/* Gives t the data of src (storage, shape, dtype and device), as PyTorch's `t.data = src`: t stays
 * the same tensor to autograd and to every handle of it (a leaf keeps requires_grad); its
 * gradient is left as it was. Any dense tensor can back any other (any device or dtype), except
 * that a tensor requiring grad takes floating-point or complex data only (an error, as in PyTorch). */
ct_error ct_tensor_set_data(ct_tensor t, ct_tensor src);
/* Sets the calling thread's grad mode; *prev gets the previous one. Thread-local in libtorch:
 * the caller must stay on one OS thread until it restores the mode. */
ct_error ct_grad_mode_set(int32_t *prev, int32_t enabled);

/* ------------------------------------------------------------------------------------------ */
/* Scopes: every tensor handle created on the calling thread while a scope is the innermost open
 * one belongs to it; ct_scope_end releases the memory of those not kept. The handles themselves
 * stay valid (using one afterwards gives an error) until ct_tensor_free. A scope is bound to the
 * thread that began it; ends must nest. */

ct_error ct_scope_begin(ct_scope *out);
/* Takes t out of s, or out of a scope opened inside s that holds it, so that t outlives s: it
 * moves to s's enclosing scope if there is one. A t in no scope or in another is left alone. */
ct_error ct_scope_keep(ct_scope s, ct_tensor t);
/* Releases the tensors still in s and frees s. *released gets how many (may be NULL). */
ct_error ct_scope_end(int64_t *released, ct_scope s);

/* ------------------------------------------------------------------------------------------ */
/* Tensor operations                                                                           */
/* Every operation returns new handles (views share storage with their input, as in libtorch)
 * except the _inplace functions, which modify their first tensor. Dimensions may be negative
 * (counted from the end). Scalars are passed as double; a scalar with an integral value in
 * [-2^63, 2^63) acts as an integer, converted exactly, as a Python int does (an int64 tensor
 * plus 1, or plus 1e16, stays int64; times 0.5 becomes float); -0.0 acts as a float and keeps
 * its sign (1 / -0.0 is -inf).
 * Operation codes of different families have disjoint values, and a code a function does not
 * support gives an "invalid argument" error. */

/* Elementwise functions of one tensor (ct_unary). */
typedef enum {
  CT_OP_NEG = 1,
  CT_OP_ABS,
  CT_OP_SQRT,
  CT_OP_RSQRT,
  CT_OP_EXP,
  CT_OP_LOG,
  CT_OP_LOG1P,
  CT_OP_SIGMOID,
  CT_OP_TANH,
  CT_OP_RELU,
  CT_OP_GELU, /* exact (erf) form */
  CT_OP_SILU,
  CT_OP_SQUARE,
  CT_OP_RECIPROCAL,
  CT_OP_SIGN,
  CT_OP_FLOOR,
  CT_OP_CEIL,
  CT_OP_ROUND,
  CT_OP_LOGICAL_NOT
} ct_unary_op;

/* Elementwise functions of two tensors with broadcasting (ct_binary) or of a tensor and a
 * scalar (ct_binary_scalar): every op but SET. In-place updates (ct_inplace_binary, where other
 * is broadcast to self's shape, and ct_inplace_scalar): ADD, SUB, MUL, DIV and SET only. */
typedef enum {
  CT_OP_ADD = 64,
  CT_OP_SUB,
  CT_OP_MUL,
  CT_OP_DIV, /* true division: integers give floats */
  CT_OP_POW,
  CT_OP_REMAINDER, /* Python's %: the sign of the divisor */
  CT_OP_MAXIMUM,
  CT_OP_MINIMUM,
  CT_OP_EQ, /* comparisons give bool tensors */
  CT_OP_NE,
  CT_OP_LT,
  CT_OP_LE,
  CT_OP_GT,
  CT_OP_GE,
  CT_OP_LOGICAL_AND,
  CT_OP_LOGICAL_OR,
  CT_OP_SET /* in place only: copy_ (broadcast other into self) or fill_ */
} ct_binary_op;

ct_error ct_unary(ct_tensor *out, int32_t op, ct_tensor a);
ct_error ct_binary(ct_tensor *out, int32_t op, ct_tensor a, ct_tensor b);
ct_error ct_binary_scalar(ct_tensor *out, int32_t op, ct_tensor a, double s);
/* self op= alpha * other for ADD and SUB; alpha must be 1 for the other ops. */
ct_error ct_inplace_binary(ct_tensor self, int32_t op, ct_tensor other, double alpha);
ct_error ct_inplace_scalar(ct_tensor self, int32_t op, double s);
/* ---- Dense optimizer steps (ct_optim_step) ---------------------------------------------------
 * One in-place update of a parameter from its gradient, computed with the same tensor operations,
 * in the same order, as PyTorch 1.13's torch.optim (single-tensor path), so that a step costs one
 * call instead of one per operation. Under no-grad, whatever the caller's grad mode. */
typedef enum {
  CT_OPTIM_SGD = 1,   /* state0: momentum buffer (NULL without momentum) */
  CT_OPTIM_ADAM = 2,  /* state0: exp_avg, state1: exp_avg_sq, state2: max_exp_avg_sq (AMSGrad) */
  CT_OPTIM_ADAMW = 3, /* as Adam, with decoupled weight decay */
  CT_OPTIM_ADAGRAD = 4 /* state0: sum of squared gradients */
} ct_optim_kind;
typedef struct {
  int32_t kind; /* ct_optim_kind */
  double lr, weight_decay;
  double momentum, dampening; /* SGD */
  int32_t nesterov;           /* SGD */
  double beta1, beta2, eps;   /* Adam, AdamW; eps also Adagrad */
  int32_t amsgrad;            /* Adam, AdamW */
  double lr_decay;            /* Adagrad */
} ct_optim_options;
/* step is this step's number, counting from 1 (SGD: step 1 initialises the momentum buffer with
 * the gradient). The states must be tensors shaped like param; those the rule does not use may
 * be NULL. */
ct_error ct_optim_step(ct_tensor param, ct_tensor grad, ct_tensor state0, ct_tensor state1,
                       ct_tensor state2, int64_t step, const ct_optim_options *o);
/* ct_optim_step of n parameters in one call, each from its own gradient (its .grad): a parameter
 * without one is skipped. states holds 3 per parameter (param i's state0 to state2 at 3i to
 * 3i + 2, NULL where unused); steps[i] is param i's step number; stepped[i] (when stepped is not
 * NULL) is set to 1 for a parameter updated, 0 for one skipped. Every argument is checked before
 * anything changes: a failure changes nothing. */
ct_error ct_optim_step_params(int32_t *stepped, int32_t n, const ct_tensor *params,
                              const ct_tensor *states, const int64_t *steps,
                              const ct_optim_options *o);
/* Limits values to [min, max]; a bound is ignored when its has_ flag is 0. */
ct_error ct_clamp(ct_tensor *out, ct_tensor a, double min, double max, int32_t has_min,
                  int32_t has_max);
/* cond ? a : b elementwise, with broadcasting; cond is a bool tensor. */
ct_error ct_where(ct_tensor *out, ct_tensor cond, ct_tensor a, ct_tensor b);
/* A copy of a with value where the bool tensor mask (broadcast to a) is true. */
ct_error ct_masked_fill(ct_tensor *out, ct_tensor a, ct_tensor mask, double value);

/* Reductions (ct_reduce; MAX and MIN also for ct_reduce_with_indices). */
typedef enum {
  CT_REDUCE_SUM = 128,
  CT_REDUCE_MEAN,
  CT_REDUCE_PROD,
  CT_REDUCE_MAX, /* values only (amax) */
  CT_REDUCE_MIN,
  CT_REDUCE_LOGSUMEXP,
  CT_REDUCE_STD, /* unbiased (divides by n - 1) */
  CT_REDUCE_VAR,
  CT_REDUCE_NORM, /* Euclidean */
  CT_REDUCE_ANY,
  CT_REDUCE_ALL
} ct_reduce_op;

/* Reduces over the ndims dimensions dims, or over all of them when ndims is 0; keepdim keeps
 * the reduced dimensions with size 1. */
ct_error ct_reduce(ct_tensor *out, int32_t op, ct_tensor a, const int64_t *dims, int32_t ndims,
                   int32_t keepdim);
/* Maximum or minimum (op CT_REDUCE_MAX or CT_REDUCE_MIN) along dim with the int64 positions.
 * values may be NULL when only the indices are wanted (argmax, argmin). */
ct_error ct_reduce_with_indices(ct_tensor *values, ct_tensor *indices, int32_t op, ct_tensor a,
                                int64_t dim, int32_t keepdim);
/* The k largest (or smallest) entries along dim and their positions; sorted orders them. */
ct_error ct_topk(ct_tensor *values, ct_tensor *indices, ct_tensor a, int64_t k, int64_t dim,
                 int32_t largest, int32_t sorted);
/* Stable sort along dim, with the positions of the sorted entries. */
ct_error ct_sort(ct_tensor *values, ct_tensor *indices, ct_tensor a, int64_t dim,
                 int32_t descending);

/* Shape and layout changes (ct_shape_op); what args holds depends on the op. */
typedef enum {
  CT_SHAPE_RESHAPE = 192, /* args: the new shape (one entry may be -1); a view when possible */
  CT_SHAPE_VIEW,          /* args: the new shape; always a view (fails when a copy is needed) */
  CT_SHAPE_EXPAND,        /* args: the new shape (-1 keeps a size); a broadcast view */
  CT_SHAPE_PERMUTE,       /* args: a permutation of the dimensions */
  CT_SHAPE_TRANSPOSE,     /* args: two dimensions to swap */
  CT_SHAPE_SQUEEZE,       /* args: dimensions to drop if of size 1; none: every size-1 one */
  CT_SHAPE_UNSQUEEZE,     /* args: one: where to insert a dimension of size 1 */
  CT_SHAPE_FLATTEN,       /* args: the first and last dimension to merge */
  CT_SHAPE_CONTIGUOUS,    /* no args: a tensor with row-major layout (a itself if it is one) */
  CT_SHAPE_CLONE          /* no args: a copy with its own storage (differentiable) */
} ct_shape_op_code;

ct_error ct_shape_op(ct_tensor *out, int32_t op, ct_tensor a, const int64_t *args,
                     int32_t nargs);
/* The view of a made of entries start .. start+length-1 along dim. */
ct_error ct_narrow(ct_tensor *out, ct_tensor a, int64_t dim, int64_t start, int64_t length);
/* Splits a along dim into n (>= 1) views of sizes[0..n-1] entries, which add up to a's size
   there, into outs[0..n-1] (all of them, or none on an error). One autograd node makes them:
   its backward joins the pieces' gradients in one concatenation (n narrows would each fill a
   zeroed gradient of a's size). */
ct_error ct_split(ct_tensor *outs, int32_t n, ct_tensor a, const int64_t *sizes, int64_t dim);

typedef enum {
  CT_JOIN_CAT = 256, /* along an existing dimension */
  CT_JOIN_STACK      /* along a new dimension */
} ct_join_op;
/* Joins the n (>= 1) tensors ts[0..n-1]. */
ct_error ct_join(ct_tensor *out, int32_t op, const ct_tensor *ts, int32_t n, int64_t dim);

/* Indexing with int64 index tensors. */
typedef enum {
  CT_INDEX_SELECT = 320,  /* ct_index: the entries of a at positions index along dim */
  CT_INDEX_GATHER,        /* ct_index: out[i][j] = a[index[i][j]][j] (dim 0), ... */
  CT_INDEX_ADD,           /* ct_index_update: a[index[i]] += src[i] along dim */
  CT_INDEX_SCATTER,       /* ct_index_update: a[index[i][j]][j] = src[i][j] (dim 0), ... */
  CT_INDEX_SCATTER_ADD    /* ct_index_update: a[index[i][j]][j] += src[i][j] (dim 0), ... */
} ct_index_op;

ct_error ct_index(ct_tensor *out, int32_t op, ct_tensor a, int64_t dim, ct_tensor index);
/* Updates a copy of a (out), or a itself when inplace is 1 (then out may be NULL and is not
 * written). Repeated indices accumulate for the ADD ops. */
ct_error ct_index_update(ct_tensor *out, int32_t op, ct_tensor a, int64_t dim, ct_tensor index,
                         ct_tensor src, int32_t inplace);
/* The distinct values of a (flattened), sorted ascending when sorted is 1. inverse (the
 * position in values of each entry of a, shaped like a) and counts (occurrences of each value)
 * are computed only when their pointer is not NULL. */
ct_error ct_unique(ct_tensor *values, ct_tensor *inverse, ct_tensor *counts, ct_tensor a,
                   int32_t sorted);

/* Layers' building blocks: matrix products, softmax, dropout. */
/* The product of two matrices (2-D only). */
ct_error ct_mm(ct_tensor *out, ct_tensor a, ct_tensor b);
/* numpy-style matmul: vectors, matrices and broadcast batches of matrices. */
ct_error ct_matmul(ct_tensor *out, ct_tensor a, ct_tensor b);
/* PyTorch's nn.functional.linear: x [..., in] times weight [out, in] transposed, plus bias [out]
 * (NULL: none); one autograd node (addmm) for a 2-D x with a bias. */
ct_error ct_linear(ct_tensor *out, ct_tensor x, ct_tensor weight, ct_tensor bias);
/* softmax along dim, or log-softmax when log is 1. */
ct_error ct_softmax(ct_tensor *out, ct_tensor a, int64_t dim, int32_t log);
/* Zeroes entries with probability p and scales the others by 1/(1-p) when train is 1; the
 * identity otherwise. Uses the global generator (ct_manual_seed). */
ct_error ct_dropout(ct_tensor *out, ct_tensor a, double p, int32_t train);

/* Losses. The reduction values are libtorch's at::Reduction numbers. As in PyTorch, the BCE
 * losses refuse a target whose size differs from the input's, and MSE, L1 and smooth L1
 * broadcast the two (where PyTorch warns). */
typedef enum { CT_REDUCTION_NONE = 0, CT_REDUCTION_MEAN = 1, CT_REDUCTION_SUM = 2 } ct_reduction;
typedef enum {
  CT_LOSS_MSE = 384,       /* (input - target)^2 */
  CT_LOSS_L1,              /* |input - target| */
  CT_LOSS_SMOOTH_L1,       /* Huber-like with beta 1 */
  CT_LOSS_BCE,             /* input: probabilities in [0, 1]; target: same shape (checked) */
  CT_LOSS_BCE_WITH_LOGITS, /* input: logits; target: same shape (checked), in [0, 1] */
  CT_LOSS_CROSS_ENTROPY,   /* input: logits [N, C, ...]; target: int64 classes [N, ...] or
                              probabilities shaped like input */
  CT_LOSS_NLL              /* input: log-probabilities [N, C, ...]; target: int64 classes */
} ct_loss_op;

ct_error ct_loss(ct_tensor *out, int32_t op, ct_tensor input, ct_tensor target,
                 int32_t reduction);

/* ------------------------------------------------------------------------------------------ */
/* Embedding tables                                                                            */
/*
 * A dynamic hash embedding table maps raw int64 ids to float32 rows of width dim. It stores only
 * the ids it has seen, grows in fixed-size blocks (old rows never move), forgets deleted ids and
 * keeps each row's optimizer state next to it. Tables are named; names are unique in the process
 * while the table is open.
 *
 * Inputs (checked before anything changes; a violation is an "invalid argument: " error):
 *   keys: int64, one-dimensional, contiguous, any device;
 *   values / grads: float32, two-dimensional [N, dim], contiguous, N == keys' length.
 * Empty keys are fine and give [0, dim] results. Results come back on the keys' device.
 * Every operation is all-or-nothing: a failed call leaves the table exactly as it was.
 * Gradients or values holding NaN or Inf are rejected as a whole batch, and so is an update
 * whose result (a row or an optimizer state) would be NaN or Inf (a float32 overflow: a
 * gradient of 1e20 squared by Adagrad, say), leaving every row as it was. Written values must
 * also be below 2^64 (1.8446744e19) in magnitude, the floats whose square is finite.
 *
 * Error codes (and message prefixes): CT_ERR_INVALID_ARGUMENT, CT_ERR_CLOSED (the table was
 * closed), CT_ERR_NAME_TAKEN, CT_ERR_NOT_FOUND (no open table of that name),
 * CT_ERR_UNKNOWN_PREFETCH, CT_ERR_INCOMPATIBLE.
 */

typedef struct ct_table_s *ct_table;

/* Initializers of new rows; the value of a row is a function of (seed, id) alone. */
typedef enum {
  CT_INIT_ZEROS = 0,
  CT_INIT_CONSTANT = 1,         /* params: value */
  CT_INIT_UNIFORM = 2,          /* params: low, high */
  CT_INIT_NORMAL = 3,           /* params: mean, std */
  CT_INIT_TRUNCATED_NORMAL = 4, /* params: mean, std, low, high (resampled outside [low, high]) */
  CT_INIT_XAVIER_UNIFORM = 5,   /* params: gain, fan_in, fan_out (0: dim); U(-b, b),
                                   b = gain * sqrt(6 / (fan_in + fan_out)) */
  CT_INIT_XAVIER_NORMAL = 6     /* params as above; N(0, gain * sqrt(2 / (fan_in + fan_out))) */
} ct_table_initializer;
/* ct_table_new refuses ("invalid argument: ") initializer parameters that are not finite, and
 * those with which a row value could be beyond float32's range (|x| <= FLT_MAX): a constant,
 * or a uniform or truncated normal low or high, beyond it; a normal with |mean| + 8.66 * std
 * beyond it (8.66 bounds the |z| of the generator's normals); a Xavier uniform bound b, or
 * 8.66 times a Xavier normal's std, beyond it (both depend on dim where a fan is 0). */

/* Optimizers applied by ct_table_update; the parameters in opt_params, in this order. */
typedef enum {
  CT_OPT_NONE = 0,             /* update is an error */
  CT_OPT_SGD = 1,              /* lr, momentum, dampening, nesterov (0/1) */
  CT_OPT_ADAGRAD = 2,          /* lr, lr_decay, initial_accumulator_value, eps */
  CT_OPT_ROWWISE_ADAGRAD = 3,  /* lr, lr_decay, initial_accumulator_value, eps */
  CT_OPT_SPARSE_ADAM = 4,      /* lr, beta1, beta2, eps */
  CT_OPT_ADAMW = 5,            /* lr, beta1, beta2, eps, weight_decay */
  CT_OPT_FTRL = 6              /* alpha, beta, l1, l2, initial_accumulator_value */
} ct_table_optimizer;

/* Where optimizer states live: in block arrays of their own (separate, the default: the faster
 * one in gorec's measurements, see embedding/bench_test.go) or in the embedding's block row
 * (interleaved). */
typedef enum { CT_LAYOUT_SEPARATE = 0, CT_LAYOUT_INTERLEAVED = 1 } ct_table_layout;

/* flags: run the tensor-op kernels (those of CUDA tables) on a CPU table too (for tests). */
#define CT_TABLE_TENSOR_KERNELS 1
/* flags: keep each row's last step and frequency (8 bytes a row, and a cache line written per
 * row a training lookup touches), which ct_table_metadata and ct_table_evict need; without it
 * they fail, and saves and deltas report every row as seen at the current step, never counted. */
#define CT_TABLE_TRACK_ACCESS 2
/* flags (ct_table_new): derive the table's seed from its name, so that tables of one seed do
 * not start alike: a named table's seed becomes splitmix64's finaliser of (seed XOR the 64-bit
 * FNV-1a hash of the name's bytes); an unnamed table keeps seed as given. ct_table_config_get
 * reports the derived seed, without this flag: a table created from it starts the same. */
#define CT_TABLE_SEED_FROM_NAME 4

typedef struct {
  int64_t dim;        /* > 0 */
  int64_t capacity;   /* rows (and ids) to allocate up front; 0 is fine. Refused at once beyond
                         2^40, or when its rows (4 bytes a float of the row and its states;
                         CPU tables) and 32 bytes an id of id map exceed physical memory */
  int64_t block_rows; /* rows per storage block; 0: 4096 */
  int32_t initializer;
  int32_t optimizer;
  double init_params[4];
  double opt_params[8];
  ct_device device; /* where the rows live */
  uint64_t seed;
  int32_t layout;
  int32_t flags;
} ct_table_config;

typedef struct {
  int64_t size;     /* ids stored */
  int64_t capacity; /* rows the allocated blocks hold */
  int64_t bytes;    /* memory held: blocks, id map, per-row bookkeeping */
  int64_t dim;
  int64_t step;     /* optimizer steps taken */
  int32_t num_states;
  int32_t optimizer;
} ct_table_stats;

/* Default row of ct_table_read and ct_table_prefetch for ids not in the table. */
typedef enum { CT_READ_ZEROS = 0, CT_READ_INITIAL = 1 } ct_table_read_default;

/* A new table registered under name (at most 255 bytes, no control characters). With name
 * NULL or "" the table is unnamed: not registered (ct_table_open, ct_table_names and
 * ct_table_update_by_name do not see it, it takes no name), its ct_table_name is "". */
ct_error ct_table_new(ct_table *out, const char *name, const ct_table_config *cfg);
/* A new handle to the open table of that name ("not found: " if none). */
ct_error ct_table_open(ct_table *out, const char *name);
/* Closes the table for every handle: waits for the operations in flight, frees its memory and
 * its name; later operations on any handle fail with "closed: ". Closing twice is fine. */
ct_error ct_table_close(ct_table t);
/* Frees the handle (not the table: an open table lives until ct_table_close). NULL is fine. */
void ct_table_free(ct_table t);
/* The names of the open tables, sorted, joined by '\n'; release with ct_string_free. */
ct_error ct_table_names(char **out);
/* The table's name; release with ct_string_free. */
ct_error ct_table_name(char **out, ct_table t);
/* The table's serial: distinct for every table the process creates, so that a caller who finds
 * tables by name (ct_table_open) tells a table it held, now closed, from another opened since
 * under its name. As the name, it stays readable through a handle of a closed table. */
ct_error ct_table_serial(uint64_t *out, ct_table t);
/* The name of optimizer state i (0-based, as in ct_table_export), or NULL. Static string. */
const char *ct_table_state_name(int32_t optimizer, int32_t i);

/* Rows of keys [N] as float32 [N, dim], inserting (and initialising) the ids not yet present. */
ct_error ct_table_lookup(ct_tensor *rows, ct_table t, ct_tensor keys);
/* Row indices of keys, int64 [N]: with insert, absent ids are inserted; without, they give -1. */
ct_error ct_table_indices(ct_tensor *out, ct_table t, ct_tensor keys, int32_t insert);
/* Rows of keys without inserting: absent ids give the default row (ct_table_read_default).
 * found (may be NULL) gets a bool [N] tensor. */
ct_error ct_table_read(ct_tensor *rows, ct_tensor *found, ct_table t, ct_tensor keys,
                       int32_t default_mode);
/* ct_table_lookup and ct_table_read over the caller's memory, with no tensor on either side:
 * ids [n] in, rows [n, dim] float32 (row after row; rows_len floats, which must be n * dim)
 * out, on the host whatever the table's device; found [n] (may be NULL) gets 1 where the id
 * was present, else 0. Nothing keeps a pointer to them after the call. On error the table is
 * as the tensor forms leave it, and what rows and found hold is unspecified. */
ct_error ct_table_lookup_into(float *rows, int64_t rows_len, ct_table t, const int64_t *ids, int64_t n);
ct_error ct_table_read_into(float *rows, int64_t rows_len, uint8_t *found, ct_table t, const int64_t *ids,
                            int64_t n, int32_t default_mode);
/* ct_table_lookup counting key i counts[i] times (int64 [N], the keys' length, each >= 1) in the
 * rows' access frequency (CT_TABLE_TRACK_ACCESS) and the admission counts, as a lookup of a
 * batch holding key i counts[i] times would: for a caller that looks up a batch's distinct ids.
 * The rows are ct_table_lookup's. Bad counts change nothing. */
ct_error ct_table_lookup_counted(ct_tensor *rows, ct_table t, ct_tensor keys, ct_tensor counts);
/* Sets the rows of keys to values [N, dim], inserting absent ids (their optimizer state starts
 * fresh; present ids keep theirs). For a repeated id the last occurrence wins. */
ct_error ct_table_write(ct_table t, ct_tensor keys, ct_tensor values);
/* One optimizer step from grads [N, dim]: gradients of repeated ids are summed first; absent ids
 * are inserted first. An update with no keys still counts as a step. */
ct_error ct_table_update(ct_table t, ct_tensor keys, ct_tensor grads);
ct_error ct_table_update_by_name(const char *name, ct_tensor keys, ct_tensor grads);
/* Starts an asynchronous read of keys on a worker thread; *id identifies it. */
ct_error ct_table_prefetch(int64_t *id, ct_table t, ct_tensor keys, int32_t default_mode);
/* Waits up to timeout_us microseconds (< 0: no limit) for prefetch id. *ready = 1: rows (and
 * found, which may be NULL) are set and the prefetch is consumed (waiting again is an
 * "unknown prefetch: " error); *ready = 0: not done yet, wait again later. One wait at a time:
 * a second concurrent wait for the same id is an "unknown prefetch: " error. A wait during
 * which the prefetch is discarded returns at once with an "unknown prefetch: " error. */
ct_error ct_table_prefetch_wait(ct_tensor *rows, ct_tensor *found, int32_t *ready, ct_table t,
                                int64_t id, int64_t timeout_us);
/* Forgets a prefetch that will not be waited for, also one that another thread is waiting for
 * (that wait then fails with "unknown prefetch: "). Unknown ids (never issued, already
 * consumed or discarded) are an error. */
ct_error ct_table_prefetch_discard(ct_table t, int64_t id);
/* Removes keys; *deleted (may be NULL) gets how many were present. Their rows and optimizer
 * states are reset before their indices are reused. */
ct_error ct_table_delete(int64_t *deleted, ct_table t, ct_tensor keys);
/* Removes every id and the admission counts (the blocks stay allocated; the step counter is
 * kept). */
ct_error ct_table_clear(ct_table t);
ct_error ct_table_stats_get(ct_table_stats *out, ct_table t);
/* The calling thread's scratch vectors of the table calls (kept per thread between calls,
 * bounded): the bytes it keeps (its pools' vectors and its distinct-id table), and how many
 * vectors its calls had to allocate since it began (for tests). ct_tensor_cache_release frees
 * what every thread keeps. */
ct_error ct_table_scratch_stats(int64_t *kept_bytes, int64_t *allocated);
/* A consistent snapshot, ids sorted ascending: ids int64 [M], rows float32 [M, dim], and the
 * optimizer states (states[i]: [M, dim] or [M, 1]) into states[0, num_states) (cap must be at
 * least num_states; states may be NULL when it is 0); step (may be NULL) gets the step counter.
 * Tensors are on the table's device. */
ct_error ct_table_export(ct_tensor *ids, ct_tensor *rows, ct_tensor *states, int32_t cap,
                         int64_t *step, ct_table t);

/* ------------------------------------------------------------------------------------------ */
/* Embedding autograd                                                                          */
/*
 * Lookups whose result takes part in libtorch's autograd graph, with the table as the parameter:
 * a backward pass through the result hands the gradient of the looked-up rows to the table
 * (the gradients of repeated ids summed, index_add style). In accumulate mode the table keeps
 * it as a pending gradient until ct_table_step applies one optimizer step from everything
 * pending (several backward passes or micro-batches add up; duplicate ids across them are
 * summed first); in fused mode the backward pass applies one optimizer step at once and keeps
 * nothing. A step from the pending gradients gives the numbers ct_table_update gives for the
 * same ids and gradients.
 *
 * Training lookups find-or-insert their ids; with grad mode on (the calling thread's) the
 * result has a grad_fn. Evaluation lookups (train = 0) are reads: nothing is inserted, absent
 * ids get the default row (default_mode), and the result has no grad_fn.
 * A padding id is never looked up or inserted: its positions give zero rows (Embedding) or are
 * left out of the reduction and of the mean's count (EmbeddingBag), and it gets no gradient.
 * max_norm > 0 renormalises each looked-up row whose Euclidean norm exceeds it to
 * max_norm / (norm + 1e-7) times itself, in the table (training; as PyTorch's max_norm does to
 * its weight) or in the result only (evaluation: the table is not written).
 * The backward pass fails with "closed: " if the table was closed after the lookup, and (fused
 * mode) with "invalid argument: " for NaN or Inf gradients, as ct_table_update does.
 */

typedef struct {
  int32_t train;          /* 1: training lookup; 0: evaluation (read-only) */
  int32_t fused;          /* 1: backward applies the optimizer step at once */
  int32_t has_padding_id; /* 1: padding_id is the padding id */
  int32_t default_mode;   /* ct_table_read_default of evaluation lookups */
  int64_t padding_id;
  double max_norm;        /* > 0: renormalise rows over it; 0: off */
} ct_table_forward_options;

/* Pooling of ct_table_forward_bag; the values are at::embedding_bag's mode numbers. */
typedef enum { CT_BAG_SUM = 0, CT_BAG_MEAN = 1, CT_BAG_MAX = 2 } ct_bag_mode;

/* Rows of ids (int64, any shape, any device) as float32 ids.shape + [dim] on the ids' device. */
ct_error ct_table_forward(ct_tensor *out, ct_table t, ct_tensor ids,
                          const ct_table_forward_options *opts);
/* Pooled rows (EmbeddingBag) as float32 [B, dim]: ids int64 [N] with offsets int64 [B] (bag i
 * is ids[offsets[i], offsets[i+1]), the last one runs to N; offsets start at 0 and do not
 * decrease), or ids [B, L] (bags of L ids) with offsets NULL. per_sample_weights (float32,
 * shaped like ids; sum mode only) may be NULL. Empty bags give zero rows. */
ct_error ct_table_forward_bag(ct_tensor *out, ct_table t, ct_tensor ids, ct_tensor offsets,
                              ct_tensor per_sample_weights, int32_t mode,
                              const ct_table_forward_options *opts);
/* One optimizer step from the pending gradients, which are then dropped. *stepped (may be NULL)
 * gets 1, or 0 when nothing was pending (then nothing happens: no step is counted). A step
 * that fails (NaN or Inf gradients: "invalid argument: ") changes nothing and keeps them. */
ct_error ct_table_step(int32_t *stepped, ct_table t);
/* Drops the pending gradients. */
ct_error ct_table_zero_grad(ct_table t);
/* The pending gradients coalesced: ids int64 [M] ascending and their summed float32 [M, dim]
 * (on the table's device). */
ct_error ct_table_pending_grad(ct_tensor *ids, ct_tensor *grads, ct_table t);


/* ------------------------------------------------------------------------------------------ */
/* Table lifecycle: checkpoints, row metadata, eviction, admission, deltas
 * (csrc/table/: metadata, checkpoint, admission, compact, evict and delta.cc.h) */
/*
 * Rows carry metadata: in tables created with CT_TABLE_TRACK_ACCESS, the step counter at its
 * last training lookup or update (last_step) and how often training touched it (frequency: each
 * occurrence of its id in a training lookup's batch, autograd lookups included, plus one for
 * each optimizer step that updated it; concurrent lookups of one row may lose increments; other tables report
 * last_step = the step counter and frequency 0 where a save or delta carries them), and, for SGD
 * with momentum, the step its momentum buffer is up to date with (stamp). Rows and states handed to a sink or taken by ct_table_import are the
 * stored values: with SGD momentum they are as of their stamp (the lazy catch-up not applied),
 * so a save and an import reproduce the table bit for bit.
 * last_step and frequency take 8 bytes a row (deltas add 4 from the first mark on), so they are
 * bounded: last_step is exact for rows seen within the last 2^31 steps; an older row may report
 * a later step instead, a base (the largest multiple of 2^31 at most step - 2^31; it depends on
 * the step counter only, so a checkpoint imported at the same step reports the same). Frequencies
 * saturate at 2^32 - 1. Imported values are clamped the same way.
 */

/* The configuration the table was created with (or took over with ct_table_swap). */
ct_error ct_table_config_get(ct_table_config *out, ct_table t);

typedef enum { CT_CHUNK_ROWS = 0, CT_CHUNK_COUNTS = 1 } ct_table_chunk_kind;

/* One chunk of a ct_table_save stream; the pointers are valid during the sink call only. */
typedef struct {
  int32_t kind;
  int32_t num_states;
  int64_t total_rows;   /* rows in the whole save */
  int64_t total_counts; /* admission counts in the whole save */
  int64_t step;         /* the step counter */
  int64_t offset;       /* position of this chunk's first entry within its kind */
  int64_t count;        /* entries in this chunk (may be 0) */
  const int64_t *ids;
  const float *rows;       /* CT_CHUNK_ROWS: [count, dim] */
  const float *states[2];  /* [count, width of state i] */
  const int64_t *last_step, *frequency, *stamp; /* [count] each */
  const int64_t *counts;   /* CT_CHUNK_COUNTS: how often ids[i] was seen */
  uint64_t delta_lineage;  /* the table's delta chain and its position (ct_table_delta_info) */
  int64_t delta_seq;
} ct_table_chunk;

/* Receives the chunks of a save; a non-zero return aborts the save. */
typedef int32_t (*ct_table_sink)(uintptr_t ctx, const ct_table_chunk *chunk);

/* A consistent snapshot streamed to sink: the rows in chunks of at most chunk_rows rows (at
 * least one call, in row order), then the admission counts (at least one call). The table is
 * locked shared for the whole call: lookups of present ids go on, writers wait. An aborted save
 * is an error starting "aborted: ". Each chunk is checked as ct_table_import checks one before
 * the sink gets it: a table holding what an import refuses fails the save (an error naming
 * the value, before the sink sees that chunk), so a stream that completes always imports. */
ct_error ct_table_save(ct_table t, int64_t chunk_rows, ct_table_sink sink, uintptr_t ctx);
/* The rows of ct_table_export (ids ascending, SGD momentum caught up) streamed to sink in chunks
 * of at most chunk_rows rows, without the whole snapshot in memory: kind CT_CHUNK_ROWS, ids,
 * rows and states, last_step and frequency when the table tracks access (else NULL), stamp and
 * counts NULL, on the host whatever the table's device; no call for an empty table. Locked
 * shared for the whole call, as ct_table_save (sink must not call the table); the sort by id
 * takes 16 bytes an id, twice that while it runs. An aborted export is an error starting
 * "aborted: ". */
ct_error ct_table_export_chunks(ct_table t, int64_t chunk_rows, ct_table_sink sink, uintptr_t ctx);
/* Inserts or overwrites n ids with their rows [n, dim], states (state0/state1: [n, width],
 * NULL when the optimizer has fewer states) and metadata (last_step, frequency, stamp: [n]
 * each; NULL: the current step, 0 and the current step). Everything is copied and checked
 * (rows and states finite, the states the optimizer keeps >= 0 non-negative: Adagrad's sums,
 * Adam's exp_avg_sq, FTRL's n; ids distinct, stamps and last steps in [0, step]) before the
 * table changes;
 * last steps and frequencies are then clamped into what a row stores (see above). */
ct_error ct_table_import(ct_table t, int64_t n, const int64_t *ids, const float *rows,
                         const float *state0, const float *state1, const int64_t *last_step,
                         const int64_t *frequency, const int64_t *stamp);
/* What a delta carries besides its rows: where it lies in its table's chain of deltas, and the
 * table-wide state the next operations read.
 *   Chain: every table has a lineage (a random non-zero id) and a sequence, the number of marks
 *   in the lineage (0 at creation). A marked delta follows sequence base and brings a copy to
 *   seq = base + 1; an unmarked one has seq = base. The first mark of a table that tracks no
 *   changes (new, loaded, or swapped with such a table) starts a new lineage: its delta is the
 *   whole table (base 0). A copy takes a delta of base 0 only at sequence 0 (and then the ids
 *   the delta lacks go: it replaces the copy's contents), any other only from the same
 *   lineage at sequence base; it then takes the delta's lineage and seq. So a
 *   skipped, repeated or reordered marked delta is refused, as is one of another table.
 *   Table-wide state: the optimizer's parameters (the learning rate of ct_table_set_lr at
 *   [0]), the admission threshold, and the admission counts changed since the base (before
 *   the first mark: every count): count_ids with counts, a count of 0 for an id no longer
 *   counted. */
typedef struct {
  uint64_t lineage;      /* 0 (ct_table_apply_delta only): no chain, nothing below checked or set */
  int64_t base, seq;
  double opt_params[8];
  int64_t admit_after;
  int32_t counts_replace;  /* 1: the counts replace every count of the copy (a whole table's) */
  int64_t ncounts;         /* ct_table_apply_delta: the admission counts (ct_table_delta gives */
  const int64_t *count_ids; /* them as tensors) */
  const int64_t *counts;
} ct_table_delta_info;

/* Applies a delta of the table this one copies (its ct_table_delta, or one read back from a
 * file), all or nothing: removes the ndeleted ids (those the delta also writes are overwritten
 * instead), inserts or overwrites the n rows as ct_table_import does (checked the same way, last
 * steps and stamps against `step`), sets the step counter to step, and with info (may be NULL,
 * or have lineage 0: a delta of an older gorec, applied unchecked) the optimizer's parameters,
 * the admission threshold and counts, and the chain position. A delta of a step below the
 * table's counter is refused ("invalid argument: "), as is a delta out of the table's chain
 * ("incompatible: ", see ct_table_delta_info); the table is then unchanged. */
ct_error ct_table_apply_delta(ct_table t, int64_t step, int64_t ndeleted, const int64_t *deleted,
                              int64_t n, const int64_t *ids, const float *rows, const float *state0,
                              const float *state1, const int64_t *last_step, const int64_t *frequency,
                              const int64_t *stamp, const ct_table_delta_info *info);
/* Sets the position in a delta chain (lineage != 0, seq >= 0) that a checkpoint recorded
 * (ct_table_chunk's delta_lineage and delta_seq), so that a table loaded from it takes the
 * deltas that follow; a load sets it before importing rows. */
ct_error ct_table_set_delta_chain(ct_table t, uint64_t lineage, int64_t seq);
/* Sets the step counter (>= 0; a checkpoint load sets it before importing rows, whose last
 * steps and stamps must not exceed it). A step below a row's last step or momentum stamp is
 * refused: those must not lie beyond the counter. */
ct_error ct_table_set_step(ct_table t, int64_t step);
/* Checks the table's invariants: the id map's own, ids <-> row indices <-> storage blocks <->
 * free list, per-row metadata (last steps and stamps at most the step counter), admission
 * counts (only for ids without rows, >= 1), delta tracking, configuration, and optimizer
 * states (finite; accumulators and second moments >= 0; rows finite). Takes the lock shared
 * and reads every row: a pass over the table. Fails with "invalid argument: " naming the
 * first broken invariant. */
ct_error ct_table_check(ct_table t);
/* Exchanges the contents of two tables (ids, rows, states, metadata, step, configuration,
 * admission state, delta tracking) under both locks; they must agree in dim, block_rows, layout,
 * device, kernels, flags (CT_TABLE_TRACK_ACCESS) and optimizer kind. */
ct_error ct_table_swap(ct_table a, ct_table b);

/* Admission: with k > 1 an absent id gets a row at its k-th training lookup (occurrences
 * counted exactly, across batches); before that lookups give zero rows and updates drop its
 * gradient. k <= 1: every id is admitted at once (the default); the counts are then dropped. */
ct_error ct_table_set_admission(ct_table t, int64_t k);
/* Sets the optimizer's learning rate (FTRL: alpha) from the next step on, as assigning a torch
 * param_group's lr does; the rest of the configuration stays. It must be finite and >= 0 (FTRL:
 * > 0); a table without an optimizer is an error. With SGD momentum every row is first brought up
 * to date with the old rate (the moves of the steps it missed, applied lazily otherwise), which
 * costs a pass over the table and puts every row it moves (those behind the step) in the next delta. */
ct_error ct_table_set_lr(ct_table t, double lr);
/* *k: the threshold; *counted (may be NULL): ids being counted. */
ct_error ct_table_admission(int64_t *k, int64_t *counted, ct_table t);
/* Sets the counts of n ids (absent ids only; counts >= 1; admission on: n > 0 with a threshold
 * k <= 1 fails). All or none. */
ct_error ct_table_import_counts(ct_table t, int64_t n, const int64_t *ids, const int64_t *counts);

/* The metadata of every row: ids int64 [M] ascending, last_step and frequency int64 [M].
 * Needs CT_TABLE_TRACK_ACCESS (as do the policies of ct_table_evict). */
ct_error ct_table_metadata(ct_tensor *ids, ct_tensor *last_step, ct_tensor *frequency,
                           ct_table t);
/* ct_table_metadata in no particular order (ids unsorted: the order of the rows' storage, which
 * changes as rows come and go), without its sort by id, which is most of its cost (524k rows:
 * 5 ms against 42). */
ct_error ct_table_metadata_unsorted(ct_tensor *ids, ct_tensor *last_step, ct_tensor *frequency,
                                    ct_table t);

typedef enum {
  CT_EVICT_TTL = 0,   /* param: rows whose last step is more than param steps ago */
  CT_EVICT_LRU = 1,   /* param: keep that many rows, the most recently seen */
  CT_EVICT_LFU = 2,   /* param: keep that many rows, the most frequently seen */
  CT_EVICT_BYTES = 3  /* param: a budget in bytes: LRU keeping budget / (bytes per row) rows,
                       * counting 32 bytes of id map a row, then compaction (ct_table_compact)
                       * in the same critical section, with the id map rebuilt smaller where
                       * it holds more; if that compaction runs out of memory the eviction
                       * stands, uncompacted */
} ct_table_evict_policy;

/* Evicts rows by policy (ties: the more recently, then more frequently seen, then the smaller
 * id is kept): rows and all their state go. ids and rows (each may be NULL) get the evicted ids
 * ascending and their current rows; *n (may be NULL) how many. The rows are chosen under the
 * table's shared lock and removed under the exclusive one, each checked again there by the
 * policy's rule (TTL: age at the current step; keep-N: rank against the cut): rows trained in
 * between stay, rows inserted in between are not candidates, and after anything that may move
 * rows in between (delete, remove, clear, swap, compaction, eviction) the choice is made again
 * under the exclusive lock. */
ct_error ct_table_evict(ct_tensor *ids, ct_tensor *rows, int64_t *n, ct_table t, int32_t policy,
                        int64_t param);
/* Removes keys like ct_table_delete and returns the rows of those present (rows in the order
 * of ids, which gets the present keys). */
ct_error ct_table_remove(ct_tensor *ids, ct_tensor *rows, ct_table t, ct_tensor keys);
/* ct_table_remove for the keys whose rows are unchanged since the caller read their metadata:
 * a key goes only if its row's last step and frequency (as ct_table_metadata gives them) still
 * equal last_step[i] and frequency[i] (int64 [N] each, N the keys' count; the first occurrence
 * of a repeated key decides), so rows trained in between stay. Needs CT_TABLE_TRACK_ACCESS. */
ct_error ct_table_remove_unchanged(ct_tensor *ids, ct_tensor *rows, ct_table t, ct_tensor keys,
                                   ct_tensor last_step, ct_tensor frequency);
/* Moves the live rows into the lowest indices and frees the blocks above them (row indices
 * change; ids, rows, states and metadata do not). Only the rows at or above the new size
 * move, each into an index freed below it; the others keep theirs. An id map with room for
 * over twice its ids (a quarter or more of them removed, or a large capacity reserved) is
 * rebuilt at the size the ids need. */
ct_error ct_table_compact(ct_table t);

/* Deltas: the rows changed (inserted, written, updated) since the last mark and the ids deleted
 * since then and not present now (before the first mark: every row, no deletions). ids
 * ascending, rows, states (cap >= num_states), meta int64 [M, 3] (last step, frequency,
 * stamp), deleted int64 [D] ascending, step; all on the CPU. With mark != 0 a new mark is set in the same
 * critical section (nothing falls between two deltas). Applying the deletions and then
 * importing the rows (and setting the step) turns a copy at the previous mark into this table.
 * info (may be NULL) gets the chain and table-wide state (its count pointers NULL), count_ids
 * and counts (NULL or both set) the admission counts as int64 [C] tensors, ids ascending. */
ct_error ct_table_delta(ct_tensor *ids, ct_tensor *rows, ct_tensor *states, int32_t cap,
                        ct_tensor *meta, ct_tensor *deleted, int64_t *step,
                        ct_table_delta_info *info, ct_tensor *count_ids, ct_tensor *counts,
                        ct_table t, int32_t mark);

/* The rows and optimizer states of keys [N] as ct_table_export gives them (SGD momentum caught
 * up), without inserting anything and without copying the rest of the table: rows float32
 * [N, dim], states[i] [N, dim] or [N, 1] (cap >= num_states), found (may be NULL) bool [N];
 * on the keys' device. Ids not in the table give zeros in rows and states and false in found.
 * One shared lock for the whole batch: the rows and states of one moment. */
ct_error ct_table_read_state(ct_tensor *rows, ct_tensor *states, int32_t cap, ct_tensor *found,
                             ct_table t, ct_tensor keys);

/* ------------------------------------------------------------------------------------------ */
/* Table-batched embedding bags (csrc/table/bags.cc.h)                                               */
/*
 * The bags of several features, each pooled from its table, looked up and pooled in one call
 * (FBGEMM's table-batched embedding bags, TorchRec's KeyedJaggedTensor as input). ids int64 [N]
 * hold every feature's ids, segment after segment; bounds delimit S * B bags (S segments of B
 * bags, B the batch): offsets [S*B] as torch's (bag i is ids[offsets[i], offsets[i+1]), the last
 * one runs to N; they start at 0 and do not decrease), offsets [S*B+1] whose last one is N
 * (include_last_offset), or lengths [S*B] adding up to N. Feature i pools segment segments[i]
 * from tables[i] (a table may serve several features) with modes[i] (sum or mean) and opts[i]
 * (as ct_table_forward_bag's); the result is float32 [B, sum of the tables' dims], feature i's
 * columns after feature i-1's. per_sample_weights (float32 [N], without gradient; sum only) may
 * be NULL. Empty bags (and bags of padding ids only) give zero rows. Every input is checked
 * before any table changes; the lookups then run feature after feature.
 * The numbers are ct_table_forward_bag's, which takes this path for sum and mean bags of CPU ids
 * (per-sample weights without gradient): the forward equals PyTorch's CPU embedding_bag bit for
 * bit (a fused multiply-add per id in bag order, then / count for mean; weighted bags with a
 * padding id: product, then add, as torch); the backward sums each id's gradient in position
 * order (torch: in sorted-index order, equal up to rounding).
 */
typedef enum {
  CT_BAGS_OFFSETS = 0,              /* torch's offsets [S*B] */
  CT_BAGS_OFFSETS_INCLUDE_LAST = 1, /* offsets [S*B+1], the last one N */
  CT_BAGS_LENGTHS = 2               /* lengths [S*B] */
} ct_bags_bounds;

ct_error ct_table_bags_forward(ct_tensor *out, int32_t n, const ct_table *tables,
                               const ct_table_forward_options *opts, const int32_t *modes,
                               const int32_t *segments, int32_t num_segments, ct_tensor ids,
                               ct_tensor bounds, int32_t bounds_kind, ct_tensor per_sample_weights);
/* ct_table_step of n tables in one call: every table steps (stepped[i], when stepped is not
 * NULL, as ct_table_step's), and the first failure is returned (that table keeps its pending
 * gradients, as ct_table_step does). */
ct_error ct_table_step_all(int32_t *stepped, int32_t n, const ct_table *tables);
/* ct_table_zero_grad of n tables in one call. */
ct_error ct_table_zero_grad_all(int32_t n, const ct_table *tables);

/* ------------------------------------------------------------------------------------------ */
/* Process groups: torch.distributed's c10d ProcessGroupGloo (csrc/dist/) */

/* A process group: this process's place (rank) among world_size processes that run the same
 * collectives in the same order. Collectives on one group are serialised (a mutex); every rank
 * must issue them in the same order. The first collective that fails in Gloo (a peer died, a
 * rank did not take part within the timeout: the ranks are out of step) breaks the group:
 * every later collective fails at once with the "broken: " prefix. Free it and start over
 * (every rank). Calls that do not match across ranks fail on every rank without breaking it
 * (see the collectives). ct_dist_group_free must not run while another call uses the group. */
typedef struct ct_dist_group_s *ct_dist_group;

/* How a group starts. Strings may be NULL (same as ""); none is kept after the call. */
typedef struct {
  int32_t rank;       /* 0 <= rank < world_size */
  int32_t world_size; /* >= 1 */
  int64_t timeout_ms; /* > 0: the limit of the start-up and of every collective */
  /* The store the ranks meet through: a FileStore at store_path (one machine, tests) when it is
   * not empty, else a TCPStore at store_host:store_port that rank 0 serves. Where libtorch
   * supports it (ct_dist_store_binds_address) rank 0's server listens on store_host only;
   * before that (libtorch 1.x) c10d's server listens on every interface. */
  const char *store_path;
  const char *store_host;
  int32_t store_port; /* 1..65535 with a TCPStore */
  /* 1: no rank serves, every rank connects to a TCPStore that runs already (torchrun's agent
   * store, TORCHELASTIC_USE_AGENT_STORE); then store_prefix keeps this attempt's keys apart. */
  int32_t store_client_only;
  const char *store_prefix; /* every key of the group goes under it; NULL or "": none */
  /* Where Gloo's sockets bind: the address of network interface gloo_interface (as
   * GLOO_SOCKET_IFNAME) when it is not empty, else gloo_host (an address or host name) when it
   * is not empty, else the address of this machine's host name (loopback when it has none);
   * a missing interface or an address not of this host: "invalid argument: ". */
  const char *gloo_interface;
  const char *gloo_host;
  /* The job's identity (any string, e.g. a job id). Before any data moves every rank
   * announces its identity and world size through the store and checks every other rank's:
   * a difference, or a rank taken by another process, fails the start on the ranks that see
   * it with the "refused: " prefix. */
  const char *job;
  /* The backend of CUDA tensors: CT_DIST_GLOO (0: none, the collectives take CPU tensors only)
   * or CT_DIST_NCCL: a c10d ProcessGroupNCCL on CUDA device `device` (>= 0) as well, which moves
   * the collectives' CUDA tensors (that device's); the CPU tensors and the ranks' agreement before
   * each collective stay on Gloo. NCCL exists in builds with it only (ct_dist_backend_available;
   * Go's build tag gorec_nccl): elsewhere "invalid argument: ". NCCL's failures are reported,
   * never fatal, only where TORCH_NCCL_BLOCKING_WAIT=1 and TORCH_NCCL_ASYNC_ERROR_HANDLING=0 are
   * in the environment before the group starts (Go's package dist sets them). */
  int32_t backend;
  int32_t device;
} ct_dist_config;

/* The backends of ct_dist_config. */
typedef enum { CT_DIST_GLOO = 0, CT_DIST_NCCL = 1 } ct_dist_backend;

/* Reductions of ct_dist_all_reduce. CT_DIST_AVG: the sum divided by world_size, floating-point
 * tensors only. */
typedef enum { CT_DIST_SUM = 0, CT_DIST_AVG = 1, CT_DIST_MAX = 2 } ct_dist_op;

/* Starts a group: meets the other ranks through the store, checks their identities, connects
 * Gloo. Blocks until every rank has arrived (at most timeout_ms: then a "timeout: " error). */
ct_error ct_dist_group_new(ct_dist_group *out, const ct_dist_config *cfg);
/* Releases the group: Gloo's threads and connections, the store (rank 0's server with it). */
void ct_dist_group_free(ct_dist_group g);
/* 1 when a TCPStore server listens on store_host only (libtorch with masterListenFd), 0 when
 * c10d listens on every interface. */
ct_error ct_dist_store_binds_address(int32_t *out);
/* 1 when this build has the backend (CT_DIST_GLOO always; CT_DIST_NCCL where cgotorch was
 * built with NCCL against a libtorch with CUDA), else 0. */
ct_error ct_dist_backend_available(int32_t *out, int32_t backend);

/* The collectives. Inputs are CPU tensors (any layout), or CUDA tensors of the group's device
 * with the NCCL backend, and are never modified; results are new contiguous tensors on the
 * input's device, written only on success. Every rank's tensor must be on the same kind of
 * device. Before any data moves the ranks exchange what
 * each was asked to do (the collective, dtype, shape, reduction, root, splits) and all of them
 * fail alike when the calls do not match: "mismatch: " on every rank, or "invalid argument: " on
 * a rank whose own arguments were wrong (a NULL or closed tensor: "closed: ") and "mismatch: "
 * on the others. The group stays usable after these: nothing was sent. The errors that break it
 * (see ct_dist_group): "timeout: " (a rank did not take part within the timeout), "peer: " (a
 * peer failed or left); later calls then fail with "broken: ". */

/* The element-wise reduction of t over every rank; t has the same shape and dtype everywhere. */
ct_error ct_dist_all_reduce(ct_tensor *out, ct_dist_group g, ct_tensor t, int32_t op);
/* root's t on every rank; t has the same shape and dtype everywhere (its values matter on root
 * only). */
ct_error ct_dist_broadcast(ct_tensor *out, ct_dist_group g, ct_tensor t, int32_t root);
/* Every rank's t (the same shape [N, ...] and dtype everywhere; a 0-d t is taken as [1])
 * concatenated along dimension 0 in rank order: [world_size * N, ...]. */
ct_error ct_dist_all_gather(ct_tensor *out, ct_dist_group g, ct_tensor t);
/* All-to-all with uneven splits along dimension 0: this rank sends rows
 * [sum(send_splits[:j]), +send_splits[j]) of in to rank j, and out holds the rows received from
 * each rank j in rank order, recv_splits[j] of them (recv_splits: n entries, written on
 * success). n must be world_size, sum(send_splits) in's first dimension, every split >= 0; every
 * rank's in has the same dtype and sizes after the first. */
ct_error ct_dist_all_to_all(ct_tensor *out, int64_t *recv_splits, ct_dist_group g, ct_tensor in,
                            const int64_t *send_splits, int32_t n);
/* Returns when every rank has called it. */
ct_error ct_dist_barrier(ct_dist_group g);
/* The most integers ct_dist_all_gather_ints moves. */
#define CT_DIST_GATHER_INTS_MAX 8
/* Every rank's n integers v (n the same everywhere, 0 <= n <= CT_DIST_GATHER_INTS_MAX) in rank
 * order: out holds world_size * n. They ride in the agreement header every collective exchanges,
 * so this costs one exchange where ct_dist_all_gather costs two (the header, then the data). */
ct_error ct_dist_all_gather_ints(int64_t *out, ct_dist_group g, const int64_t *v, int32_t n);

#ifdef __cplusplus
}
#endif

#endif /* CGOTORCH_H */
