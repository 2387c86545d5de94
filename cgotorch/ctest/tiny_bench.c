/* tiny_bench.c: the floor of nn's BenchmarkTinyStep: the same training step of the same tiny
 * model (2 SparseAdam tables of dim 8, batch 32, rows concatenated -> Linear(16, 1) with Adam ->
 * BCE with logits, mean) made of the same C ABI calls gorec's Go code makes, in a C loop with no
 * Go: what libtorch and cgotorch's C++ cost for these ops. `make tiny-bench`.
 *
 * One step, as the Go step makes it: a scope; zero the Linear's gradients and the tables'
 * pending ones; two table lookups (training, autograd); cat; linear; the loss; backward; one
 * ct_optim_step_params over weight and bias; a step of each table; end of the scope. The figure
 * is the best of 5 repetitions of 4,000 steps (after 500 to warm up), in thread CPU time and in
 * wall time, µs per step. Output: `BENCH tiny_step_c_cpu <v> µs/step` and `BENCH tiny_step_c
 * <v> µs/step`. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cgotorch.h"

enum { FIELDS = 2, DIM = 8, BATCH = 32, IDS = 1000, NBATCH = 16, STEPS = 4000, REPS = 5 };

static void die(ct_error e, const char *what) {
  if (e == NULL) return;
  fprintf(stderr, "%s: %s\n", what, e);
  exit(1);
}

static double seconds(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static ct_tensor fill(int32_t kind, int64_t rows, int64_t cols, int32_t requires_grad) {
  int64_t shape[2] = {rows, cols};
  ct_options o = {CT_FLOAT32, {CT_CPU, -1}, requires_grad};
  ct_tensor t;
  die(ct_tensor_new(&t, kind, 0, shape, cols > 0 ? 2 : 1, o), "tensor");
  return t;
}

static ct_table table(const char *name) {
  ct_table_config c;
  memset(&c, 0, sizeof c);
  c.dim = DIM;
  c.capacity = IDS;
  c.initializer = CT_INIT_NORMAL;
  c.init_params[1] = 0.01;
  c.optimizer = CT_OPT_SPARSE_ADAM;
  c.opt_params[0] = 1e-3;
  c.opt_params[1] = 0.9;
  c.opt_params[2] = 0.999;
  c.opt_params[3] = 1e-8;
  c.device.type = CT_CPU;
  c.device.index = -1;
  c.seed = 1;
  ct_table t;
  die(ct_table_new(&t, name, &c), "table");
  int64_t all[IDS], n = IDS;
  for (int64_t i = 0; i < IDS; i++) all[i] = i;
  ct_tensor keys, rows;
  die(ct_tensor_from_data(&keys, all, sizeof all, CT_INT64, &n, 1), "keys");
  die(ct_table_lookup(&rows, t, keys), "fill");
  ct_tensor_free(rows);
  ct_tensor_free(keys);
  return t;
}

int main(void) {
  die(ct_set_num_threads(1), "threads");
  ct_table tables[FIELDS] = {table("tiny0"), table("tiny1")};
  ct_tensor weight = fill(CT_FILL_RAND, 1, FIELDS * DIM, 1), bias = fill(CT_FILL_RAND, 1, 0, 1);
  ct_tensor params[2] = {weight, bias};
  ct_tensor states[6] = {fill(CT_FILL_ZEROS, 1, FIELDS * DIM, 0), fill(CT_FILL_ZEROS, 1, FIELDS * DIM, 0), NULL,
                         fill(CT_FILL_ZEROS, 1, 0, 0), fill(CT_FILL_ZEROS, 1, 0, 0), NULL};
  ct_optim_options adam = {.kind = CT_OPTIM_ADAM, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  ct_table_forward_options fwd = {.train = 1};
  ct_tensor ids[NBATCH][FIELDS], labels[NBATCH];
  srand(1);
  for (int k = 0; k < NBATCH; k++) {
    int64_t v[BATCH], shape[2] = {BATCH, 1}, n = BATCH;
    float l[BATCH];
    for (int f = 0; f < FIELDS; f++) {
      for (int i = 0; i < BATCH; i++) v[i] = rand() % IDS;
      die(ct_tensor_from_data(&ids[k][f], v, sizeof v, CT_INT64, &n, 1), "ids");
    }
    for (int i = 0; i < BATCH; i++) l[i] = (float)(rand() % 2);
    die(ct_tensor_from_data(&labels[k], l, sizeof l, CT_FLOAT32, shape, 2), "labels");
  }
  int64_t steps[2] = {0, 0};
  double best_cpu = 1e30, best_wall = 1e30;
  for (int rep = -1; rep < REPS; rep++) {
    int n = rep < 0 ? 500 : STEPS;
    double c0 = seconds(CLOCK_THREAD_CPUTIME_ID), w0 = seconds(CLOCK_MONOTONIC);
    for (int s = 0; s < n; s++) {
      const int k = s % NBATCH;
      ct_scope scope;
      die(ct_scope_begin(&scope), "scope");
      for (int p = 0; p < 2; p++) die(ct_tensor_zero_grad(params[p]), "zero grad");
      for (int f = 0; f < FIELDS; f++) die(ct_table_zero_grad(tables[f]), "table zero grad");
      ct_tensor rows[FIELDS], x, y, loss;
      for (int f = 0; f < FIELDS; f++) die(ct_table_forward(&rows[f], tables[f], ids[k][f], &fwd), "forward");
      die(ct_join(&x, CT_JOIN_CAT, rows, FIELDS, 1), "cat");
      die(ct_linear(&y, x, weight, bias), "linear");
      die(ct_loss(&loss, CT_LOSS_BCE_WITH_LOGITS, y, labels[k], CT_REDUCTION_MEAN), "loss");
      die(ct_tensor_backward(loss, NULL, 0), "backward");
      steps[0]++, steps[1]++;
      die(ct_optim_step_params(NULL, 2, params, states, steps, &adam), "optim step");
      for (int f = 0; f < FIELDS; f++) die(ct_table_step(NULL, tables[f]), "table step");
      die(ct_scope_end(NULL, scope), "scope end");
      /* The Go step frees its handles when the scope ends (the handles themselves by their
       * cleanups later); here they go at once. */
      for (int f = 0; f < FIELDS; f++) ct_tensor_free(rows[f]);
      ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(loss);
    }
    double cpu = (seconds(CLOCK_THREAD_CPUTIME_ID) - c0) / n, wall = (seconds(CLOCK_MONOTONIC) - w0) / n;
    if (rep >= 0 && cpu < best_cpu) best_cpu = cpu;
    if (rep >= 0 && wall < best_wall) best_wall = wall;
  }
  printf("BENCH tiny_step_c %.1f µs/step\n", best_wall * 1e6);
  printf("BENCH tiny_step_c_cpu %.1f µs/step\n", best_cpu * 1e6);
  return 0;
}
