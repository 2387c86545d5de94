/* abi_test.c: exercises the C ABI directly (creation, ops, errors, frees), as a C99 program.
 * Built and run under AddressSanitizer and UndefinedBehaviorSanitizer by `make sanitize`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cgotorch.h"
#include "check.h"

static ct_options cpu_float(void) {
  ct_options o;
  o.dtype = CT_FLOAT32;
  o.device.type = CT_CPU;
  o.device.index = -1;
  o.requires_grad = 0;
  return o;
}

static void test_create_and_copy(void) {
  float in[6] = {1, 2, 3, 4, 5, 6}, out[6] = {0};
  int64_t shape[2] = {2, 3}, got[2] = {0, 0};
  int32_t nd = 0, dt = -1;
  ct_tensor t = NULL;
  CHECK(ok(ct_tensor_from_data(&t, in, sizeof in, CT_FLOAT32, shape, 2)));
  CHECK(ok(ct_tensor_ndim(&nd, t)) && nd == 2);
  CHECK(ok(ct_tensor_shape(got, 2, t)) && got[0] == 2 && got[1] == 3);
  CHECK(ok(ct_tensor_dtype(&dt, t)) && dt == CT_FLOAT32);
  CHECK(ok(ct_tensor_copy_to(out, sizeof out, t, CT_FLOAT32)) && memcmp(in, out, sizeof in) == 0);
  /* wrong size, wrong dtype, NULL out-parameter: errors, nothing written */
  CHECK(fails_with(ct_tensor_copy_to(out, 4, t, CT_FLOAT32), "bytes"));
  CHECK(fails_with(ct_tensor_copy_to(out, sizeof out, t, CT_INT64), "dtype"));
  CHECK(fails_with(ct_tensor_ndim(NULL, t), "NULL"));
  CHECK(fails_with(ct_tensor_from_data(&t, in, 5, CT_FLOAT32, shape, 2), "bytes"));
  CHECK(fails_with(ct_tensor_from_data(&t, in, sizeof in, 99, shape, 2), "dtype"));
  char *s = NULL;
  CHECK(ok(ct_tensor_string(&s, t)) && s != NULL && strstr(s, "CPUFloatType") != NULL);
  ct_string_free(s);
  ct_tensor_free(t);
  ct_tensor_free(NULL);
  ct_error_free(NULL);
}

static void test_factories_and_errors(void) {
  int64_t shape[1] = {4}, bad[1] = {-1};
  ct_tensor a = NULL, b = NULL;
  ct_options o = cpu_float();
  CHECK(ok(ct_tensor_new(&a, CT_FILL_FULL, 2.5, shape, 1, o)));
  float v[4];
  CHECK(ok(ct_tensor_copy_to(v, sizeof v, a, CT_FLOAT32)) && v[0] == 2.5f && v[3] == 2.5f);
  CHECK(fails_with(ct_tensor_new(&b, CT_FILL_ZEROS, 0, bad, 1, o), "negative"));
  CHECK(b == NULL);
  CHECK(fails_with(ct_tensor_new(&b, 42, 0, shape, 1, o), "fill"));
  o.device.type = 77;
  CHECK(fails_with(ct_tensor_new(&b, CT_FILL_ZEROS, 0, shape, 1, o), "device"));
  CHECK(fails_with(ct_tensor_ndim(&(int32_t){0}, NULL), "NULL"));
  CHECK(fails_with(ct_set_num_threads(0), "positive"));
  ct_tensor_free(a);
}

static void test_autograd(void) {
  float in[3] = {1, 2, 3}, g[3];
  int64_t shape[1] = {3};
  ct_tensor x = NULL, grad = NULL, y = NULL;
  CHECK(ok(ct_tensor_from_data(&x, in, sizeof in, CT_FLOAT32, shape, 1)));
  CHECK(ok(ct_tensor_grad(&grad, x)) && grad == NULL);
  CHECK(ok(ct_tensor_set_requires_grad(x, 1)));
  /* backward of a non-scalar without a gradient is an error, not a crash */
  CHECK(fails_with(ct_tensor_backward(x, NULL, 0), "grad"));
  ct_tensor ones = NULL;
  CHECK(ok(ct_tensor_new(&ones, CT_FILL_ONES, 0, shape, 1, cpu_float())));
  CHECK(ok(ct_tensor_detach(&y, x)));
  int32_t rg = 1;
  CHECK(ok(ct_tensor_requires_grad(&rg, y)) && rg == 0);
  int32_t prev = -1, ignored;
  CHECK(ok(ct_grad_mode_set(&prev, 0)) && prev == 1);
  CHECK(ok(ct_grad_mode_set(&ignored, prev)));
  /* set data: x takes ones' data and stays a leaf requiring grad; a NULL source is an error */
  CHECK(ok(ct_tensor_set_data(x, ones)));
  CHECK(ok(ct_tensor_requires_grad(&rg, x)) && rg == 1);
  CHECK(fails_with(ct_tensor_set_data(x, NULL), "NULL"));
  CHECK(fails_with(ct_tensor_set_data(NULL, ones), "NULL"));
  (void)g;
  ct_tensor_free(ones);
  ct_tensor_free(y);
  ct_tensor_free(x);
}

static void test_scopes(void) {
  int64_t shape[1] = {8};
  int64_t released = -1;
  ct_scope outer = NULL, inner = NULL;
  ct_tensor a = NULL, b = NULL, c = NULL;
  int64_t handles = ct_live_handles(), bytes = ct_live_bytes();
  CHECK(ok(ct_scope_begin(&outer)));
  CHECK(ok(ct_scope_begin(&inner)));
  CHECK(ok(ct_tensor_new(&a, CT_FILL_ONES, 0, shape, 1, cpu_float())));
  CHECK(ok(ct_tensor_new(&b, CT_FILL_ONES, 0, shape, 1, cpu_float())));
  CHECK(ok(ct_tensor_new(&c, CT_FILL_ONES, 0, shape, 1, cpu_float())));
  CHECK(ct_live_bytes() == bytes + 3 * 32);
  ct_tensor_free(c); /* freed inside the scope: the scope must forget it */
  CHECK(ok(ct_scope_keep(inner, b)));
  CHECK(fails_with(ct_scope_end(&released, outer), "reverse order"));
  CHECK(ok(ct_scope_end(&released, inner)) && released == 1);
  int32_t nd;
  CHECK(fails_with(ct_tensor_ndim(&nd, a), "released"));
  CHECK(ok(ct_tensor_ndim(&nd, b)) && nd == 1); /* kept: moved to the outer scope */
  CHECK(ok(ct_scope_end(&released, outer)) && released == 1);
  CHECK(fails_with(ct_tensor_ndim(&nd, b), "released"));
  CHECK(ct_live_bytes() == bytes);
  ct_tensor_free(a);
  ct_tensor_free(b);
  CHECK(ct_live_handles() == handles);
  CHECK(fails_with(ct_scope_end(NULL, NULL), "NULL"));
}

static void test_counters(void) {
  int64_t handles = ct_live_handles(), bytes = ct_live_bytes();
  int64_t shape[2] = {256, 256};
  ct_tensor t = NULL;
  CHECK(ok(ct_tensor_new(&t, CT_FILL_ZEROS, 0, shape, 2, cpu_float())));
  CHECK(ct_live_handles() == handles + 1);
  CHECK(ct_live_bytes() == bytes + 256 * 256 * 4);
  CHECK(*ct_live_bytes_counter() == ct_live_bytes());
  ct_tensor_free(t);
  CHECK(ct_live_handles() == handles && ct_live_bytes() == bytes);
}

