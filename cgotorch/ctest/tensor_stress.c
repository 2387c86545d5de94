/* tensor_stress.c: the tensor half of the C ABI from many threads at once, as goroutines use it
 * (they migrate between OS threads; each call may come from any): tensors created and freed,
 * scopes begun, kept from and ended, operations on a shared weight, and backward passes that
 * all accumulate into that weight's gradient. Built and run under ThreadSanitizer by
 * `make tensor-tsan` (cgotorch's handle and byte counters, scope registry and autograd glue
 * are C++ that Go's race detector does not see).
 *
 * Checks besides the sanitizer's reports: every forward value matches a plain loop (1e-4
 * relative); the shared weight's gradient after all threads is the sum of every pass's
 * 2 x^T (x W) (1e-3 relative: float sums in any order), so no concurrent accumulation was lost;
 * scopes release what they hold (a released handle gives an error, a kept one does not); and
 * at the end no handle is live and the live tensor bytes are back where they started. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cgotorch.h"
#include "check.h"

enum { THREADS = 6, ITERS = 300, N = 4, K = 16, M = 8 };

static float w[K * M];              /* the shared weight's values */
static ct_tensor weight;            /* [K, M], requires grad; shared by every thread */
static double want_grad[K * M];     /* sum of every pass's gradient, each thread adding its own */
static pthread_mutex_t want_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long bad;

static void fail(const char *what) {
  fprintf(stderr, "tensor stress: %s\n", what);
  atomic_fetch_add(&bad, 1);
}

static int fine(ct_error err, const char *what) {
  if (err == NULL) return 1;
  fprintf(stderr, "tensor stress: %s: %s\n", what, err);
  ct_error_free(err);
  atomic_fetch_add(&bad, 1);
  return 0;
}

static int near(double got, double want, double rel) { return fabs(got - want) <= rel * (1 + fabs(want)); }

/* One pass: y = x W (checked), s = sum(y * y), backward into W's gradient. All handles are
 * made inside a scope; y is kept out of it and freed by hand. */
static void pass(uint32_t *r, double *grad) {
  float x[N * K], y[N * M];
  for (int i = 0; i < N * K; i++) {
    *r = *r * 1664525u + 1013904223u;
    x[i] = (float)(*r >> 20) / 2048.0f - 1.0f;
  }
  const int64_t xs[2] = {N, K};
  ct_scope sc = NULL;
  ct_tensor xt = NULL, yt = NULL, sq = NULL, s = NULL, clone = NULL;
  int64_t released = 0;
  if (!fine(ct_scope_begin(&sc), "scope begin")) return;
  int good = fine(ct_tensor_from_data(&xt, x, sizeof x, CT_FLOAT32, xs, 2), "from data") &&
             fine(ct_mm(&yt, xt, weight), "mm") && fine(ct_binary(&sq, CT_OP_MUL, yt, yt), "mul") &&
             fine(ct_reduce(&s, CT_REDUCE_SUM, sq, NULL, 0, 0), "sum") &&
             fine(ct_tensor_shallow_clone(&clone, weight), "clone") && fine(ct_scope_keep(sc, yt), "keep") &&
             fine(ct_tensor_backward(s, NULL, 0), "backward") && fine(ct_tensor_copy_to(y, sizeof y, yt, CT_FLOAT32), "copy");
  if (fine(ct_scope_end(&released, sc), "scope end") && good) {
    int64_t n = 0;
    if (released != 4) fail("a scope released the wrong count");
    if (!fails_with(ct_tensor_numel(&n, sq), "released")) fail("a released tensor could still be used");
    if (!fine(ct_tensor_numel(&n, yt), "numel of the kept tensor") || n != N * M) fail("the kept tensor changed");
  }
  if (good) {
    for (int i = 0; i < N; i++)
      for (int j = 0; j < M; j++) {
        double v = 0;
        for (int k = 0; k < K; k++) v += (double)x[i * K + k] * w[k * M + j];
        if (!near(y[i * M + j], v, 1e-4)) fail("x W differs from the loop");
        for (int k = 0; k < K; k++) grad[k * M + j] += 2.0 * x[i * K + k] * v; /* d sum(y^2) / dW */
      }
  }
  ct_tensor_free(xt);
  ct_tensor_free(yt);
  ct_tensor_free(sq);
  ct_tensor_free(s);
  ct_tensor_free(clone);
}

static void *work(void *arg) {
  uint32_t r = (uint32_t)(uintptr_t)arg;
  double grad[K * M];
  memset(grad, 0, sizeof grad);
  for (int i = 0; i < ITERS; i++) pass(&r, grad);
  pthread_mutex_lock(&want_mu);
  for (int i = 0; i < K * M; i++) want_grad[i] += grad[i];
  pthread_mutex_unlock(&want_mu);
  return NULL;
}

int main(void) {
  CHECK(ok(ct_set_num_threads(1))); /* libtorch's OpenMP runtime is not instrumented */
  const int64_t bytes0 = ct_live_bytes();
  for (int i = 0; i < K * M; i++) w[i] = (float)((i * 37) % 23) / 23.0f - 0.5f;
  const int64_t ws[2] = {K, M};
  CHECK(ok(ct_tensor_from_data(&weight, w, sizeof w, CT_FLOAT32, ws, 2)) && ok(ct_tensor_set_requires_grad(weight, 1)));
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], NULL, work, (void *)(uintptr_t)(1000 + 17 * i)) == 0);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(th[i], NULL) == 0);
  CHECK(atomic_load(&bad) == 0);
  ct_tensor g = NULL;
  float got[K * M];
  int same = 1;
  CHECK(ok(ct_tensor_grad(&g, weight)) && ok(ct_tensor_copy_to(got, sizeof got, g, CT_FLOAT32)));
  for (int i = 0; i < K * M; i++) same &= near(got[i], want_grad[i], 1e-3);
  CHECK(same); /* no accumulation lost */
  ct_tensor_free(g);
  ct_tensor_free(weight);
  CHECK(ct_live_handles() == 0);
  CHECK(ct_live_bytes() == bytes0);
  printf("tensor stress: %d threads x %d passes; %d passed, %d failed\n", THREADS, ITERS, passed, failed);
  return failed == 0 ? 0 : 1;
}
