/* abi_test.c: exercises the C ABI directly (creation, ops, errors, frees), as a C99 program.
 * Built and run under AddressSanitizer and UndefinedBehaviorSanitizer by `make sanitize`. */
#include <stdio.h>
#include <string.h>

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
  CHECK(ct_live_handles() == 0);
  printf("abi: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