static void test_ops(void) {
  float in[6] = {1, -2, 3, -4, 5, -6}, out[6];
  int64_t shape[2] = {2, 3}, dims[1] = {1}, args[2] = {3, 2}, got[2];
  ct_tensor a = NULL, b = NULL, r = NULL, v = NULL, i = NULL, inv = NULL;
  int64_t handles = ct_live_handles();
  CHECK(ok(ct_tensor_from_data(&a, in, sizeof in, CT_FLOAT32, shape, 2)));
  CHECK(ok(ct_unary(&b, CT_OP_ABS, a)));
  CHECK(ok(ct_binary(&r, CT_OP_ADD, a, b)));
  CHECK(ok(ct_tensor_copy_to(out, sizeof out, r, CT_FLOAT32)) && out[0] == 2 && out[1] == 0);
  ct_tensor_free(r);
  CHECK(ok(ct_reduce(&r, CT_REDUCE_SUM, a, dims, 1, 0)));
  CHECK(ok(ct_tensor_copy_to(out, 2 * sizeof(float), r, CT_FLOAT32)) && out[0] == 2 && out[1] == -5);
  ct_tensor_free(r);
  CHECK(ok(ct_shape_op(&r, CT_SHAPE_RESHAPE, a, args, 2)));
  CHECK(ok(ct_tensor_shape(got, 2, r)) && got[0] == 3 && got[1] == 2);
  ct_tensor_free(r);
  ct_tensor list[2];
  list[0] = a;
  list[1] = b;
  CHECK(ok(ct_join(&r, CT_JOIN_STACK, list, 2, 0)));
  ct_tensor_free(r);
  {
    ct_tensor pieces[2] = {NULL, NULL};
    int64_t sizes[2] = {1, 2}, bad[2] = {1, 1};
    CHECK(ok(ct_split(pieces, 2, a, sizes, 1)));
    CHECK(ok(ct_tensor_shape(got, 2, pieces[1])) && got[0] == 2 && got[1] == 2);
    CHECK(ok(ct_tensor_copy_to(out, 4 * sizeof(float), pieces[1], CT_FLOAT32)) && out[0] == -2 && out[3] == -6);
    ct_tensor_free(pieces[0]);
    ct_tensor_free(pieces[1]);
    pieces[0] = pieces[1] = NULL;
    CHECK(fails_with(ct_split(pieces, 2, a, bad, 1), "") && pieces[0] == NULL && pieces[1] == NULL);
    CHECK(fails_with(ct_split(NULL, 2, a, sizes, 1), "NULL"));
    CHECK(fails_with(ct_split(pieces, 0, a, sizes, 1), "no pieces"));
  }
  CHECK(ok(ct_reduce_with_indices(NULL, &i, CT_REDUCE_MAX, a, 1, 0)));
  ct_tensor_free(i);
  i = NULL;
  CHECK(ok(ct_unique(&v, &inv, NULL, b, 1)) && v != NULL && inv != NULL);
  ct_tensor_free(v);
  ct_tensor_free(inv);
  v = NULL;
  CHECK(ok(ct_inplace_binary(b, CT_OP_ADD, a, 0.5)));
  CHECK(ok(ct_inplace_scalar(b, CT_OP_SET, 0)));
  /* errors: unknown or wrong-family op codes, NULL outputs and lists, bad arguments */
  r = NULL;
  CHECK(fails_with(ct_unary(&r, CT_OP_ADD, a), "unsupported unary"));
  CHECK(fails_with(ct_binary(&r, CT_OP_NEG, a, b), "unsupported binary"));
  CHECK(fails_with(ct_binary(&r, CT_OP_SET, a, b), "unsupported binary"));
  CHECK(fails_with(ct_inplace_binary(b, CT_OP_MUL, a, 2), "alpha"));
  CHECK(fails_with(ct_inplace_scalar(b, CT_OP_POW, 2), "unsupported in-place"));
  CHECK(fails_with(ct_reduce(&r, 999, a, NULL, 0, 0), "unsupported reduce"));
  CHECK(fails_with(ct_reduce(&r, CT_REDUCE_SUM, a, NULL, 1, 0), "NULL"));
  CHECK(fails_with(ct_reduce_with_indices(&v, &i, CT_REDUCE_SUM, a, 0, 0), "unsupported"));
  CHECK(fails_with(ct_shape_op(&r, CT_SHAPE_TRANSPOSE, a, args, 1), "takes 2"));
  CHECK(fails_with(ct_join(&r, CT_JOIN_CAT, NULL, 0, 0), "empty"));
  CHECK(fails_with(ct_join(&r, CT_JOIN_CAT, NULL, 2, 0), "NULL"));
  CHECK(fails_with(ct_index(&r, CT_INDEX_ADD, a, 0, a), "unsupported index"));
  CHECK(fails_with(ct_loss(&r, CT_LOSS_MSE, a, b, 3), "reduction"));
  CHECK(fails_with(ct_loss(&r, 1, a, b, 1), "unsupported loss"));
  CHECK(fails_with(ct_mm(NULL, a, b), "NULL"));
  CHECK(fails_with(ct_mm(&r, a, b), "mat"));
  CHECK(fails_with(ct_topk(&v, NULL, a, 1, 0, 1, 1), "NULL"));
  CHECK(r == NULL && v == NULL && i == NULL);
  ct_tensor_free(b);
  ct_tensor_free(a);
  CHECK(ct_live_handles() == handles);
}

/* ct_optim_step: SGD with momentum and Adam on known values; errors change nothing. */
static void test_optim_step(void) {
  float pv[2] = {1, -2}, gv[2] = {0.5f, 1}, out[2] = {0};
  int64_t shape[1] = {2}, shape3[1] = {3};
  ct_options o = cpu_float();
  ct_tensor p = NULL, g = NULL, buf = NULL, m = NULL, v = NULL, bad = NULL;
  ct_optim_options sgd, adam;
  memset(&sgd, 0, sizeof sgd);
  sgd.kind = CT_OPTIM_SGD;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  CHECK(ok(ct_tensor_from_data(&p, pv, sizeof pv, CT_FLOAT32, shape, 1)));
  CHECK(ok(ct_tensor_from_data(&g, gv, sizeof gv, CT_FLOAT32, shape, 1)));
  CHECK(ok(ct_tensor_new(&buf, CT_FILL_ZEROS, 0, shape, 1, o)));
  CHECK(ok(ct_tensor_new(&bad, CT_FILL_ZEROS, 0, shape3, 1, o)));
  /* step 1: buf = g, p -= 0.1 g; step 2: buf = 0.9 g + g, p -= 0.1 * 1.9 g */
  CHECK(ok(ct_optim_step(p, g, buf, NULL, NULL, 1, &sgd)));
  CHECK(ok(ct_optim_step(p, g, buf, NULL, NULL, 2, &sgd)));
  CHECK(ok(ct_tensor_copy_to(out, sizeof out, p, CT_FLOAT32)));
  CHECK(out[0] > 0.855f - 1e-6f && out[0] < 0.855f + 1e-6f && out[1] > -2.29f - 1e-6f && out[1] < -2.29f + 1e-6f);
  /* errors: nothing moves */
  CHECK(fails_with(ct_optim_step(p, g, NULL, NULL, NULL, 1, &sgd), "momentum_buffer"));
  CHECK(fails_with(ct_optim_step(p, g, bad, NULL, NULL, 1, &sgd), "shaped"));
  CHECK(fails_with(ct_optim_step(p, bad, buf, NULL, NULL, 1, &sgd), "gradient"));
  CHECK(fails_with(ct_optim_step(p, g, buf, NULL, NULL, 0, &sgd), "step"));
  CHECK(fails_with(ct_optim_step(p, g, buf, NULL, NULL, 1, NULL), "NULL"));
  CHECK(fails_with(ct_optim_step_params(NULL, 1, NULL, NULL, NULL, &sgd), "NULL"));
  CHECK(ok(ct_optim_step_params(NULL, 0, NULL, NULL, NULL, &sgd)));
  sgd.kind = 99;
  CHECK(fails_with(ct_optim_step(p, g, buf, NULL, NULL, 1, &sgd), "unknown optimizer"));
  CHECK(ok(ct_tensor_copy_to(out, sizeof out, p, CT_FLOAT32)) && out[0] > 0.855f - 1e-6f && out[0] < 0.855f + 1e-6f);
  /* Adam's first step moves every coordinate by about lr against the gradient's sign */
  memset(&adam, 0, sizeof adam);
  adam.kind = CT_OPTIM_ADAM;
  adam.lr = 0.01;
  adam.beta1 = 0.9;
  adam.beta2 = 0.999;
  adam.eps = 1e-8;
  CHECK(ok(ct_tensor_new(&m, CT_FILL_ZEROS, 0, shape, 1, o)));
  CHECK(ok(ct_tensor_new(&v, CT_FILL_ZEROS, 0, shape, 1, o)));
  CHECK(fails_with(ct_optim_step(p, g, m, NULL, NULL, 1, &adam), "exp_avg_sq"));
  CHECK(ok(ct_optim_step(p, g, m, v, NULL, 1, &adam)));
  CHECK(ok(ct_tensor_copy_to(out, sizeof out, p, CT_FLOAT32)));
  CHECK(out[0] > 0.845f - 1e-5f && out[0] < 0.845f + 1e-5f && out[1] > -2.30f - 1e-5f && out[1] < -2.30f + 1e-5f);
  ct_tensor_free(p);
  ct_tensor_free(g);
  ct_tensor_free(buf);
  ct_tensor_free(m);
  ct_tensor_free(v);
  ct_tensor_free(bad);
}

