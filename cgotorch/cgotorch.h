/*
 * cgotorch.h: the C ABI of gorec over libtorch. Pure C (C99 and C++), one prefix: ct_.
 *
 * Conventions
 *  - Handles are typed opaque pointers (ct_tensor, ct_scope, ...), created by the library and
 *    released with the matching _free/_end function; every _free accepts NULL.
 *  - Every function that can fail returns ct_error: NULL on success, otherwise a heap string
 *    describing the failure (libtorch's message without its C++ backtrace). The caller releases
 *    it with ct_error_free. No error state is kept anywhere else (no thread-local "last error").
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

/* An error message; NULL means success. Release with ct_error_free. */
typedef char *ct_error;
void ct_error_free(ct_error err);
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
  int32_t index; /* -1: the current device of that type */
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

ct_error ct_set_num_threads(int32_t n);
ct_error ct_get_num_threads(int32_t *out);
ct_error ct_manual_seed(uint64_t seed);
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
/* Copy to another device and/or dtype (dtype -1 keeps t's dtype). */
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
/* Sets the calling thread's grad mode; *prev gets the previous one. Thread-local in libtorch:
 * the caller must stay on one OS thread until it restores the mode. */
ct_error ct_grad_mode_set(int32_t *prev, int32_t enabled);

/* ------------------------------------------------------------------------------------------ */
/* Scopes: every tensor handle created on the calling thread while a scope is the innermost open
 * one belongs to it; ct_scope_end releases the memory of those not kept. The handles themselves
 * stay valid (using one afterwards gives an error) until ct_tensor_free. A scope is bound to the
 * thread that began it; ends must nest. */

ct_error ct_scope_begin(ct_scope *out);
/* Takes t out of s; it moves to s's enclosing scope if there is one. */
ct_error ct_scope_keep(ct_scope s, ct_tensor t);
/* Releases the tensors still in s and frees s. *released gets how many (may be NULL). */
ct_error ct_scope_end(int64_t *released, ct_scope s);

/* ------------------------------------------------------------------------------------------ */
/* Tensor operations                                                                           */
/* (ops section) */

#ifdef __cplusplus
}
#endif

#endif /* CGOTORCH_H */