/* ct_rng_state / ct_set_rng_state / ct_rng_check_state: restoring a state repeats the draws that
 * followed it; a bad state is an error and leaves the generator as it was. */
static void test_rng_state(void) {
  int64_t shape[1] = {32}, short_shape[1] = {16}, n = 0;
  float first[32], again[32];
  ct_options o = cpu_float();
  ct_tensor state = NULL, r = NULL, bad = NULL;
  int32_t nd = 0, dt = -1;
  CHECK(ok(ct_manual_seed(11)));
  CHECK(ok(ct_rng_state(&state)) && state != NULL);
  CHECK(ok(ct_tensor_ndim(&nd, state)) && nd == 1);
  CHECK(ok(ct_tensor_dtype(&dt, state)) && dt == CT_UINT8);
  CHECK(ok(ct_tensor_new(&r, CT_FILL_RAND, 0, shape, 1, o)));
  CHECK(ok(ct_tensor_copy_to(first, sizeof first, r, CT_FLOAT32)));
  ct_tensor_free(r);
  r = NULL;
  CHECK(ok(ct_set_rng_state(state)));
  CHECK(ok(ct_tensor_new(&r, CT_FILL_RAND, 0, shape, 1, o)));
  CHECK(ok(ct_tensor_copy_to(again, sizeof again, r, CT_FLOAT32)) && memcmp(first, again, sizeof first) == 0);
  ct_tensor_free(r);
  r = NULL;
  /* errors: a float tensor, a uint8 tensor of the wrong size, NULL; then the draws still follow
   * the state set last */
  CHECK(ok(ct_set_rng_state(state)));
  CHECK(ok(ct_tensor_new(&bad, CT_FILL_ZEROS, 0, shape, 1, o)));
  CHECK(fails_with(ct_set_rng_state(bad), "uint8"));
  ct_tensor_free(bad);
  bad = NULL;
  o.dtype = CT_UINT8;
  CHECK(ok(ct_tensor_new(&bad, CT_FILL_ZEROS, 0, short_shape, 1, o)));
  CHECK(fails_with(ct_set_rng_state(bad), "size"));
  CHECK(fails_with(ct_set_rng_state(NULL), "NULL"));
  CHECK(fails_with(ct_rng_state(NULL), "NULL"));
  /* ct_rng_check_state: the same checks, contents included (a state of the right size filled
   * with 0xff is no mt19937 state), on a private generator */
  CHECK(ok(ct_rng_check_state(state)));
  CHECK(fails_with(ct_rng_check_state(bad), "size"));
  CHECK(fails_with(ct_rng_check_state(NULL), "NULL"));
  ct_tensor_free(bad);
  bad = NULL;
  CHECK(ok(ct_tensor_numel(&n, state)) && n > 0);
  CHECK(ok(ct_tensor_new(&bad, CT_FILL_FULL, 255, &n, 1, o)));
  CHECK(fails_with(ct_rng_check_state(bad), "mt19937"));
  CHECK(fails_with(ct_set_rng_state(bad), "mt19937"));
  o.dtype = CT_FLOAT32;
  CHECK(ok(ct_tensor_new(&r, CT_FILL_RAND, 0, shape, 1, o)));
  CHECK(ok(ct_tensor_copy_to(again, sizeof again, r, CT_FLOAT32)) && memcmp(first, again, sizeof first) == 0);
  ct_tensor_free(r);
  ct_tensor_free(bad);
  ct_tensor_free(state);
}

/* Every *_free of cgotorch.h accepts NULL as a no-op. The list is checked against the header
 * itself: test_free_null reads cgotorch.h (next to this file's directory, found through
 * __FILE__, so run from the repository root as `make sanitize` does) and fails for any
 * function declared there whose name ends in _free and that is missing here. */
static void free_error_null(void) { ct_error_free(NULL); }
static void free_string_null(void) { ct_string_free(NULL); }
static void free_tensor_null(void) { ct_tensor_free(NULL); }
static void free_table_null(void) { ct_table_free(NULL); }
static void free_dist_group_null(void) { ct_dist_group_free(NULL); }
static const struct {
  const char *name;
  void (*call_with_null)(void);
} free_functions[] = {
    {"ct_error_free", free_error_null},
    {"ct_string_free", free_string_null},
    {"ct_tensor_free", free_tensor_null},
    {"ct_table_free", free_table_null},
    {"ct_dist_group_free", free_dist_group_null},
};
#define NUM_FREE_FUNCTIONS ((int)(sizeof free_functions / sizeof free_functions[0]))

static int is_ident(int c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

static void test_free_null(void) {
  char path[512];
  const char *file = __FILE__, *slash = strstr(file, "ctest/abi_test.c");
  size_t dir = slash != NULL ? (size_t)(slash - file) : 0;
  int i, declared = 0;
  static char text[1 << 17];
  size_t len;
  FILE *f;
  CHECK(dir + sizeof "cgotorch.h" < sizeof path);
  memcpy(path, file, dir);
  strcpy(path + dir, "cgotorch.h");
  f = fopen(path, "r");
  CHECK(f != NULL);
  if (f == NULL) {
    fprintf(stderr, "cannot open %s (run from the repository root)\n", path);
    return;
  }
  len = fread(text, 1, sizeof text - 1, f);
  CHECK(feof(f)); /* read it whole */
  fclose(f);
  text[len] = '\0';
  /* every identifier ct_..._free followed by '(' (after blanks): a declaration (the prose
   * mentions them without parentheses) */
  for (size_t p = 0; p + 3 < len; p++) {
    if (strncmp(text + p, "ct_", 3) != 0 || (p > 0 && is_ident((unsigned char)text[p - 1]))) continue;
    size_t e = p;
    while (e < len && is_ident((unsigned char)text[e])) e++;
    size_t q = e;
    while (q < len && (text[q] == ' ' || text[q] == '\t')) q++;
    if (e - p > 5 && strncmp(text + e - 5, "_free", 5) == 0 && q < len && text[q] == '(') {
      int found = 0;
      declared++;
      for (i = 0; i < NUM_FREE_FUNCTIONS; i++) {
        if (strlen(free_functions[i].name) == e - p && strncmp(free_functions[i].name, text + p, e - p) == 0) found = 1;
      }
      if (!found) fprintf(stderr, "%.*s is declared in cgotorch.h but not called with NULL by abi_test.c\n", (int)(e - p), text + p);
      CHECK(found);
    }
    p = e;
  }
  CHECK(declared == NUM_FREE_FUNCTIONS);
  for (i = 0; i < NUM_FREE_FUNCTIONS; i++) free_functions[i].call_with_null(); /* no-ops */
}

/* A sink that must never be called. */
static int32_t never_sink(uintptr_t ctx, const ct_table_chunk *chunk) {
  (void)chunk;
  *(int *)ctx += 1;
  return 0;
}

/* Bad table handles (NULL, a closed table) through every ct_table_* taking one: an error with
 * the "closed: " prefix, never a crash, out-parameters untouched (they keep a sentinel), no
 * handle leaked. */
static void test_bad_table_handles(void) {
  static char mark;
  ct_tensor const S = (ct_tensor)(void *)&mark; /* sentinel: never a real handle */
  int64_t handles = ct_live_handles();
  int64_t idv[2] = {1, 2}, cnt[2] = {1, 1};
  float rowsv[8] = {0}, buf[8];
  uint8_t found[2] = {7, 7};
  int64_t shape1[1] = {2}, shape2[2] = {2, 4};
  int64_t bag_shape[2] = {1, 2};
  ct_tensor keys = NULL, vals = NULL, bag = NULL;
  CHECK(ok(ct_tensor_from_data(&keys, idv, sizeof idv, CT_INT64, shape1, 1)));
  CHECK(ok(ct_tensor_from_data(&bag, idv, sizeof idv, CT_INT64, bag_shape, 2)));
  CHECK(ok(ct_tensor_from_data(&vals, rowsv, sizeof rowsv, CT_FLOAT32, shape2, 2)));
  ct_table_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.dim = 4;
  cfg.optimizer = CT_OPT_SGD;
  cfg.opt_params[0] = 0.1;
  cfg.device.type = CT_CPU;
  cfg.device.index = -1;
  ct_table live = NULL, closed = NULL;
  ct_table first = NULL;
  uint64_t serial = 0, serial2 = 0, serial_live = 0;
  CHECK(ok(ct_table_new(&live, "abi_bad_live", &cfg)));
  CHECK(ok(ct_table_new(&first, "abi_bad_handles", &cfg)));
  CHECK(ok(ct_table_open(&closed, "abi_bad_handles")));
  /* a table's serial: the same through every handle, distinct from any other table's */
  CHECK(ok(ct_table_serial(&serial, first)) && ok(ct_table_serial(&serial2, closed)) && serial == serial2);
  CHECK(ok(ct_table_serial(&serial_live, live)) && serial_live != serial && serial != 0);
  CHECK(fails_with(ct_table_serial(NULL, live), "NULL"));
  CHECK(ok(ct_table_close(closed)));
  CHECK(ok(ct_table_close(closed))); /* twice is fine */
  ct_table_forward_options fo;
  memset(&fo, 0, sizeof fo);
  fo.train = 1;
  int calls = 0;
  for (int which = 0; which < 2; which++) {
    ct_table h = which == 0 ? NULL : closed;
    ct_tensor a = S, b = S, c = S, st[2] = {S, S}, d = S, e = S;
    int64_t i64 = -7, j64 = -7;
    int32_t i32 = -7;
    char *str = (char *)&mark;
    ct_table_stats stats;
    ct_table_config cg;
    memset(&stats, 0x5a, sizeof stats);
    memset(&cg, 0x5a, sizeof cg);
    if (which == 0) CHECK(fails_with(ct_table_close(h), "closed: "));
    CHECK(fails_with(ct_table_lookup(&a, h, keys), "closed: "));
    CHECK(fails_with(ct_table_indices(&a, h, keys, 1), "closed: "));
    CHECK(fails_with(ct_table_read(&a, &b, h, keys, CT_READ_ZEROS), "closed: "));
    CHECK(fails_with(ct_table_lookup_into(buf, 8, h, idv, 2), "closed: "));
    CHECK(fails_with(ct_table_lookup_counted(&a, h, keys, keys), "closed: "));
    CHECK(fails_with(ct_table_read_into(buf, 8, found, h, idv, 2, CT_READ_ZEROS), "closed: "));
    CHECK(fails_with(ct_table_write(h, keys, vals), "closed: "));
    CHECK(fails_with(ct_table_update(h, keys, vals), "closed: "));
    CHECK(fails_with(ct_table_prefetch(&i64, h, keys, CT_READ_ZEROS), "closed: "));
    CHECK(fails_with(ct_table_prefetch_wait(&a, &b, &i32, h, 0, 0), "closed: "));
    CHECK(fails_with(ct_table_prefetch_discard(h, 0), "closed: "));
    CHECK(fails_with(ct_table_delete(&i64, h, keys), "closed: "));
    CHECK(fails_with(ct_table_clear(h), "closed: "));
    CHECK(fails_with(ct_table_stats_get(&stats, h), "closed: "));
    CHECK(fails_with(ct_table_export(&a, &b, st, 2, &i64, h), "closed: "));
    CHECK(fails_with(ct_table_forward(&a, h, keys, &fo), "closed: "));
    CHECK(fails_with(ct_table_forward_bag(&a, h, bag, NULL, NULL, CT_BAG_SUM, &fo), "closed: "));
    CHECK(fails_with(ct_table_step(&i32, h), "closed: "));
    CHECK(fails_with(ct_table_zero_grad(h), "closed: "));
    CHECK(fails_with(ct_table_pending_grad(&a, &b, h), "closed: "));
    CHECK(fails_with(ct_table_config_get(&cg, h), "closed: "));
    CHECK(fails_with(ct_table_save(h, 4, never_sink, (uintptr_t)&calls), "closed: "));
    CHECK(fails_with(ct_table_export_chunks(h, 4, never_sink, (uintptr_t)&calls), "closed: "));
    CHECK(fails_with(ct_table_import(h, 2, idv, rowsv, NULL, NULL, NULL, NULL, NULL), "closed: "));
    CHECK(fails_with(ct_table_apply_delta(h, 0, 0, NULL, 2, idv, rowsv, NULL, NULL, NULL, NULL, NULL, NULL),
                     "closed: "));
    CHECK(fails_with(ct_table_set_step(h, 1), "closed: "));
    CHECK(fails_with(ct_table_set_delta_chain(h, 1, 0), "closed: "));
    CHECK(fails_with(ct_table_check(h), "closed: "));
    CHECK(fails_with(ct_table_swap(h, live), "closed: "));
    CHECK(fails_with(ct_table_swap(live, h), "closed: "));
    CHECK(fails_with(ct_table_set_admission(h, 2), "closed: "));
    CHECK(fails_with(ct_table_set_lr(h, 0.5), "closed: "));
    CHECK(fails_with(ct_table_admission(&i64, &j64, h), "closed: "));
    CHECK(fails_with(ct_table_import_counts(h, 2, idv, cnt), "closed: "));
    CHECK(fails_with(ct_table_metadata(&a, &b, &c, h), "closed: "));
    CHECK(fails_with(ct_table_metadata_unsorted(&a, &b, &c, h), "closed: "));
    CHECK(fails_with(ct_table_evict(&a, &b, &i64, h, CT_EVICT_TTL, 1), "closed: "));
    CHECK(fails_with(ct_table_remove(&a, &b, h, keys), "closed: "));
    CHECK(fails_with(ct_table_remove_unchanged(&a, &b, h, keys, keys, keys), "closed: "));
    CHECK(fails_with(ct_table_compact(h), "closed: "));
    CHECK(fails_with(ct_table_delta(&a, &b, st, 2, &c, &d, &i64, NULL, NULL, NULL, h, 1), "closed: "));
    if (which == 0) CHECK(fails_with(ct_table_name(&str, h), "closed: "));
    serial2 = 7;
    if (which == 0) CHECK(fails_with(ct_table_serial(&serial2, h), "closed: ") && serial2 == 7);
    CHECK(a == S && b == S && c == S && d == S && e == S && st[0] == S && st[1] == S);
    CHECK(i64 == -7 && j64 == -7 && i32 == -7 && str == (char *)&mark);
    CHECK(found[0] == 7 && found[1] == 7);
  }
  CHECK(calls == 0);
  /* by name: a closed table's name is free again */
  CHECK(fails_with(ct_table_update_by_name("abi_bad_handles", keys, vals), "not found: "));
  CHECK(fails_with(ct_table_update_by_name(NULL, keys, vals), "NULL"));
  {
    /* a table opened under a closed one's name has another serial */
    ct_table again = NULL;
    CHECK(ok(ct_table_new(&again, "abi_bad_handles", &cfg)));
    CHECK(ok(ct_table_serial(&serial2, again)) && serial2 != serial && serial2 != serial_live);
    CHECK(ok(ct_table_close(again)));
    ct_table_free(again);
  }
  CHECK(ok(ct_table_close(first))); /* through another handle: closed already, fine */
  ct_table_free(first);
  ct_table_free(closed);
  CHECK(ok(ct_table_close(live)));
  ct_table_free(live);
  ct_tensor_free(keys);
  ct_tensor_free(vals);
  ct_tensor_free(bag);
  CHECK(ct_live_handles() == handles);
}

/* NULL and released (scope-ended) tensor handles through every function taking a ct_tensor:
 * an error with the "closed: " prefix, out-parameters untouched, no handle leaked. */
static void test_bad_tensor_handles(void) {
  static char mark;
  ct_tensor const S = (ct_tensor)(void *)&mark;
  int64_t handles = ct_live_handles();
  int64_t shape[1] = {4}, dims[1] = {0};
  ct_tensor good = NULL, released = NULL;
  ct_scope sc = NULL;
  CHECK(ok(ct_tensor_new(&good, CT_FILL_ONES, 0, shape, 1, cpu_float())));
  CHECK(ok(ct_scope_begin(&sc)));
  CHECK(ok(ct_tensor_new(&released, CT_FILL_ONES, 0, shape, 1, cpu_float())));
  CHECK(ok(ct_scope_end(NULL, sc)));
  ct_optim_options oo;
  memset(&oo, 0, sizeof oo);
  oo.kind = CT_OPTIM_SGD;
  oo.lr = 0.1;
  for (int which = 0; which < 2; which++) {
    ct_tensor h = which == 0 ? NULL : released;
    ct_tensor a = S, b = S, c = S, list[2];
    int32_t i32 = -7;
    int64_t i64 = -7, shp[1] = {-7};
    char *str = (char *)&mark;
    ct_device dev;
    float f[4];
    dev.type = -7;
    dev.index = -7;
    list[0] = good;
    list[1] = h;
    CHECK(fails_with(ct_tensor_copy_to(f, sizeof f, h, CT_FLOAT32), "closed: "));
    CHECK(fails_with(ct_tensor_ndim(&i32, h), "closed: "));
    CHECK(fails_with(ct_tensor_shape(shp, 1, h), "closed: "));
    CHECK(fails_with(ct_tensor_numel(&i64, h), "closed: "));
    CHECK(fails_with(ct_tensor_dtype(&i32, h), "closed: "));
    CHECK(fails_with(ct_tensor_device(&dev, h), "closed: "));
    CHECK(fails_with(ct_tensor_string(&str, h), "closed: "));
    CHECK(fails_with(ct_tensor_shallow_clone(&a, h), "closed: "));
    CHECK(fails_with(ct_tensor_to(&a, h, cpu_float().device, -1), "closed: "));
    CHECK(fails_with(ct_tensor_set_requires_grad(h, 1), "closed: "));
    CHECK(fails_with(ct_tensor_requires_grad(&i32, h), "closed: "));
    CHECK(fails_with(ct_tensor_backward(h, NULL, 0), "closed: "));
    if (which == 1) CHECK(fails_with(ct_tensor_backward(good, h, 0), "closed: "));
    CHECK(fails_with(ct_tensor_grad(&a, h), "closed: "));
    CHECK(fails_with(ct_tensor_zero_grad(h), "closed: "));
    CHECK(fails_with(ct_tensor_detach(&a, h), "closed: "));
    CHECK(fails_with(ct_tensor_set_data(h, good), "closed: "));
    CHECK(fails_with(ct_tensor_set_data(good, h), "closed: "));
    CHECK(fails_with(ct_set_rng_state(h), "closed: "));
    CHECK(fails_with(ct_rng_check_state(h), "closed: "));
    CHECK(fails_with(ct_unary(&a, CT_OP_NEG, h), "closed: "));
    CHECK(fails_with(ct_binary(&a, CT_OP_ADD, good, h), "closed: "));
    CHECK(fails_with(ct_binary_scalar(&a, CT_OP_ADD, h, 1), "closed: "));
    CHECK(fails_with(ct_inplace_binary(h, CT_OP_ADD, good, 1), "closed: "));
    CHECK(fails_with(ct_inplace_binary(good, CT_OP_ADD, h, 1), "closed: "));
    CHECK(fails_with(ct_inplace_scalar(h, CT_OP_ADD, 1), "closed: "));
    CHECK(fails_with(ct_optim_step(h, good, NULL, NULL, NULL, 1, &oo), "closed: "));
    CHECK(fails_with(ct_optim_step(good, h, NULL, NULL, NULL, 1, &oo), "closed: "));
    CHECK(fails_with(ct_clamp(&a, h, 0, 1, 1, 1), "closed: "));
    CHECK(fails_with(ct_where(&a, h, good, good), "closed: "));
    CHECK(fails_with(ct_masked_fill(&a, good, h, 0), "closed: "));
    CHECK(fails_with(ct_reduce(&a, CT_REDUCE_SUM, h, dims, 1, 0), "closed: "));
    CHECK(fails_with(ct_reduce_with_indices(&a, &b, CT_REDUCE_MAX, h, 0, 0), "closed: "));
    CHECK(fails_with(ct_topk(&a, &b, h, 1, 0, 1, 1), "closed: "));
    CHECK(fails_with(ct_sort(&a, &b, h, 0, 0), "closed: "));
    CHECK(fails_with(ct_shape_op(&a, CT_SHAPE_CLONE, h, NULL, 0), "closed: "));
    CHECK(fails_with(ct_narrow(&a, h, 0, 0, 1), "closed: "));
    {
      int64_t sizes[1] = {1};
      CHECK(fails_with(ct_split(&a, 1, h, sizes, 0), "closed: "));
    }
    CHECK(fails_with(ct_join(&a, CT_JOIN_CAT, list, 2, 0), "closed: "));
    CHECK(fails_with(ct_index(&a, CT_INDEX_SELECT, good, 0, h), "closed: "));
    CHECK(fails_with(ct_index_update(&a, CT_INDEX_ADD, good, 0, h, good, 0), "closed: "));
    CHECK(fails_with(ct_unique(&a, &b, &c, h, 1), "closed: "));
    CHECK(fails_with(ct_mm(&a, h, good), "closed: "));
    CHECK(fails_with(ct_matmul(&a, good, h), "closed: "));
    CHECK(fails_with(ct_linear(&a, good, h, NULL), "closed: "));
    CHECK(fails_with(ct_softmax(&a, h, 0, 0), "closed: "));
    CHECK(fails_with(ct_dropout(&a, h, 0.5, 1), "closed: "));
    CHECK(fails_with(ct_loss(&a, CT_LOSS_MSE, h, good, 1), "closed: "));
    CHECK(a == S && b == S && c == S && str == (char *)&mark);
    CHECK(i32 == -7 && i64 == -7 && shp[0] == -7 && dev.type == -7 && dev.index == -7);
  }
  ct_tensor_free(released);
  ct_tensor_free(good);
  CHECK(ct_live_handles() == handles);
}

/* Failing calls with several out-parameters (argument errors found by the wrapper, by the table
 * or by libtorch, late in the call): every out-parameter keeps its sentinel, no handle leaks. */
static void test_errors_leave_outputs(void) {
  static char mark;
  ct_tensor const S = (ct_tensor)(void *)&mark;
  int64_t handles = ct_live_handles();
  int64_t shape[2] = {2, 3}, idv[2] = {1, 2};
  float in[6] = {1, 2, 3, 4, 5, 6};
  ct_tensor x = NULL, keys = NULL;
  CHECK(ok(ct_tensor_from_data(&x, in, sizeof in, CT_FLOAT32, shape, 2)));
  CHECK(ok(ct_tensor_from_data(&keys, idv, sizeof idv, CT_INT64, &shape[0], 1)));
  ct_tensor a = S, b = S, c = S, d = S, st[2] = {S, S};
  int64_t i64 = -7, j64 = -7;
  int32_t i32 = -7;
  ct_device bad_dev;
  bad_dev.type = CT_CPU;
  bad_dev.index = 3;
  CHECK(fails_with(ct_reduce_with_indices(&a, &b, CT_REDUCE_MAX, x, 5, 0), "range"));
  CHECK(fails_with(ct_reduce_with_indices(NULL, &b, CT_REDUCE_MIN, x, 5, 0), "range"));
  CHECK(fails_with(ct_topk(&a, &b, x, 9, 1, 1, 1), "range"));
  CHECK(fails_with(ct_sort(&a, &b, x, 4, 0), "range"));
  CHECK(fails_with(ct_unique(&a, &b, &c, NULL, 1), "closed: "));
  CHECK(fails_with(ct_tensor_to(&a, x, bad_dev, -1), "CPU device index"));
  CHECK(fails_with(ct_tensor_to(&a, x, cpu_float().device, 99), "dtype"));
  CHECK(fails_with(ct_index_update(&a, CT_INDEX_ADD, x, 0, keys, x, 0), "index"));
  CHECK(fails_with(ct_shape_op(&a, CT_SHAPE_VIEW, x, idv, 1), "shape"));
  CHECK(fails_with(ct_narrow(&a, x, 0, 1, 5), "length"));
  CHECK(fails_with(ct_softmax(&a, x, 7, 0), "range"));
  CHECK(fails_with(ct_loss(&a, CT_LOSS_BCE, x, keys, 1), "size"));
  CHECK(a == S && b == S && c == S);

  ct_table_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.dim = 3;
  cfg.optimizer = CT_OPT_ADAGRAD;
  cfg.opt_params[0] = 0.1;
  cfg.opt_params[3] = 1e-10;
  cfg.device.type = CT_CPU;
  cfg.device.index = -1;
  ct_table t = NULL;
  CHECK(ok(ct_table_new(&t, "abi_errors_outputs", &cfg)));
  ct_table_forward_options fo;
  memset(&fo, 0, sizeof fo);
  fo.train = 1;
  CHECK(fails_with(ct_table_lookup(&a, t, x), "int64"));
  CHECK(fails_with(ct_table_read(&a, &b, t, keys, 9), "read default"));
  CHECK(fails_with(ct_table_indices(&a, t, x, 1), "int64"));
  CHECK(fails_with(ct_table_export(&a, &b, st, 0, &i64, t), "room"));
  CHECK(fails_with(ct_table_export(&a, &b, NULL, 1, &i64, t), "NULL"));
  CHECK(fails_with(ct_table_delta(&a, &b, st, 0, &c, &d, &i64, NULL, NULL, NULL, t, 1), "room"));
  CHECK(fails_with(ct_table_delta(&a, &b, NULL, 1, &c, &d, &i64, NULL, NULL, NULL, t, 1), "NULL"));
  CHECK(fails_with(ct_table_evict(&a, &b, &i64, t, 99, 1), "invalid argument: "));
  CHECK(fails_with(ct_table_metadata(&a, &b, &c, t), "invalid argument: "));
  CHECK(fails_with(ct_table_metadata_unsorted(&a, &b, &c, t), "invalid argument: "));
  CHECK(fails_with(ct_table_metadata_unsorted(&a, NULL, &c, t), "NULL"));
  CHECK(fails_with(ct_table_remove_unchanged(&a, &b, t, keys, keys, keys), "invalid argument: "));
  CHECK(fails_with(ct_table_remove_unchanged(&a, &b, t, keys, keys, NULL), "closed: "));
  CHECK(fails_with(ct_table_remove(&a, &b, t, x), "int64"));
  CHECK(fails_with(ct_table_prefetch(&i64, t, keys, 9), "read default"));
  CHECK(fails_with(ct_table_prefetch_wait(&a, &b, &i32, t, 12345, 0), "unknown prefetch: "));
  CHECK(fails_with(ct_table_delete(&i64, t, x), "int64"));
  CHECK(fails_with(ct_table_forward(&a, t, x, &fo), "int64"));
  CHECK(fails_with(ct_table_forward(&a, t, keys, NULL), "NULL"));
  CHECK(fails_with(ct_table_forward_bag(&a, t, keys, NULL, NULL, 7, &fo), "bag mode"));
  CHECK(fails_with(ct_table_admission(NULL, &j64, t), "NULL"));
  CHECK(fails_with(ct_table_pending_grad(&a, NULL, t), "NULL"));
  ct_table other = (ct_table)(void *)&mark;
  CHECK(fails_with(ct_table_open(&other, "no such table"), "not found: "));
  CHECK(fails_with(ct_table_new(&other, "abi_errors_outputs", &cfg), "name taken: "));
  CHECK(other == (ct_table)(void *)&mark);
  CHECK(a == S && b == S && c == S && d == S && st[0] == S && st[1] == S);
  CHECK(i64 == -7 && j64 == -7 && i32 == -7);
  /* a prefetch of a table closed under it: the wait fails, nothing is written */
  int64_t id = -1;
  CHECK(ok(ct_table_prefetch(&id, t, keys, CT_READ_ZEROS)));
  CHECK(ok(ct_table_close(t)));
  CHECK(fails_with(ct_table_prefetch_wait(&a, &b, &i32, t, id, -1), "closed: "));
  CHECK(a == S && b == S && i32 == -7);
  ct_table_free(t);

  ct_scope s1 = NULL, s2 = NULL;
  CHECK(ok(ct_scope_begin(&s1)));
  CHECK(ok(ct_scope_begin(&s2)));
  CHECK(fails_with(ct_scope_end(&i64, s1), "reverse order"));
  CHECK(i64 == -7);
  CHECK(ok(ct_scope_end(NULL, s2)));
  CHECK(ok(ct_scope_end(NULL, s1)));
  ct_tensor_free(x);
  ct_tensor_free(keys);
  CHECK(ct_live_handles() == handles);
}

/* ct_table_lookup_counted: key i counts counts[i] times in the rows' frequency and the
 * admission counts, as a batch holding it counts[i] times would; its rows are ct_table_lookup's.
 * Bad counts fail with the output untouched and the table unchanged. */
static void test_lookup_counted(void) {
  static char mark;
  ct_tensor const S = (ct_tensor)(void *)&mark;
  int64_t handles = ct_live_handles();
  int64_t idv[3] = {3, 5, 3}, cntv[3] = {2, 1, 4}, zerov[3] = {1, 0, 1}, id9 = 9, two = 2, one = 1;
  int64_t n3 = 3, n2 = 2, n1 = 1;
  float fv[3] = {1, 1, 1};
  ct_tensor keys = NULL, counts = NULL, zeros = NULL, shorter = NULL, floats = NULL;
  CHECK(ok(ct_tensor_from_data(&keys, idv, sizeof idv, CT_INT64, &n3, 1)));
  CHECK(ok(ct_tensor_from_data(&counts, cntv, sizeof cntv, CT_INT64, &n3, 1)));
  CHECK(ok(ct_tensor_from_data(&zeros, zerov, sizeof zerov, CT_INT64, &n3, 1)));
  CHECK(ok(ct_tensor_from_data(&shorter, cntv, 2 * sizeof(int64_t), CT_INT64, &n2, 1)));
  CHECK(ok(ct_tensor_from_data(&floats, fv, sizeof fv, CT_FLOAT32, &n3, 1)));
  ct_table_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.dim = 2;
  cfg.optimizer = CT_OPT_SGD;
  cfg.opt_params[0] = 0.1;
  cfg.device.type = CT_CPU;
  cfg.device.index = -1;
  cfg.flags = CT_TABLE_TRACK_ACCESS;
  cfg.initializer = CT_INIT_UNIFORM;
  cfg.init_params[0] = -1;
  cfg.init_params[1] = 1;
  ct_table t = NULL;
  CHECK(ok(ct_table_new(&t, "abi_lookup_counted", &cfg)));
  ct_tensor a = S, rows = NULL, plain = NULL, ids = NULL, last = NULL, freq = NULL;
  ct_table_stats st;
  CHECK(fails_with(ct_table_lookup_counted(&a, t, keys, shorter), "counts has 2 values for 3 keys"));
  CHECK(fails_with(ct_table_lookup_counted(&a, t, keys, zeros), "counts must be >= 1, got 0 at 1"));
  CHECK(fails_with(ct_table_lookup_counted(&a, t, keys, floats), "counts must be int64"));
  CHECK(fails_with(ct_table_lookup_counted(&a, t, keys, NULL), "closed: "));
  CHECK(fails_with(ct_table_lookup_counted(NULL, t, keys, counts), "NULL"));
  CHECK(a == S);
  CHECK(ok(ct_table_stats_get(&st, t)) && st.size == 0);
  /* the rows of ct_table_lookup; 3 counted 2 + 4, then 1 + 1 by the plain lookup; 5 once each */
  CHECK(ok(ct_table_lookup_counted(&rows, t, keys, counts)));
  CHECK(ok(ct_table_lookup(&plain, t, keys)));
  float got[6], want[6];
  CHECK(ok(ct_tensor_copy_to(got, sizeof got, rows, CT_FLOAT32)));
  CHECK(ok(ct_tensor_copy_to(want, sizeof want, plain, CT_FLOAT32)));
  CHECK(memcmp(got, want, sizeof got) == 0 && got[0] != 0);
  int64_t mid[2] = {0, 0}, mfreq[2] = {0, 0};
  CHECK(ok(ct_table_metadata(&ids, &last, &freq, t)));
  CHECK(ok(ct_tensor_copy_to(mid, sizeof mid, ids, CT_INT64)) && mid[0] == 3 && mid[1] == 5);
  CHECK(ok(ct_tensor_copy_to(mfreq, sizeof mfreq, freq, CT_INT64)) && mfreq[0] == 8 && mfreq[1] == 2);
  ct_tensor_free(rows);
  ct_tensor_free(ids);
  ct_tensor_free(last);
  ct_tensor_free(freq);
  /* admission counts the counts: 9 counted 2 of 3, then admitted at its third */
  ct_tensor k9 = NULL, c2 = NULL, c1 = NULL;
  int64_t k = 0, counted = -1;
  CHECK(ok(ct_tensor_from_data(&k9, &id9, sizeof id9, CT_INT64, &n1, 1)));
  CHECK(ok(ct_tensor_from_data(&c2, &two, sizeof two, CT_INT64, &n1, 1)));
  CHECK(ok(ct_tensor_from_data(&c1, &one, sizeof one, CT_INT64, &n1, 1)));
  CHECK(ok(ct_table_set_admission(t, 3)));
  CHECK(ok(ct_table_lookup_counted(&rows, t, k9, c2)));
  CHECK(ok(ct_table_admission(&k, &counted, t)) && k == 3 && counted == 1);
  CHECK(ok(ct_table_stats_get(&st, t)) && st.size == 2);
  ct_tensor_free(rows);
  CHECK(ok(ct_table_lookup_counted(&rows, t, k9, c1)));
  CHECK(ok(ct_table_admission(&k, &counted, t)) && counted == 0);
  CHECK(ok(ct_table_stats_get(&st, t)) && st.size == 3);
  ct_tensor_free(rows);
  CHECK(ok(ct_table_close(t)));
  ct_table_free(t);
  ct_tensor_free(plain);
  ct_tensor_free(k9);
  ct_tensor_free(c2);
  ct_tensor_free(c1);
  ct_tensor_free(keys);
  ct_tensor_free(counts);
  ct_tensor_free(zeros);
  ct_tensor_free(shorter);
  ct_tensor_free(floats);
  CHECK(ct_live_handles() == handles);
}

/* Empty inputs with NULL pointers, which the header allows wherever a length is 0: fine, and
 * no NULL reaches memcpy or the like (UBSan's nonnull checks). */
static void test_empty_with_null_pointers(void) {
  int64_t handles = ct_live_handles();
  int64_t zero = 0, shape0[2] = {0, 4};
  ct_tensor e = NULL, k = NULL, r = NULL, f = NULL, st = NULL, ids = NULL, rows = NULL, meta = NULL, del = NULL;
  CHECK(ok(ct_tensor_from_data(&e, NULL, 0, CT_FLOAT32, shape0, 2)));
  CHECK(ok(ct_tensor_copy_to(NULL, 0, e, CT_FLOAT32)));
  CHECK(ok(ct_tensor_from_data(&k, NULL, 0, CT_INT64, &zero, 1)));
  CHECK(ok(ct_tensor_shape(NULL, 0, e)));
  ct_table_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.dim = 4;
  cfg.optimizer = CT_OPT_ADAGRAD;
  cfg.opt_params[0] = 0.1;
  cfg.opt_params[3] = 1e-10;
  cfg.device.type = CT_CPU;
  cfg.device.index = -1;
  cfg.flags = CT_TABLE_TRACK_ACCESS;
  ct_table t = NULL;
  CHECK(ok(ct_table_new(&t, "abi_empty_null", &cfg)));
  CHECK(ok(ct_table_lookup_into(NULL, 0, t, NULL, 0)));
  CHECK(ok(ct_table_read_into(NULL, 0, NULL, t, NULL, 0, CT_READ_INITIAL)));
  CHECK(ok(ct_table_import(t, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL)));
  CHECK(ok(ct_table_apply_delta(t, 0, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)));
  CHECK(ok(ct_table_import_counts(t, 0, NULL, NULL)));
  CHECK(ok(ct_table_lookup(&r, t, k)));
  ct_tensor_free(r);
  r = NULL;
  CHECK(ok(ct_table_lookup_counted(&r, t, k, k)));
  CHECK(ok(ct_table_read(&f, NULL, t, k, CT_READ_ZEROS)));
  CHECK(ok(ct_table_write(t, k, e)));
  CHECK(ok(ct_table_update(t, k, e)));
  CHECK(ok(ct_table_delete(NULL, t, k)));
  CHECK(ok(ct_table_export(&ids, &rows, &st, 1, NULL, t)));
  ct_tensor_free(ids);
  ct_tensor_free(rows);
  ct_tensor_free(st);
  ids = rows = st = NULL;
  CHECK(ok(ct_table_delta(&ids, &rows, &st, 1, &meta, &del, NULL, NULL, NULL, NULL, t, 1)));
  ct_tensor_free(ids);
  ct_tensor_free(rows);
  ct_tensor_free(st);
  ct_tensor_free(meta);
  ct_tensor_free(del);
  ids = rows = NULL;
  CHECK(ok(ct_table_metadata(&ids, &rows, &st, t)));
  ct_tensor_free(ids);
  ct_tensor_free(rows);
  ct_tensor_free(st);
  ids = rows = NULL;
  CHECK(ok(ct_table_metadata_unsorted(&ids, &rows, &st, t)));
  ct_tensor_free(ids);
  ct_tensor_free(rows);
  ct_tensor_free(st);
  ids = rows = NULL;
  CHECK(ok(ct_table_evict(NULL, NULL, NULL, t, CT_EVICT_LRU, 0)));
  CHECK(ok(ct_table_remove(&ids, &rows, t, k)));
  ct_tensor_free(ids);
  ct_tensor_free(rows);
  CHECK(ok(ct_table_compact(t)));
  CHECK(ok(ct_table_close(t)));
  ct_table_free(t);
  ct_tensor_free(r);
  ct_tensor_free(f);
  ct_tensor_free(e);
  ct_tensor_free(k);
  CHECK(ct_live_handles() == handles);
}

/* A process group of one rank over a FileStore: every collective, the errors of bad handles and
 * arguments (out-parameters untouched, the group still usable), and the frees. */
static void test_dist_group(void) {
  static char mark;
  char path[128];
  int64_t handles = ct_live_handles();
  int32_t binds = -1, avail = -1;
  ct_dist_config cfg;
  ct_dist_group g = NULL, none = (ct_dist_group)&mark;
  ct_tensor x = NULL, r = NULL, keep = (ct_tensor)&mark;
  int64_t shape[2] = {2, 2}, send[1] = {2}, recv[1] = {-1}, bad_send[1] = {3};
  float v[4] = {1, 2, 3, 4}, got[4] = {0, 0, 0, 0};
  sprintf(path, "/tmp/gorec_abi_dist_%lu_%d", (unsigned long)time(NULL), rand());
  remove(path);
  CHECK(ok(ct_dist_store_binds_address(&binds)) && (binds == 0 || binds == 1));
  memset(&cfg, 0, sizeof cfg);
  cfg.rank = 0;
  cfg.world_size = 1;
  cfg.timeout_ms = 10000;
  cfg.store_path = path;
  cfg.gloo_host = "127.0.0.1";
  cfg.job = "abi";
  CHECK(fails_with(ct_dist_group_new(&none, NULL), "NULL") && none == (ct_dist_group)&mark);
  CHECK(fails_with(ct_dist_group_new(NULL, &cfg), "NULL"));
  cfg.rank = 1;
  CHECK(fails_with(ct_dist_group_new(&none, &cfg), "invalid argument") && none == (ct_dist_group)&mark);
  cfg.rank = 0;
  cfg.timeout_ms = 0;
  CHECK(fails_with(ct_dist_group_new(&none, &cfg), "invalid argument"));
  cfg.timeout_ms = 10000;
  cfg.store_path = NULL;
  CHECK(fails_with(ct_dist_group_new(&none, &cfg), "invalid argument"));
  cfg.store_path = path;
  cfg.backend = 7;
  CHECK(fails_with(ct_dist_group_new(&none, &cfg), "unknown backend") && none == (ct_dist_group)&mark);
  CHECK(ok(ct_dist_backend_available(&avail, CT_DIST_GLOO)) && avail == 1);
  CHECK(ok(ct_dist_backend_available(&avail, CT_DIST_NCCL)) && (avail == 0 || avail == 1));
  cfg.backend = CT_DIST_NCCL;
  cfg.device = 0;
  if (avail == 0) CHECK(fails_with(ct_dist_group_new(&none, &cfg), "nccl backend is not in this build"));
  CHECK(fails_with(ct_dist_backend_available(NULL, CT_DIST_GLOO), "NULL"));
  cfg.backend = CT_DIST_GLOO;
  CHECK(ok(ct_dist_group_new(&g, &cfg)) && g != NULL);
  CHECK(ok(ct_tensor_from_data(&x, v, sizeof v, CT_FLOAT32, shape, 2)));

  CHECK(ok(ct_dist_all_reduce(&r, g, x, CT_DIST_AVG)));
  CHECK(ok(ct_tensor_copy_to(got, sizeof got, r, CT_FLOAT32)) && memcmp(got, v, sizeof v) == 0);
  ct_tensor_free(r);
  CHECK(ok(ct_dist_broadcast(&r, g, x, 0)));
  ct_tensor_free(r);
  CHECK(ok(ct_dist_all_gather(&r, g, x)));
  ct_tensor_free(r);
  CHECK(ok(ct_dist_all_to_all(&r, recv, g, x, send, 1)) && recv[0] == 2);
  ct_tensor_free(r);
  CHECK(ok(ct_dist_barrier(g)));
  {
    int64_t ints[2] = {7, -3}, ints_out[2] = {0, 0};
    CHECK(ok(ct_dist_all_gather_ints(ints_out, g, ints, 2)) && ints_out[0] == 7 && ints_out[1] == -3);
    CHECK(ok(ct_dist_all_gather_ints(ints_out, g, NULL, 0)));
    ints_out[0] = 5;
    CHECK(fails_with(ct_dist_all_gather_ints(ints_out, NULL, ints, 2), "closed"));
    CHECK(fails_with(ct_dist_all_gather_ints(ints_out, g, ints, CT_DIST_GATHER_INTS_MAX + 1), "invalid argument"));
    CHECK(fails_with(ct_dist_all_gather_ints(ints_out, g, NULL, 1), "invalid argument"));
    CHECK(fails_with(ct_dist_all_gather_ints(NULL, g, ints, 2), "NULL"));
    CHECK(ints_out[0] == 5);
  }

  /* bad handles and arguments: errors, outputs untouched, the group still usable */
  CHECK(fails_with(ct_dist_all_reduce(&keep, NULL, x, CT_DIST_SUM), "closed"));
  CHECK(fails_with(ct_dist_all_reduce(&keep, g, NULL, CT_DIST_SUM), "closed"));
  CHECK(fails_with(ct_dist_all_reduce(NULL, g, x, CT_DIST_SUM), "NULL"));
  CHECK(fails_with(ct_dist_all_reduce(&keep, g, x, 9), "invalid argument"));
  CHECK(fails_with(ct_dist_broadcast(&keep, g, x, 1), "invalid argument"));
  CHECK(fails_with(ct_dist_all_gather(&keep, NULL, x), "closed"));
  recv[0] = -1;
  CHECK(fails_with(ct_dist_all_to_all(&keep, recv, g, x, bad_send, 1), "invalid argument"));
  CHECK(fails_with(ct_dist_all_to_all(&keep, recv, g, x, NULL, 1), "invalid argument"));
  CHECK(fails_with(ct_dist_all_to_all(&keep, recv, g, x, send, 2), "invalid argument"));
  CHECK(fails_with(ct_dist_all_to_all(&keep, NULL, g, x, send, 1), "NULL"));
  CHECK(fails_with(ct_dist_barrier(NULL), "closed"));
  CHECK(keep == (ct_tensor)&mark && recv[0] == -1);
  CHECK(ok(ct_dist_barrier(g)));

  ct_dist_group_free(g);
  ct_dist_group_free(NULL);
  ct_tensor_free(x);
  remove(path);
  CHECK(ct_live_handles() == handles);
}

/* 1 when err has the code and contains want (its message keeps the code's prefix); frees err. */
static int fails_with_code(ct_error err, int32_t code, const char *want) {
  int32_t got = ct_error_code(err);
  int good = got == code && err != NULL && strstr(err, want) != NULL;
  if (!good) fprintf(stderr, "expected code %d and \"%s\", got code %d: %s\n", code, want, got, err ? err : "NULL");
  ct_error_free(err);
  return good;
}

/* Every error carries the code of its kind: the callers act on it, not on the message. */
static void test_error_codes(void) {
  int64_t shape[1] = {2}, other[1] = {3};
  int32_t nd = 0;
  float v[3] = {1, 2, 3};
  ct_tensor a = NULL, b = NULL, keep = NULL;
  ct_table t = NULL, none = NULL;
  ct_table_config cfg;
  CHECK(ct_error_code(NULL) == CT_OK);
  CHECK(ok(ct_tensor_from_data(&a, v, 2 * sizeof v[0], CT_FLOAT32, shape, 1)));
  CHECK(ok(ct_tensor_from_data(&b, v, sizeof v, CT_FLOAT32, other, 1)));
  CHECK(fails_with_code(ct_tensor_ndim(NULL, a), CT_ERR_INVALID_ARGUMENT, "invalid argument: "));
  CHECK(fails_with_code(ct_tensor_ndim(&nd, NULL), CT_ERR_CLOSED, "closed: "));
  CHECK(fails_with_code(ct_binary(&keep, CT_OP_ADD, a, b), CT_ERR_TORCH, "size"));
  CHECK(keep == NULL);
  memset(&cfg, 0, sizeof cfg);
  cfg.dim = 4;
  cfg.optimizer = CT_OPT_SGD;
  cfg.opt_params[0] = 0.1;
  cfg.device.type = CT_CPU;
  cfg.device.index = -1;
  CHECK(ok(ct_table_new(&t, "abi_error_codes", &cfg)));
  CHECK(fails_with_code(ct_table_new(&none, "abi_error_codes", &cfg), CT_ERR_NAME_TAKEN, "name taken: "));
  CHECK(fails_with_code(ct_table_open(&none, "abi_error_codes_missing"), CT_ERR_NOT_FOUND, "not found: "));
  CHECK(none == NULL);
  CHECK(ok(ct_table_close(t)));
  ct_table_free(t);
  ct_tensor_free(a);
  ct_tensor_free(b);
}

/* A small op and its backward node on 2 threads give one thread's bits (the node's hooks set the
 * thread count to 1 and back, op_threads.cc.h); then the count is 2 again. */
static void small_ops_sum(int32_t threads, float *sum, float *grad) {
  int64_t n[1] = {1 << 20}, one[1] = {1};
  ct_tensor x = NULL, s = NULL, y = NULL, z = NULL, g = NULL;
  CHECK(ok(ct_set_num_threads(threads)));
  CHECK(ok(ct_manual_seed(3)));
  CHECK(ok(ct_tensor_new(&x, CT_FILL_RANDN, 0, n, 1, cpu_float())));
  CHECK(ok(ct_tensor_new(&s, CT_FILL_ONES, 0, one, 1, cpu_float())));
  CHECK(ok(ct_tensor_set_requires_grad(s, 1)));
  CHECK(ok(ct_binary(&y, CT_OP_MUL, x, s)));
  CHECK(ok(ct_reduce(&z, CT_REDUCE_SUM, y, NULL, 0, 0)));
  CHECK(ok(ct_tensor_backward(z, NULL, 0)));
  CHECK(ok(ct_tensor_grad(&g, s)) && g != NULL);
  CHECK(ok(ct_tensor_copy_to(sum, sizeof *sum, z, CT_FLOAT32)));
  CHECK(ok(ct_tensor_copy_to(grad, sizeof *grad, g, CT_FLOAT32)));
  int32_t now = 0;
  CHECK(ok(ct_get_num_threads(&now)) && now == threads);
  ct_tensor_free(g);
  ct_tensor_free(z);
  ct_tensor_free(y);
  ct_tensor_free(s);
  ct_tensor_free(x);
}

static void test_small_ops_on_threads(void) {
  float sum1, grad1, sum2, grad2;
  small_ops_sum(1, &sum1, &grad1);
  small_ops_sum(2, &sum2, &grad2);
  CHECK(memcmp(&sum1, &sum2, sizeof sum1) == 0 && memcmp(&grad1, &grad2, sizeof grad1) == 0);
  CHECK(ok(ct_set_num_threads(1)));
}

int main(void) {
  CHECK(ct_torch_version() != NULL && ct_torch_version()[0] != '\0');
  test_create_and_copy();
  test_factories_and_errors();
  test_autograd();
  test_scopes();
  test_counters();
  test_ops();
  test_optim_step();
  test_rng_state();
  test_free_null();
  test_bad_table_handles();
  test_bad_tensor_handles();
  test_errors_leave_outputs();
  test_lookup_counted();
  test_empty_with_null_pointers();
  test_dist_group();
  test_error_codes();
  test_small_ops_on_threads();
  CHECK(ct_live_handles() == 0);
  printf("abi: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
