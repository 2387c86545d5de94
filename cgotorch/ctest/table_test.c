/* table_test.c: exercises the embedding tables through the C ABI (lifecycle, every operation,
 * bad input, atomicity, prefetch, close), as a C99 program. Built and run under
 * AddressSanitizer and UndefinedBehaviorSanitizer by `make table-sanitize`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgotorch.h"
#include "check.h"

static ct_tensor ids_tensor(const int64_t *ids, int64_t n) {
  ct_tensor t = NULL;
  if (!ok(ct_tensor_from_data(&t, ids, (size_t)n * sizeof(int64_t), CT_INT64, &n, 1))) return NULL;
  return t;
}

static ct_tensor rows_tensor(const float *v, int64_t n, int64_t d) {
  ct_tensor t = NULL;
  int64_t shape[2];
  shape[0] = n;
  shape[1] = d;
  if (!ok(ct_tensor_from_data(&t, v, (size_t)(n * d) * sizeof(float), CT_FLOAT32, shape, 2))) return NULL;
  return t;
}

static ct_table_config config(int64_t dim, int32_t opt) {
  ct_table_config c;
  memset(&c, 0, sizeof c);
  c.dim = dim;
  c.block_rows = 4;
  c.initializer = CT_INIT_UNIFORM;
  c.init_params[0] = -1;
  c.init_params[1] = 1;
  c.optimizer = opt;
  c.device.type = CT_CPU;
  c.device.index = -1;
  c.seed = 7;
  return c;
}

/* Copies a float tensor out (n floats); frees it. */
static int take_floats(ct_tensor t, float *out, size_t n) {
  int r = ok(ct_tensor_copy_to(out, n * sizeof(float), t, CT_FLOAT32));
  ct_tensor_free(t);
  return r;
}

static int close_to(float a, float b) { return fabsf(a - b) <= 1e-5f * (1 + fabsf(b)); }

static void test_lifecycle(void) {
  ct_table a = NULL, b = NULL, c = NULL;
  ct_table_config cfg = config(4, CT_OPT_SGD);
  cfg.opt_params[0] = 0.1;
  CHECK(ok(ct_table_new(&a, "life", &cfg)));
  CHECK(fails_with(ct_table_new(&b, "life", &cfg), "name taken: "));
  CHECK(b == NULL);
  CHECK(ok(ct_table_new(&b, "", &cfg))); /* unnamed: not registered, takes no name */
  CHECK(ok(ct_table_new(&c, NULL, &cfg)));
  {
    char *names = NULL;
    CHECK(ok(ct_table_names(&names)));
    size_t len = strlen(names); /* no empty name listed */
    CHECK(len > 0 && names[0] != '\n' && names[len - 1] != '\n' && strstr(names, "\n\n") == NULL);
    ct_string_free(names);
  }
  CHECK(ok(ct_table_close(b)) && ok(ct_table_close(c)));
  ct_table_free(b);
  ct_table_free(c);
  b = c = NULL;
  CHECK(fails_with(ct_table_new(&b, "bad\nname", &cfg), "control"));
  cfg.dim = 0;
  CHECK(fails_with(ct_table_new(&b, "dim0", &cfg), "dim"));
  cfg.dim = 4;
  cfg.initializer = 99;
  CHECK(fails_with(ct_table_new(&b, "init99", &cfg), "initializer"));
  cfg.initializer = CT_INIT_NORMAL;
  cfg.init_params[1] = -1;
  CHECK(fails_with(ct_table_new(&b, "negstd", &cfg), "std"));
  cfg.initializer = CT_INIT_ZEROS;
  cfg.optimizer = CT_OPT_SPARSE_ADAM;
  cfg.opt_params[1] = 1.5;
  CHECK(fails_with(ct_table_new(&b, "beta", &cfg), "betas"));
  cfg.optimizer = CT_OPT_NONE;
  cfg.device.type = 5;
  CHECK(fails_with(ct_table_new(&b, "dev", &cfg), "device"));
  CHECK(b == NULL);

  char *names = NULL;
  CHECK(ok(ct_table_names(&names)) && strcmp(names, "life") == 0);
  ct_string_free(names);
  CHECK(ok(ct_table_open(&b, "life")));
  CHECK(fails_with(ct_table_open(&c, "nope"), "not found: "));
  char *nm = NULL;
  CHECK(ok(ct_table_name(&nm, b)) && strcmp(nm, "life") == 0);
  ct_string_free(nm);

  CHECK(ok(ct_table_close(b)));
  CHECK(ok(ct_table_close(a))); /* closing twice is fine */
  int64_t ids[2] = {1, 2};
  ct_tensor k = ids_tensor(ids, 2), rows = NULL;
  CHECK(fails_with(ct_table_lookup(&rows, a, k), "closed: "));
  CHECK(fails_with(ct_table_lookup(&rows, b, k), "closed: "));
  ct_table_stats st;
  CHECK(fails_with(ct_table_stats_get(&st, a), "closed: "));
  CHECK(fails_with(ct_table_update_by_name("life", k, k), "not found: "));
  CHECK(ok(ct_table_names(&names)) && strcmp(names, "") == 0);
  ct_string_free(names);
  /* the name is free again */
  cfg = config(4, CT_OPT_NONE);
  CHECK(ok(ct_table_new(&c, "life", &cfg)));
  CHECK(ok(ct_table_close(c)));
  ct_table_free(c);
  ct_table_free(a);
  ct_table_free(b);
  ct_table_free(NULL);
  CHECK(fails_with(ct_table_lookup(&rows, NULL, k), "closed: "));
  ct_tensor_free(k);
}

static void test_lookup_read_write(void) {
  ct_table t = NULL, u = NULL;
  ct_table_config cfg = config(3, CT_OPT_NONE);
  CHECK(ok(ct_table_new(&t, "lrw", &cfg)));
  cfg.block_rows = 1000;
  CHECK(ok(ct_table_new(&u, "lrw2", &cfg))); /* same seed and initializer */

  int64_t ids[5] = {1180210, 42, -7, 42, 655922};
  ct_tensor k = ids_tensor(ids, 5), idx = NULL, rows = NULL, found = NULL;
  CHECK(ok(ct_table_indices(&idx, t, k, 1)));
  int64_t got[5];
  CHECK(ok(ct_tensor_copy_to(got, sizeof got, idx, CT_INT64)));
  CHECK(got[0] == 0 && got[1] == 1 && got[2] == 2 && got[3] == 1 && got[4] == 3);
  ct_tensor_free(idx);

  /* a row's value is a function of (seed, id): same in both tables, in any batch */
  float r1[15], r2[3];
  CHECK(ok(ct_table_lookup(&rows, t, k)) && take_floats(rows, r1, 15));
  int64_t one[1] = {655922};
  ct_tensor k1 = ids_tensor(one, 1);
  CHECK(ok(ct_table_lookup(&rows, u, k1)) && take_floats(rows, r2, 3));
  CHECK(memcmp(r1 + 12, r2, sizeof r2) == 0);
  CHECK(memcmp(r1 + 3, r1 + 9, 3 * sizeof(float)) == 0);
  CHECK(r1[0] >= -1 && r1[0] < 1 && r1[0] != r1[3]);

  /* read does not insert; unknown ids get zeros or their initial value */
  int64_t rid[3] = {42, 999, 1000};
  ct_tensor rk = ids_tensor(rid, 3);
  float rr[9];
  uint8_t f[3];
  ct_table_stats st;
  CHECK(ok(ct_table_read(&rows, &found, t, rk, CT_READ_ZEROS)));
  CHECK(ok(ct_tensor_copy_to(f, 3, found, CT_BOOL)) && f[0] == 1 && f[1] == 0 && f[2] == 0);
  ct_tensor_free(found);
  CHECK(take_floats(rows, rr, 9) && memcmp(rr, r1 + 3, 3 * sizeof(float)) == 0 && rr[3] == 0 && rr[8] == 0);
  CHECK(ok(ct_table_read(&rows, NULL, t, rk, CT_READ_INITIAL)) && take_floats(rows, rr, 9));
  CHECK(rr[3] != 0 && rr[3] >= -1 && rr[3] < 1);
  CHECK(ok(ct_table_stats_get(&st, t)) && st.size == 4 && st.dim == 3 && st.capacity == 8);
  CHECK(fails_with(ct_table_read(&rows, NULL, t, rk, 7), "read default"));

  /* write: insert or assign; the last occurrence of a repeated id wins */
  int64_t wid[3] = {42, 5, 42};
  float wv[9] = {1, 1, 1, 2, 2, 2, 3, 3, 3};
  ct_tensor wk = ids_tensor(wid, 3), wvt = rows_tensor(wv, 3, 3);
  CHECK(ok(ct_table_write(t, wk, wvt)));
  int64_t q[2] = {42, 5};
  ct_tensor qk = ids_tensor(q, 2);
  float qr[6];
  CHECK(ok(ct_table_read(&rows, NULL, t, qk, CT_READ_ZEROS)) && take_floats(rows, qr, 6));
  CHECK(qr[0] == 3 && qr[2] == 3 && qr[3] == 2 && qr[5] == 2);
  CHECK(ok(ct_table_stats_get(&st, t)) && st.size == 5 && st.capacity == 8);

  /* empty keys give [0, dim] */
  ct_tensor ek = ids_tensor(NULL, 0);
  int64_t shape[2] = {-1, -1};
  CHECK(ok(ct_table_lookup(&rows, t, ek)) && ok(ct_tensor_shape(shape, 2, rows)) && shape[0] == 0 && shape[1] == 3);
  ct_tensor_free(rows);

  /* delete: the index is reused, the row starts fresh (its initial value, not the old one) */
  int64_t deleted = -1;
  CHECK(ok(ct_table_delete(&deleted, t, k1)) && deleted == 1);
  CHECK(ok(ct_table_delete(&deleted, t, k1)) && deleted == 0);
  CHECK(ok(ct_table_read(&rows, &found, t, k1, CT_READ_ZEROS)));
  CHECK(ok(ct_tensor_copy_to(f, 1, found, CT_BOOL)) && f[0] == 0);
  ct_tensor_free(found);
  ct_tensor_free(rows);
  int64_t nid[1] = {31337};
  ct_tensor nk = ids_tensor(nid, 1);
  CHECK(ok(ct_table_indices(&idx, t, nk, 1)));
  CHECK(ok(ct_tensor_copy_to(got, 8, idx, CT_INT64)) && got[0] == 3);
  ct_tensor_free(idx);
  CHECK(ok(ct_table_indices(&idx, t, k1, 0)));
  CHECK(ok(ct_tensor_copy_to(got, 8, idx, CT_INT64)) && got[0] == -1);
  ct_tensor_free(idx);

  /* export: sorted ids, their rows */
  ct_tensor eids = NULL, erows = NULL;
  int64_t step = -1;
  CHECK(ok(ct_table_export(&eids, &erows, NULL, 0, &step, t)) && step == 0);
  int64_t ex[5];
  CHECK(ok(ct_tensor_copy_to(ex, sizeof ex, eids, CT_INT64)));
  CHECK(ex[0] == -7 && ex[1] == 5 && ex[2] == 42 && ex[3] == 31337 && ex[4] == 1180210);
  float er[15];
  CHECK(take_floats(erows, er, 15) && er[6] == 3 && er[3] == 2);
  ct_tensor_free(eids);

  CHECK(ok(ct_table_clear(t)));
  CHECK(ok(ct_table_stats_get(&st, t)) && st.size == 0 && st.capacity == 8);

  ct_tensor_free(k);
  ct_tensor_free(k1);
  ct_tensor_free(rk);
  ct_tensor_free(wk);
  ct_tensor_free(wvt);
  ct_tensor_free(qk);
  ct_tensor_free(ek);
  ct_tensor_free(nk);
  CHECK(ok(ct_table_close(t)) && ok(ct_table_close(u)));
  ct_table_free(t);
  ct_table_free(u);
}

/* Export's ids, rows and states as host arrays (caller frees). */
static void snapshot(ct_table t, int64_t **ids, float **rows, float **s0, int64_t *m) {
  ct_tensor ti = NULL, tr = NULL, ts[2] = {NULL, NULL};
  ct_table_stats st;
  *ids = NULL;
  *rows = NULL;
  *s0 = NULL;
  *m = 0;
  if (!ok(ct_table_stats_get(&st, t))) return;
  if (!ok(ct_table_export(&ti, &tr, ts, 2, NULL, t))) return;
  int64_t n = 0;
  ok(ct_tensor_numel(&n, ti));
  *m = n;
  *ids = malloc((size_t)(n + 1) * sizeof(int64_t));
  *rows = malloc((size_t)(n * st.dim + 1) * sizeof(float));
  ok(ct_tensor_copy_to(*ids, (size_t)n * sizeof(int64_t), ti, CT_INT64));
  ok(ct_tensor_copy_to(*rows, (size_t)(n * st.dim) * sizeof(float), tr, CT_FLOAT32));
  if (st.num_states > 0) {
    int64_t sn = 0;
    ok(ct_tensor_numel(&sn, ts[0]));
    *s0 = malloc((size_t)(sn + 1) * sizeof(float));
    ok(ct_tensor_copy_to(*s0, (size_t)sn * sizeof(float), ts[0], CT_FLOAT32));
  }
  ct_tensor_free(ti);
  ct_tensor_free(tr);
  ct_tensor_free(ts[0]);
  ct_tensor_free(ts[1]);
}

/* config with every new row's elements 1 and the learning rate lr */
static ct_table_config ones_config(int64_t dim, int32_t opt, double lr) {
  ct_table_config c = config(dim, opt);
  c.initializer = CT_INIT_CONSTANT;
  c.init_params[0] = 1;
  c.opt_params[0] = lr;
  return c;
}

static void test_update_and_bad_input(void) {
  ct_table t = NULL;
  ct_table_config cfg = ones_config(2, CT_OPT_ADAGRAD, 0.5);
  cfg.opt_params[1] = 0;   /* lr_decay */
  cfg.opt_params[2] = 0.1; /* initial accumulator */
  cfg.opt_params[3] = 1e-10;
  CHECK(ok(ct_table_new(&t, "upd", &cfg)));
  /* id 3 twice: gradients summed first: g = 1 + 2 = 3 */
  int64_t ids[3] = {3, 4, 3};
  float g[6] = {1, 0, 0, 0, 2, 0};
  ct_tensor k = ids_tensor(ids, 3), gt = rows_tensor(g, 3, 2);
  CHECK(ok(ct_table_update(t, k, gt)));
  int64_t *ei, m;
  float *er, *es;
  snapshot(t, &ei, &er, &es, &m);
  CHECK(m == 2 && ei[0] == 3 && ei[1] == 4);
  /* sum = 0.1 + 9 = 9.1; w = 1 - 0.5 * 3 / sqrt(9.1) */
  CHECK(close_to(es[0], 9.1f) && close_to(er[0], (float)(1 - 0.5 * 3 / sqrt(9.1))));
  CHECK(close_to(es[1], 0.1f) && er[1] == 1 && er[3] == 1); /* zero gradient: unchanged */
  free(ei);
  free(er);
  free(es);

  /* bad input: an error, and the table is exactly as it was */
  int64_t *bi, bm;
  float *br, *bs;
  snapshot(t, &bi, &br, &bs, &bm);
  ct_table_stats before, after;
  CHECK(ok(ct_table_stats_get(&before, t)));
  int64_t nid[2] = {100, 101};
  float nan2[4] = {0, 0, NAN, 0}, inf2[4] = {INFINITY, 0, 0, 0};
  ct_tensor nk = ids_tensor(nid, 2), nant = rows_tensor(nan2, 2, 2), inft = rows_tensor(inf2, 2, 2);
  CHECK(fails_with(ct_table_update(t, nk, nant), "NaN or Inf"));
  CHECK(fails_with(ct_table_update(t, nk, inft), "NaN or Inf"));
  CHECK(fails_with(ct_table_write(t, nk, nant), "NaN or Inf"));
  CHECK(fails_with(ct_table_update(t, nk, gt), "rows for 2 keys"));
  ct_tensor wide = rows_tensor(g, 2, 3);
  CHECK(fails_with(ct_table_update(t, nk, wide), "width 3"));
  CHECK(fails_with(ct_table_update(t, nk, k), "float32"));
  CHECK(fails_with(ct_table_update(t, gt, gt), "int64"));
  CHECK(fails_with(ct_table_lookup(&(ct_tensor){NULL}, t, gt), "int64"));
  int64_t sh2[2] = {1, 2};
  ct_tensor k2d = NULL;
  CHECK(ok(ct_tensor_from_data(&k2d, nid, sizeof nid, CT_INT64, sh2, 2)));
  CHECK(fails_with(ct_table_lookup(&(ct_tensor){NULL}, t, k2d), "one-dimensional"));
  ct_tensor flat = rows_tensor(g, 6, 1), flat1d = NULL;
  int64_t six = 6;
  CHECK(ok(ct_tensor_from_data(&flat1d, g, sizeof g, CT_FLOAT32, &six, 1)));
  CHECK(fails_with(ct_table_write(t, k, flat1d), "two-dimensional"));
  CHECK(fails_with(ct_table_write(t, NULL, gt), "NULL"));
  CHECK(fails_with(ct_table_update(t, k, NULL), "NULL"));
  CHECK(ok(ct_table_stats_get(&after, t)));
  CHECK(after.size == before.size && after.step == before.step && after.capacity == before.capacity);
  snapshot(t, &ei, &er, &es, &m);
  CHECK(m == bm && memcmp(ei, bi, (size_t)m * sizeof(int64_t)) == 0);
  CHECK(memcmp(er, br, (size_t)m * 2 * sizeof(float)) == 0 && memcmp(es, bs, (size_t)m * 2 * sizeof(float)) == 0);
  free(ei);
  free(er);
  free(es);
  free(bi);
  free(br);
  free(bs);

  /* update by name; an empty update is still a step */
  CHECK(ok(ct_table_update_by_name("upd", k, gt)));
  ct_tensor ek = ids_tensor(NULL, 0), eg = rows_tensor(NULL, 0, 2);
  CHECK(ok(ct_table_update(t, ek, eg)));
  CHECK(ok(ct_table_stats_get(&after, t)) && after.step == 3);

  /* no optimizer: update is an error */
  ct_table none = NULL;
  ct_table_config c0 = config(2, CT_OPT_NONE);
  CHECK(ok(ct_table_new(&none, "none", &c0)));
  CHECK(fails_with(ct_table_update(none, k, gt), "no optimizer"));
  CHECK(ok(ct_table_close(none)));
  ct_table_free(none);

  ct_tensor_free(k);
  ct_tensor_free(gt);
  ct_tensor_free(nk);
  ct_tensor_free(nant);
  ct_tensor_free(inft);
  ct_tensor_free(wide);
  ct_tensor_free(k2d);
  ct_tensor_free(flat);
  ct_tensor_free(flat1d);
  ct_tensor_free(ek);
  ct_tensor_free(eg);
  CHECK(ok(ct_table_close(t)));
  ct_table_free(t);
}

/* Each optimizer's parameters come back from ct_table_config_get and a delta's info in the
 * positions cgotorch.h gives them (the C side holds them by name: a wrong position would read
 * one parameter as another), and the positions an optimizer does not take as 0. */
static void test_opt_params_positions(void) {
  static const struct {
    int32_t opt;
    double p[8];
  } cases[] = {
      {CT_OPT_SGD, {0.1, 0.5, 0.25, 0}},
      {CT_OPT_ADAGRAD, {0.1, 0.01, 0.2, 1e-8}},
      {CT_OPT_ROWWISE_ADAGRAD, {0.1, 0.01, 0.2, 1e-8}},
      {CT_OPT_SPARSE_ADAM, {0.1, 0.8, 0.9, 1e-6}},
      {CT_OPT_ADAMW, {0.1, 0.8, 0.9, 1e-6, 0.03}},
      {CT_OPT_FTRL, {0.1, 0.2, 0.3, 0.4, 0.5}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ct_table_config cfg = config(2, cases[c].opt);
    memcpy(cfg.opt_params, cases[c].p, sizeof cfg.opt_params);
    cfg.opt_params[7] = 9;  /* a position no optimizer takes */
    ct_table t = NULL;
    CHECK(ok(ct_table_new(&t, "opt-params", &cfg)));
    ct_table_config got;
    CHECK(ok(ct_table_config_get(&got, t)));
    ct_tensor ids = NULL, rows = NULL, st[2] = {NULL, NULL}, meta = NULL, del = NULL, ci = NULL, cv = NULL;
    int64_t step = 0;
    ct_table_delta_info info;
    memset(&info, 0, sizeof info);
    CHECK(ok(ct_table_delta(&ids, &rows, st, 2, &meta, &del, &step, &info, &ci, &cv, t, 0)));
    for (int i = 0; i < 8; i++) {
      CHECK(got.opt_params[i] == cases[c].p[i]);
      CHECK(info.opt_params[i] == cases[c].p[i]);
    }
    ct_tensor all[] = {ids, rows, st[0], st[1], meta, del, ci, cv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    CHECK(ok(ct_table_close(t)));
    ct_table_free(t);
  }
}

/* An update inserts the ids it has not seen (after a find of all of them): the absent ones get
 * indices as one find-or-insert of the batch would give them, in batch order, freed ones
 * first, and their rows are initialised before the step. */
/* ct_table_set_lr: the next steps use the new rate, the configuration reports it, and bad rates
 * are refused. With SGD momentum a row absent from the steps around the change moves at the rate
 * of each step it missed (m = 0.5, w = 1, g = 1): step 1 at lr 0.1 gives buf 1, w 0.9; step 2
 * (absent) w -= 0.1 * 0.5; the rate becomes 1; step 3 (absent) w -= 1 * 0.25. */
static void test_set_lr(void) {
  ct_table t = NULL;
  ct_table_config cfg = ones_config(1, CT_OPT_SGD, 0.1);
  cfg.opt_params[1] = 0.5;
  CHECK(ok(ct_table_new(&t, "set-lr", &cfg)));
  int64_t one = 1, two = 2;
  float g = 1;
  ct_tensor k1 = ids_tensor(&one, 1), k2 = ids_tensor(&two, 1), gt = rows_tensor(&g, 1, 1);
  CHECK(ok(ct_table_update(t, k1, gt)));
  CHECK(ok(ct_table_update(t, k2, gt)));
  CHECK(ok(ct_table_set_lr(t, 1)));
  CHECK(ok(ct_table_update(t, k2, gt)));
  int64_t *ei, m;
  float *er, *es;
  snapshot(t, &ei, &er, &es, &m);
  CHECK(m == 2 && ei[0] == 1 && close_to(er[0], 1 - 0.1f - 0.05f - 0.25f) && close_to(es[0], 0.25f));
  free(ei);
  free(er);
  free(es);
  ct_table_config got;
  CHECK(ok(ct_table_config_get(&got, t)) && got.opt_params[0] == 1 && got.opt_params[1] == 0.5);
  CHECK(fails_with(ct_table_set_lr(t, -1), "learning rate"));
  CHECK(fails_with(ct_table_set_lr(t, NAN), "learning rate"));
  CHECK(ok(ct_table_config_get(&got, t)) && got.opt_params[0] == 1);
  CHECK(ok(ct_table_close(t)));
  CHECK(fails_with(ct_table_set_lr(t, 0.1), "closed"));
  ct_table_free(t);
  cfg = ones_config(1, CT_OPT_FTRL, 0.1);
  CHECK(ok(ct_table_new(&t, "set-lr-ftrl", &cfg)));
  CHECK(fails_with(ct_table_set_lr(t, 0), "alpha"));
  ct_table_free(t);
  cfg = ones_config(1, CT_OPT_NONE, 0);
  CHECK(ok(ct_table_new(&t, "set-lr-none", &cfg)));
  CHECK(fails_with(ct_table_set_lr(t, 0.1), "no optimizer"));
  ct_table_free(t);
  ct_tensor_free(k1);
  ct_tensor_free(k2);
  ct_tensor_free(gt);
}

static void test_update_inserts_absent(void) {
  ct_table t = NULL;
  ct_table_config cfg = ones_config(2, CT_OPT_SGD, 1);
  CHECK(ok(ct_table_new(&t, "upd-absent", &cfg)));
  int64_t first[3] = {10, 20, 30}, gone = 20, deleted = 0;
  ct_tensor k = ids_tensor(first, 3), r = NULL, dk = ids_tensor(&gone, 1);
  CHECK(ok(ct_table_indices(&r, t, k, 1)));
  ct_tensor_free(r);
  CHECK(ok(ct_table_delete(&deleted, t, dk)) && deleted == 1); /* index 1 is free */
  /* 40 twice (gradients summed), 10 and 30 present, 50 new */
  int64_t ids[5] = {40, 10, 50, 40, 30};
  float g[10] = {1, 2, 0.5f, 0.5f, 3, 3, 1, 1, 0.25f, 0};
  ct_tensor uk = ids_tensor(ids, 5), ug = rows_tensor(g, 5, 2);
  CHECK(ok(ct_table_update(t, uk, ug)));
  int64_t want_ids[4] = {10, 40, 30, 50}, idx[4] = {-9, -9, -9, -9};
  ct_tensor wk = ids_tensor(want_ids, 4), wi = NULL, rows = NULL, found = NULL;
  CHECK(ok(ct_table_indices(&wi, t, wk, 0)));
  CHECK(ok(ct_tensor_copy_to(idx, sizeof idx, wi, CT_INT64)));
  CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2 && idx[3] == 3);
  float v[8];
  CHECK(ok(ct_table_read(&rows, &found, t, wk, CT_READ_ZEROS)) && take_floats(rows, v, 8));
  ct_tensor_free(found);
  /* w = 1 - lr * g, gradients 10: {0.5, 0.5}, 40: {1 + 1, 2 + 1}, 30: {0.25, 0}, 50: {3, 3} */
  CHECK(close_to(v[0], 0.5f) && close_to(v[1], 0.5f) && close_to(v[2], -1) && close_to(v[3], -2));
  CHECK(close_to(v[4], 0.75f) && close_to(v[5], 1) && close_to(v[6], -2) && close_to(v[7], -2));
  ct_table_stats st;
  CHECK(ok(ct_table_stats_get(&st, t)) && st.size == 4);
  ct_tensor_free(k);
  ct_tensor_free(dk);
  ct_tensor_free(uk);
  ct_tensor_free(ug);
  ct_tensor_free(wk);
  ct_tensor_free(wi);
  CHECK(ok(ct_table_close(t)));
  ct_table_free(t);
}

/* The tensor kernels (CUDA's code path) agree with the raw CPU kernels, for every optimizer
 * and both layouts, over steps with repeated, new, deleted and written ids. */
/* Every optimizer, with parameters (SGD: momentum 0.9, Nesterov). */
static const int32_t opts[6] = {CT_OPT_SGD, CT_OPT_ADAGRAD, CT_OPT_ROWWISE_ADAGRAD, CT_OPT_SPARSE_ADAM, CT_OPT_ADAMW, CT_OPT_FTRL};
static const double params[6][8] = {{0.1, 0.9, 0, 1}, {0.1, 0.01, 0.1, 1e-10}, {0.1, 0, 0.1, 1e-10},
                                    {0.01, 0.9, 0.999, 1e-8}, {0.01, 0.9, 0.999, 1e-8, 0.1}, {0.1, 1, 0.01, 0.1, 0.1}};

static void test_kernels_agree(void) {
  for (int o = 0; o < 6; o++) {
    for (int layout = 0; layout < 2; layout++) {
      ct_table raw = NULL, ten = NULL;
      ct_table_config cfg = config(3, opts[o]);
      cfg.initializer = CT_INIT_NORMAL;
      cfg.init_params[0] = 0;
      cfg.init_params[1] = 1;
      memcpy(cfg.opt_params, params[o], sizeof params[o]);
      cfg.layout = layout;
      CHECK(ok(ct_table_new(&raw, "raw", &cfg)));
      cfg.flags = CT_TABLE_TENSOR_KERNELS;
      CHECK(ok(ct_table_new(&ten, "tensor", &cfg)));
      for (int step = 0; step < 6; step++) {
        int64_t ids[6];
        float g[18];
        for (int i = 0; i < 6; i++) {
          ids[i] = (step * 5 + i * 3) % 11;
          for (int j = 0; j < 3; j++) g[i * 3 + j] = (float)sin(step * 7.0 + i * 3.0 + j);
        }
        ct_tensor k = ids_tensor(ids, 6), gt = rows_tensor(g, 6, 3), rows = NULL;
        CHECK(ok(ct_table_update(raw, k, gt)) && ok(ct_table_update(ten, k, gt)));
        if (step == 2) {
          int64_t del[2] = {ids[0], 77};
          ct_tensor dk = ids_tensor(del, 2);
          CHECK(ok(ct_table_delete(NULL, raw, dk)) && ok(ct_table_delete(NULL, ten, dk)));
          ct_tensor_free(dk);
        }
        if (step == 3) {
          int64_t wid[2] = {ids[1], 1000};
          float wv[6] = {1, 2, 3, 4, 5, 6};
          ct_tensor wk = ids_tensor(wid, 2), wt = rows_tensor(wv, 2, 3);
          CHECK(ok(ct_table_write(raw, wk, wt)) && ok(ct_table_write(ten, wk, wt)));
          ct_tensor_free(wk);
          ct_tensor_free(wt);
        }
        /* reads agree too (SGD momentum catches up rows absent from a step) */
        float a[18], b[18];
        CHECK(ok(ct_table_lookup(&rows, raw, k)) && take_floats(rows, a, 18));
        CHECK(ok(ct_table_lookup(&rows, ten, k)) && take_floats(rows, b, 18));
        int same = 1;
        for (int i = 0; i < 18; i++) same &= close_to(a[i], b[i]);
        CHECK(same);
        ct_tensor_free(k);
        ct_tensor_free(gt);
      }
      int64_t *ia, *ib, ma, mb;
      float *ra, *rb, *sa, *sb;
      snapshot(raw, &ia, &ra, &sa, &ma);
      snapshot(ten, &ib, &rb, &sb, &mb);
      CHECK(ma == mb && ma > 5 && memcmp(ia, ib, (size_t)ma * sizeof(int64_t)) == 0);
      int same = 1;
      for (int64_t i = 0; i < ma * 3; i++) same &= close_to(ra[i], rb[i]);
      int64_t sw = opts[o] == CT_OPT_ROWWISE_ADAGRAD ? 1 : 3;
      for (int64_t i = 0; sa != NULL && i < ma * sw; i++) same &= close_to(sa[i], sb[i]);
      if (!same) fprintf(stderr, "optimizer %d layout %d: kernels disagree\n", opts[o], layout);
      CHECK(same);
      free(ia);
      free(ib);
      free(ra);
      free(rb);
      free(sa);
      free(sb);
      CHECK(ok(ct_table_close(raw)) && ok(ct_table_close(ten)));
      ct_table_free(raw);
      ct_table_free(ten);
    }
  }
}

/* Lookups copy rows with a kernel per row width (8, 16, 32 and 64 floats have their own; other
 * widths share one), addressing rows by shift and mask when block_rows is a power of two and by
 * division otherwise. For each width, both layouts (with Adagrad's state the interleaved row
 * is wider than what is copied) and both kinds of block size: written rows, then a lookup of a
 * batch large enough to be split among threads, in scrambled order with repeats. */
static void test_gather_widths(void) {
  enum { N = 3000, B = 4500 };
  const int64_t dims[5] = {5, 8, 16, 32, 64}, blocks[2] = {64, 48};
  int64_t *ids = malloc(sizeof(int64_t) * N), *batch = malloc(sizeof(int64_t) * B);
  float *vals = malloc(sizeof(float) * N * 64), *got = malloc(sizeof(float) * B * 64);
  for (int64_t i = 0; i < N; i++) ids[i] = (i * 7919) ^ (int64_t)0x5DEECE66DLL;
  for (int64_t i = 0; i < B; i++) batch[i] = ids[(i * 613) % N];
  for (int di = 0; di < 5; di++) {
    for (int layout = 0; layout < 2; layout++) {
      for (int bi = 0; bi < 2; bi++) {
        const int64_t d = dims[di];
        ct_table t = NULL;
        ct_table_config cfg = config(d, CT_OPT_ADAGRAD);
        const double adagrad[4] = {0.1, 0.01, 0.1, 1e-10};
        memcpy(cfg.opt_params, adagrad, sizeof adagrad);
        cfg.layout = layout;
        cfg.block_rows = blocks[bi];
        CHECK(ok(ct_table_new(&t, "widths", &cfg)));
        for (int64_t i = 0; i < N * d; i++) vals[i] = (float)(i % 1009) * 0.25f + (float)d;
        ct_tensor k = ids_tensor(ids, N), v = rows_tensor(vals, N, d), rows = NULL, bk = ids_tensor(batch, B);
        CHECK(ok(ct_table_write(t, k, v)));
        CHECK(ok(ct_table_lookup(&rows, t, bk)) && take_floats(rows, got, (size_t)(B * d)));
        int same = 1;
        for (int64_t i = 0; i < B; i++) {
          const float *want = vals + ((i * 613) % N) * d;
          same &= memcmp(got + i * d, want, sizeof(float) * (size_t)d) == 0;
        }
        if (!same) fprintf(stderr, "dim %ld layout %d block_rows %ld: wrong rows\n", (long)d, layout, (long)blocks[bi]);
        CHECK(same);
        ct_tensor_free(k);
        ct_tensor_free(v);
        ct_tensor_free(bk);
        CHECK(ok(ct_table_close(t)));
        ct_table_free(t);
      }
    }
  }
  free(ids);
  free(batch);
  free(vals);
  free(got);
}

/* The raw optimizer kernels run four elements at a time, then one at a time (csrc/table/lanes.h),
 * and must give the same bits either way (the PyTorch parity fixtures, at dim 6, check both
 * paths against PyTorch to a tolerance). Here every element of a row starts equal and gets
 * equal gradients, so after several steps (a row absent from some, with SGD momentum's
 * catch-up) all elements of a row and of each state must still be bit for bit equal: at dim 9
 * elements 0-7 go through the four-lane path and element 8 through the scalar one. Both
 * layouts. */
static int same_along_rows(const float *v, int64_t rows, int64_t width) {
  int same = 1;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 1; j < width; j++) same &= memcmp(&v[r * width], &v[r * width + j], sizeof(float)) == 0;
  return same;
}

static void test_lanes_match_scalar(void) {
  enum { D = 9, NOPT = 8 };
  const int32_t opts[NOPT] = {CT_OPT_SGD, CT_OPT_SGD, CT_OPT_SGD, CT_OPT_ADAGRAD, CT_OPT_ROWWISE_ADAGRAD,
                              CT_OPT_SPARSE_ADAM, CT_OPT_ADAMW, CT_OPT_FTRL};
  const double params[NOPT][8] = {{0.1},
                                  {0.1, 0.9, 0.1, 0},
                                  {0.1, 0.9, 0, 1},
                                  {0.1, 0.01, 0.1, 1e-10},
                                  {0.1, 0, 0.1, 1e-10},
                                  {0.01, 0.9, 0.999, 1e-8},
                                  {0.01, 0.9, 0.999, 1e-8, 0.1},
                                  {0.1, 1, 0.01, 0.1, 0.1}};
  for (int o = 0; o < NOPT; o++) {
    for (int layout = 0; layout < 2; layout++) {
      ct_table t = NULL;
      ct_table_config cfg = config(D, opts[o]);
      cfg.initializer = CT_INIT_CONSTANT;
      cfg.init_params[0] = 0.3;
      memcpy(cfg.opt_params, params[o], sizeof params[o]);
      cfg.layout = layout;
      CHECK(ok(ct_table_new(&t, "lanes", &cfg)));
      for (int step = 0; step < 5; step++) {
        int64_t ids[4];
        float g[4 * D];
        for (int i = 0; i < 4; i++) {
          ids[i] = (step + i * 2) % 7; /* some rows skip steps */
          for (int j = 0; j < D; j++) g[i * D + j] = (float)sin(step * 3.0 + i * 1.7) * 0.7f;
        }
        ct_tensor k = ids_tensor(ids, 4), gt = rows_tensor(g, 4, D);
        CHECK(ok(ct_table_update(t, k, gt)));
        ct_tensor_free(k);
        ct_tensor_free(gt);
      }
      ct_tensor ti = NULL, tr = NULL, ts[2] = {NULL, NULL};
      CHECK(ok(ct_table_export(&ti, &tr, ts, 2, NULL, t)));
      int64_t n = 0;
      CHECK(ok(ct_tensor_numel(&n, ti)) && n == 7);
      float rows[7 * D], st[7 * D];
      CHECK(ok(ct_tensor_copy_to(rows, sizeof rows, tr, CT_FLOAT32)));
      int same = same_along_rows(rows, n, D);
      for (int sidx = 0; sidx < 2; sidx++) {
        int64_t sn = 0;
        if (ts[sidx] == NULL || !ok(ct_tensor_numel(&sn, ts[sidx])) || sn != n * D) continue; /* none, or per row */
        CHECK(ok(ct_tensor_copy_to(st, sizeof st, ts[sidx], CT_FLOAT32)));
        same &= same_along_rows(st, n, D);
      }
      if (!same) fprintf(stderr, "optimizer case %d layout %d: lanes and scalar differ\n", o, layout);
      CHECK(same);
      ct_tensor_free(ti);
      ct_tensor_free(tr);
      ct_tensor_free(ts[0]);
      ct_tensor_free(ts[1]);
      CHECK(ok(ct_table_close(t)));
      ct_table_free(t);
    }
  }
}

/* Distinct ids of a batch come from a hash table that each thread keeps between batches
 * (csrc/table/batch.cc.h: distinct_ids), sized by the last call's distinct ids and freed slot by
 * slot or in one pass after each call. Across 40 batches with repeated ids (updates: summed
 * gradients; writes: the last value wins), including one batch too big for the kept table,
 * every row must match a plain model of the rules. */
static void test_duplicates_across_batches(void) {
  enum { U = 60, D = 5, BIG = 40000 }; /* D = 5: four lanes and one scalar element */
  static int64_t ids[BIG];
  static float vals[BIG * D];
  float want[U * D], got[U * D];
  int64_t all[U];
  ct_table t = NULL;
  ct_table_config cfg = config(D, CT_OPT_SGD);
  cfg.initializer = CT_INIT_ZEROS;
  cfg.opt_params[0] = 0.5;
  CHECK(ok(ct_table_new(&t, "dedupe", &cfg)));
  memset(want, 0, sizeof want);
  for (int64_t i = 0; i < U; i++) all[i] = i;
  uint32_t r = 12345;
  int same = 1;
  for (int b = 0; b < 40; b++) {
    const int64_t n = b == 17 ? BIG : 1 + (b * 7) % 40;
    const int write = b % 3 == 1;
    for (int64_t i = 0; i < n; i++) {
      r = r * 1664525u + 1013904223u;
      ids[i] = (int64_t)(r >> 8) % U;
      for (int j = 0; j < D; j++) vals[i * D + j] = (float)((int)(r >> (12 + j * 4)) % 17 - 8) / 8.0f;
    }
    ct_tensor k = ids_tensor(ids, n), v = rows_tensor(vals, n, D), rows = NULL;
    CHECK(ok(write ? ct_table_write(t, k, v) : ct_table_update(t, k, v)));
    for (int64_t i = 0; i < n; i++) {
      for (int j = 0; j < D; j++) {
        float *w = &want[ids[i] * D + j];
        *w = write ? vals[i * D + j] : *w - 0.5f * vals[i * D + j];
      }
    }
    ct_tensor ka = ids_tensor(all, U);
    CHECK(ok(ct_table_lookup(&rows, t, ka)) && take_floats(rows, got, U * D));
    for (int i = 0; i < U * D; i++) same &= fabsf(got[i] - want[i]) <= 1e-3f * (1 + fabsf(want[i]));
    ct_tensor_free(ka);
    ct_tensor_free(k);
    ct_tensor_free(v);
  }
  CHECK(same);
  CHECK(ok(ct_table_close(t)));
  ct_table_free(t);
}

/* Batches large enough to be split over threads (the id map's find from 16K ids, gathers,
 * new rows, the optimizers' row updates): on twin tables, one driven with 1 intra-op thread
 * and one with 2, lookups of a batch of present, absent and repeated ids, two updates and a
 * read agree bit for bit, for every optimizer (under the sanitizers: no access outside a
 * thread's slice). */
static void test_threads(void) {
  enum { D = 9, PRESENT = 20000, N = 40000 }; /* D = 9: lanes and a scalar element */
  static int64_t ids[N];
  static float grads[N * D], got[2][N * D];
  uint32_t r = 777;
  for (int64_t i = 0; i < N; i++) {
    r = r * 1664525u + 1013904223u;
    ids[i] = (int64_t)(r >> 8) % (2 * PRESENT) * 13;
    grads[i * D] = (float)(r >> 20) / 4096.0f - 0.5f;
    for (int j = 1; j < D; j++) grads[i * D + j] = grads[i * D + j - 1] * -0.75f;
  }
  int same = 1;
  for (int o = 0; o < 6; o++) {
    for (int threads = 1; threads <= 2; threads++) {
      CHECK(ok(ct_set_num_threads(threads)));
      ct_table t = NULL;
      ct_table_config cfg = config(D, opts[o]);
      cfg.block_rows = 4096;
      memcpy(cfg.opt_params, params[o], sizeof params[o]);
      char name[32];
      snprintf(name, sizeof name, "threads-%d-%d", o, threads);
      CHECK(ok(ct_table_new(&t, name, &cfg)));
      ct_tensor k = ids_tensor(ids, N), half = ids_tensor(ids, N / 2), g = rows_tensor(grads, N, D),
                gh = rows_tensor(grads, N / 2, D), rows = NULL, found = NULL;
      ct_tensor some = ids_tensor(ids, PRESENT / 2);
      CHECK(ok(ct_table_lookup(&rows, t, some)));
      ct_tensor_free(rows);
      CHECK(ok(ct_table_lookup(&rows, t, k)));
      ct_tensor_free(rows);
      CHECK(ok(ct_table_update(t, k, g)) && ok(ct_table_update(t, half, gh)));
      CHECK(ok(ct_table_read(&rows, &found, t, k, CT_READ_ZEROS)) && take_floats(rows, got[threads - 1], N * D));
      ct_tensor_free(found);
      ct_tensor_free(some);
      ct_tensor_free(k);
      ct_tensor_free(half);
      ct_tensor_free(g);
      ct_tensor_free(gh);
      CHECK(ok(ct_table_close(t)));
      ct_table_free(t);
    }
    same &= memcmp(got[0], got[1], sizeof got[0]) == 0;
  }
  CHECK(same);
  CHECK(ok(ct_set_num_threads(1)));
}

static void test_prefetch(void) {
  ct_table t = NULL;
  ct_table_config cfg = config(2, CT_OPT_NONE);
  CHECK(ok(ct_table_new(&t, "pf", &cfg)));
  int64_t ids[3] = {5, 6, 5};
  ct_tensor k = ids_tensor(ids, 3), rows = NULL, found = NULL;
  CHECK(ok(ct_table_lookup(&rows, t, k)));
  float want[6], got[6];
  CHECK(take_floats(rows, want, 6));
  int64_t id = -1, id2 = -1, id3 = -1;
  int32_t ready = -1;
  CHECK(ok(ct_table_prefetch(&id, t, k, CT_READ_ZEROS)));
  CHECK(ok(ct_table_prefetch(&id2, t, k, CT_READ_ZEROS)) && id2 != id);
  CHECK(ok(ct_table_prefetch_wait(&rows, &found, &ready, t, id, -1)) && ready == 1);
  CHECK(take_floats(rows, got, 6) && memcmp(got, want, sizeof got) == 0);
  ct_tensor_free(found);
  CHECK(fails_with(ct_table_prefetch_wait(&rows, NULL, &ready, t, id, -1), "unknown prefetch: "));
  CHECK(fails_with(ct_table_prefetch_wait(&rows, NULL, &ready, t, 12345, 0), "unknown prefetch: "));
  CHECK(fails_with(ct_table_prefetch(&id3, t, k, 9), "read default"));
  CHECK(ok(ct_table_prefetch_discard(t, id2)));
  CHECK(fails_with(ct_table_prefetch_discard(t, id2), "unknown prefetch: "));
  /* a pending prefetch on a closed table: waiting is an error, nothing leaks */
  CHECK(ok(ct_table_prefetch(&id3, t, k, CT_READ_INITIAL)));
  CHECK(ok(ct_table_close(t)));
  CHECK(fails_with(ct_table_prefetch_wait(&rows, NULL, &ready, t, id3, -1), "closed: "));
  CHECK(fails_with(ct_table_prefetch(&id3, t, k, CT_READ_ZEROS), "closed: "));
  ct_table_free(t);
  ct_tensor_free(k);
}

/* Bags of a call with thousands of distinct ids (the bags' distinct-id table grows several
 * times in the call, bags_dedupe.cc.h; its stamps wrap every few tables in this build): each
 * pooled row equals the same bag pooled alone, bit for bit, and the padding id is left out. */
static void test_large_bags(void) {
  enum { NB = 40, LEN = 100, DISTINCT = 2500, DIM = 3 };
  ct_table t = NULL;
  ct_table_config cfg = config(DIM, CT_OPT_SGD);
  cfg.opt_params[0] = 1;
  CHECK(ok(ct_table_new(&t, "large-bags", &cfg)));
  static int64_t pool[DISTINCT], ids[NB * LEN], offs[NB];
  static float rows[DISTINCT * DIM], all[NB * DIM];
  uint64_t x = 12345;
  for (int i = 0; i < DISTINCT; i++) {
    pool[i] = (int64_t)(i + 1) * -7919004121LL; /* large, negative, distinct */
    for (int j = 0; j < DIM; j++) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      rows[i * DIM + j] = (float)(x >> 40) / (float)(1 << 24) - 0.5f;
    }
  }
  ct_tensor k = ids_tensor(pool, DISTINCT), v = rows_tensor(rows, DISTINCT, DIM);
  CHECK(ok(ct_table_write(t, k, v)));
  for (int b = 0; b < NB; b++) {
    offs[b] = b * LEN;
    for (int p = 0; p < LEN; p++) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      ids[b * LEN + p] = p % 17 == 3 ? 5 : pool[(x >> 33) % DISTINCT]; /* 5: the padding id */
    }
  }
  ct_table_forward_options o;
  memset(&o, 0, sizeof o);
  o.has_padding_id = 1;
  o.padding_id = 5;
  ct_tensor bi = ids_tensor(ids, NB * LEN), bo = ids_tensor(offs, NB), out = NULL;
  int64_t zero = 0;
  ct_tensor z = ids_tensor(&zero, 1);
  CHECK(ok(ct_table_forward_bag(&out, t, bi, bo, NULL, CT_BAG_MEAN, &o)) && take_floats(out, all, NB * DIM));
  for (int b = 0; b < NB; b++) {
    float one[DIM];
    ct_tensor bk = ids_tensor(ids + b * LEN, LEN);
    CHECK(ok(ct_table_forward_bag(&out, t, bk, z, NULL, CT_BAG_MEAN, &o)) && take_floats(out, one, DIM));
    CHECK(memcmp(one, all + b * DIM, sizeof one) == 0);
    ct_tensor_free(bk);
  }
  /* bag 0 by hand: the mean of its rows other than padding (the pool's rows by search) */
  for (int j = 0; j < DIM; j++) {
    double sum = 0;
    int n = 0;
    for (int p = 0; p < LEN; p++) {
      if (ids[p] == 5) continue;
      n++;
      for (int i = 0; i < DISTINCT; i++) {
        if (pool[i] == ids[p]) sum += rows[i * DIM + j];
      }
    }
    CHECK(close_to(all[j], (float)(sum / n)));
  }
  ct_tensor_free(k);
  ct_tensor_free(v);
  ct_tensor_free(bi);
  ct_tensor_free(bo);
  ct_tensor_free(z);
  ct_table_free(t);
}

/* The autograd path: forward (train / eval / fused / padding / max_norm), bags, backward into
 * pending gradients, step, zero_grad, errors; raw and tensor kernels. */
static ct_tensor sum_backward(ct_tensor out) {
  ct_tensor loss = NULL;
  if (ok(ct_reduce(&loss, CT_REDUCE_SUM, out, NULL, 0, 0))) CHECK(ok(ct_tensor_backward(loss, NULL, 0)));
  return loss;
}

static void test_autograd_one(int32_t flags, double momentum) {
  ct_table t = NULL;
  ct_table_config cfg = config(2, CT_OPT_SGD);
  cfg.opt_params[0] = 1;
  cfg.opt_params[1] = momentum;
  cfg.flags = flags;
  CHECK(ok(ct_table_new(&t, "autograd", &cfg)));
  int64_t ids6[6] = {0, 1, 2, 3, 4, 5};
  float w[12];
  for (int i = 0; i < 12; i++) w[i] = (float)i;
  ct_tensor k6 = ids_tensor(ids6, 6), v6 = rows_tensor(w, 6, 2);
  CHECK(ok(ct_table_write(t, k6, v6)));
  ct_table_forward_options o;
  memset(&o, 0, sizeof o);

  /* optimizers.md's EmbeddingBag reference: W[r] = [2r, 2r+1], bags [1,2], [], [4,5,4,3] */
  int64_t bag_ids[6] = {1, 2, 4, 5, 4, 3}, offs[3] = {0, 2, 2};
  ct_tensor bi = ids_tensor(bag_ids, 6), bo = ids_tensor(offs, 3), out = NULL;
  const float want[3][6] = {{6, 8, 0, 0, 32, 36}, {3, 4, 0, 0, 8, 9}, {4, 5, 0, 0, 10, 11}};
  for (int32_t mode = CT_BAG_SUM; mode <= CT_BAG_MAX; mode++) {
    float got[6];
    CHECK(ok(ct_table_forward_bag(&out, t, bi, bo, NULL, mode, &o)) && take_floats(out, got, 6));
    for (int i = 0; i < 6; i++) CHECK(close_to(got[i], want[mode][i]));
  }

  /* training lookup of [3, 9, 3]: 9 is inserted, gradients pending until the step */
  int64_t ids[3] = {3, 9, 3};
  ct_tensor k = ids_tensor(ids, 3), pi = NULL, pg = NULL, loss = NULL;
  o.train = 1;
  CHECK(ok(ct_table_forward(&out, t, k, &o)));
  loss = sum_backward(out);
  ct_tensor_free(loss);
  ct_tensor_free(out);
  CHECK(ok(ct_table_pending_grad(&pi, &pg, t)));
  int64_t got_ids[2] = {0, 0};
  float g[4] = {0, 0, 0, 0};
  CHECK(ok(ct_tensor_copy_to(got_ids, sizeof got_ids, pi, CT_INT64)) && got_ids[0] == 3 && got_ids[1] == 9);
  CHECK(take_floats(pg, g, 4) && g[0] == 2 && g[1] == 2 && g[2] == 1 && g[3] == 1);
  ct_tensor_free(pi);
  int32_t stepped = -1;
  CHECK(ok(ct_table_step(&stepped, t)) && stepped == 1);
  CHECK(ok(ct_table_step(&stepped, t)) && stepped == 0);
  float r[2];
  int64_t id3 = 3;
  ct_tensor k3 = ids_tensor(&id3, 1), rows = NULL;
  CHECK(ok(ct_table_read(&rows, NULL, t, k3, CT_READ_ZEROS)) && take_floats(rows, r, 2));
  CHECK(close_to(r[0], 4) && close_to(r[1], 5));

  /* fused: the step happens in backward, nothing stays pending */
  o.fused = 1;
  CHECK(ok(ct_table_forward(&out, t, k3, &o)));
  ct_tensor_free(sum_backward(out));
  ct_tensor_free(out);
  CHECK(ok(ct_table_pending_grad(&pi, &pg, t)));
  int64_t n = -1;
  CHECK(ok(ct_tensor_numel(&n, pi)) && n == 0);
  ct_tensor_free(pi);
  ct_tensor_free(pg);
  CHECK(ok(ct_table_read(&rows, NULL, t, k3, CT_READ_ZEROS)) && take_floats(rows, r, 2));
  if (momentum == 0) CHECK(close_to(r[0], 3) && close_to(r[1], 4));
  o.fused = 0;

  /* padding (id 3): zero rows, no gradient; max_norm renormalises the row in the table */
  o.has_padding_id = 1;
  o.padding_id = 3;
  o.max_norm = 1;
  int64_t pids[2] = {0, 3};
  ct_tensor kp = ids_tensor(pids, 2);
  float pr[4];
  CHECK(ok(ct_table_forward(&out, t, kp, &o)));
  ct_tensor_free(sum_backward(out));
  CHECK(take_floats(out, pr, 4) && close_to(pr[0], 0) && close_to(pr[1], 1) && pr[2] == 0 && pr[3] == 0);
  CHECK(ok(ct_table_pending_grad(&pi, &pg, t)));
  CHECK(ok(ct_tensor_numel(&n, pi)) && n == 1);
  ct_tensor_free(pi);
  ct_tensor_free(pg);
  CHECK(ok(ct_table_zero_grad(t)) && ok(ct_table_step(&stepped, t)) && stepped == 0);
  int64_t id5 = 5;
  ct_tensor k5 = ids_tensor(&id5, 1);
  CHECK(ok(ct_table_forward(&out, t, k5, &o)) && take_floats(out, r, 2));
  CHECK(ok(ct_table_read(&rows, NULL, t, k5, CT_READ_ZEROS)) && take_floats(rows, pr, 2));
  CHECK(close_to(pr[0], 10 / sqrtf(221)) && close_to(pr[1], 11 / sqrtf(221)) && close_to(r[0], pr[0]));

  /* bad input */
  CHECK(fails_with(ct_table_forward(&out, t, k, NULL), "invalid argument: "));
  CHECK(fails_with(ct_table_forward(&out, t, v6, &o), "invalid argument: ids must be int64"));
  CHECK(fails_with(ct_table_forward_bag(&out, t, bi, bo, NULL, 7, &o), "invalid argument: unknown bag mode"));
  CHECK(fails_with(ct_table_forward_bag(&out, t, bi, k3, NULL, CT_BAG_SUM, &o), "offsets must start at 0"));
  CHECK(fails_with(ct_table_forward_bag(&out, t, bi, NULL, NULL, CT_BAG_SUM, &o), "two-dimensional"));
  CHECK(fails_with(ct_table_forward_bag(&out, t, bi, bo, v6, CT_BAG_MAX, &o), "sum mode"));
  o.max_norm = -1;
  CHECK(fails_with(ct_table_forward(&out, t, k, &o), "max_norm"));
  o.max_norm = 0;

  /* a backward pass after close fails with "closed: " */
  CHECK(ok(ct_table_forward(&out, t, k, &o)));
  CHECK(ok(ct_reduce(&loss, CT_REDUCE_SUM, out, NULL, 0, 0)));
  CHECK(ok(ct_table_close(t)));
  CHECK(fails_with(ct_tensor_backward(loss, NULL, 0), "closed: "));
  CHECK(fails_with(ct_table_forward(&out, t, k, &o), "closed: "));
  CHECK(fails_with(ct_table_step(NULL, t), "closed: "));
  CHECK(fails_with(ct_table_step(NULL, NULL), "closed: "));
  ct_tensor_free(loss);
  ct_tensor_free(out);
  ct_table_free(t);
  ct_tensor_free(k6);
  ct_tensor_free(v6);
  ct_tensor_free(bi);
  ct_tensor_free(bo);
  ct_tensor_free(k);
  ct_tensor_free(k3);
  ct_tensor_free(kp);
  ct_tensor_free(k5);
}

static void test_autograd(void) {
  test_autograd_one(0, 0);
  test_autograd_one(CT_TABLE_TENSOR_KERNELS, 0);
  test_autograd_one(0, 0.9);
  test_autograd_one(CT_TABLE_TENSOR_KERNELS, 0.9);
}

/* ---- lifecycle: save stream, import, swap, admission, eviction, compaction, deltas -------- */

/* Everything a save streams, collected by collect_sink. */
typedef struct {
  int64_t rows, counts, step, dim, seen_rows, seen_counts, calls;
  int64_t *ids, *last, *freq, *stamp, *cids, *cnt;
  float *emb, *s0;
  int abort_at; /* a call number at which the sink fails (0: never) */
} collected;

static int32_t collect_sink(uintptr_t ctx, const ct_table_chunk *c) {
  collected *k = (collected *)ctx;
  k->calls++;
  if (k->abort_at != 0 && k->calls == k->abort_at) return 1;
  if (k->ids == NULL) {
    k->rows = c->total_rows;
    k->counts = c->total_counts;
    k->step = c->step;
    k->ids = calloc((size_t)k->rows + 1, sizeof(int64_t));
    k->last = calloc((size_t)k->rows + 1, sizeof(int64_t));
    k->freq = calloc((size_t)k->rows + 1, sizeof(int64_t));
    k->stamp = calloc((size_t)k->rows + 1, sizeof(int64_t));
    k->emb = calloc((size_t)(k->rows * k->dim) + 1, sizeof(float));
    k->s0 = calloc((size_t)(k->rows * k->dim) + 1, sizeof(float));
    k->cids = calloc((size_t)k->counts + 1, sizeof(int64_t));
    k->cnt = calloc((size_t)k->counts + 1, sizeof(int64_t));
  }
  if (c->kind == CT_CHUNK_ROWS) {
    if (c->offset != k->seen_rows || c->offset + c->count > k->rows) return 1;
    memcpy(k->ids + c->offset, c->ids, (size_t)c->count * sizeof(int64_t));
    memcpy(k->last + c->offset, c->last_step, (size_t)c->count * sizeof(int64_t));
    memcpy(k->freq + c->offset, c->frequency, (size_t)c->count * sizeof(int64_t));
    memcpy(k->stamp + c->offset, c->stamp, (size_t)c->count * sizeof(int64_t));
    memcpy(k->emb + c->offset * k->dim, c->rows, (size_t)(c->count * k->dim) * sizeof(float));
    memcpy(k->s0 + c->offset * k->dim, c->states[0], (size_t)(c->count * k->dim) * sizeof(float));
    k->seen_rows += c->count;
  } else {
    if (c->offset != k->seen_counts || c->offset + c->count > k->counts) return 1;
    memcpy(k->cids + c->offset, c->ids, (size_t)c->count * sizeof(int64_t));
    memcpy(k->cnt + c->offset, c->counts, (size_t)c->count * sizeof(int64_t));
    k->seen_counts += c->count;
  }
  return 0;
}

static void collected_free(collected *k) {
  free(k->ids);
  free(k->last);
  free(k->freq);
  free(k->stamp);
  free(k->emb);
  free(k->s0);
  free(k->cids);
  free(k->cnt);
}

/* The two tables export the same ids, rows and first state, bit for bit. */
static int same_tables(ct_table a, ct_table b) {
  int64_t *ia, *ib, ma, mb;
  float *ra, *rb, *sa, *sb;
  ct_table_stats st;
  int same;
  snapshot(a, &ia, &ra, &sa, &ma);
  snapshot(b, &ib, &rb, &sb, &mb);
  same = ok(ct_table_stats_get(&st, a)) && ma == mb && ma > 0 &&
         memcmp(ia, ib, (size_t)ma * sizeof(int64_t)) == 0 &&
         memcmp(ra, rb, (size_t)(ma * st.dim) * sizeof(float)) == 0 &&
         (sa == NULL || memcmp(sa, sb, (size_t)(ma * st.dim) * sizeof(float)) == 0);
  free(ia);
  free(ib);
  free(ra);
  free(rb);
  free(sa);
  free(sb);
  return same;
}

static void update_ids(ct_table t, const int64_t *ids, int64_t n, int64_t dim, float g) {
  float *v = malloc((size_t)(n * dim) * sizeof(float));
  ct_tensor k = ids_tensor(ids, n), r;
  int64_t i;
  for (i = 0; i < n * dim; i++) v[i] = g * (float)(i % 5 + 1);
  r = rows_tensor(v, n, dim);
  CHECK(ok(ct_table_update(t, k, r)));
  ct_tensor_free(k);
  ct_tensor_free(r);
  free(v);
}

/* Swap needs the same optimizer states: SGD with momentum (one state) and without (none)
 * share the kind but not the storage. States' initial values go with the contents: a row
 * created after the swap starts from the optimizer the table took over. */
static void test_swap_states(int32_t flags) {
  ct_table m = NULL, p = NULL, a0 = NULL, a1 = NULL;
  ct_table_config cfg = config(3, CT_OPT_SGD);
  cfg.flags = flags;
  cfg.opt_params[0] = 0.1;
  CHECK(ok(ct_table_new(&p, "swap-plain", &cfg)));
  cfg.opt_params[1] = 0.9;
  CHECK(ok(ct_table_new(&m, "swap-momentum", &cfg)));
  CHECK(fails_with(ct_table_swap(m, p), "differ in"));
  cfg = config(3, CT_OPT_ADAGRAD);
  cfg.flags = flags;
  cfg.opt_params[0] = 0.1;
  cfg.opt_params[3] = 1e-10;
  CHECK(ok(ct_table_new(&a0, "swap-acc0", &cfg)));
  cfg.opt_params[2] = 0.5;
  CHECK(ok(ct_table_new(&a1, "swap-acc05", &cfg)));
  CHECK(ok(ct_table_swap(a0, a1)));
  int64_t id = 42, *ids = NULL, mm = 0;
  float *rows = NULL, *s0 = NULL;
  ct_tensor k = ids_tensor(&id, 1), r = NULL;
  CHECK(ok(ct_table_lookup(&r, a0, k)));
  snapshot(a0, &ids, &rows, &s0, &mm);
  CHECK(mm == 1 && s0 != NULL && s0[0] == 0.5f && s0[2] == 0.5f);
  free(ids);
  free(rows);
  free(s0);
  ct_tensor_free(r);
  ct_tensor_free(k);
  ct_table *all[4] = {&m, &p, &a0, &a1};
  for (int i = 0; i < 4; i++) {
    CHECK(ok(ct_table_close(*all[i])));
    ct_table_free(*all[i]);
  }
}

/* ct_table_lookup_into and ct_table_read_into give the tensor forms' rows, straight into the
 * caller's buffers, and check what they are given. */
static void test_into_one(int32_t flags) {
  ct_table a = NULL, b = NULL;
  ct_table_config cfg = config(3, CT_OPT_ADAGRAD);
  cfg.opt_params[0] = 0.1;
  cfg.opt_params[3] = 1e-10;
  cfg.flags = flags;
  CHECK(ok(ct_table_new(&a, "into-a", &cfg)) && ok(ct_table_new(&b, "into-b", &cfg)));
  int64_t ids[5] = {4, -9, 4, 0, 77}, absent[2] = {4, 123};
  float got[15], want[15];
  ct_tensor k = ids_tensor(ids, 5), r = NULL, f = NULL;
  CHECK(ok(ct_table_lookup_into(got, 15, a, ids, 5)));
  CHECK(ok(ct_table_lookup(&r, b, k)) && take_floats(r, want, 15) && memcmp(got, want, sizeof got) == 0);
  update_ids(a, ids, 2, 3, 1.0f);
  update_ids(b, ids, 2, 3, 1.0f);
  CHECK(ok(ct_table_lookup_into(got, 15, a, ids, 5)));
  CHECK(ok(ct_table_lookup(&r, b, k)) && take_floats(r, want, 15) && memcmp(got, want, sizeof got) == 0);
  ct_tensor_free(k);
  /* read: found, the defaults of absent ids, nothing inserted */
  uint8_t found[2] = {7, 7}, wf[2];
  ct_table_stats st;
  k = ids_tensor(absent, 2);
  CHECK(ok(ct_table_read_into(got, 6, found, a, absent, 2, CT_READ_INITIAL)));
  CHECK(ok(ct_table_read(&r, &f, b, k, CT_READ_INITIAL)) && take_floats(r, want, 6) &&
        ok(ct_tensor_copy_to(wf, 2, f, CT_BOOL)) && memcmp(got, want, 6 * sizeof(float)) == 0 &&
        found[0] == 1 && found[1] == 0 && wf[0] == 1 && wf[1] == 0);
  ct_tensor_free(f);
  ct_tensor_free(k);
  CHECK(ok(ct_table_read_into(got, 6, NULL, a, absent, 2, CT_READ_ZEROS)) && got[3] == 0 && got[5] == 0);
  CHECK(ok(ct_table_stats_get(&st, a)) && st.size == 4);
  /* what they are given */
  CHECK(fails_with(ct_table_lookup_into(got, 14, a, ids, 5), "rows holds 14 floats"));
  CHECK(fails_with(ct_table_read_into(got, 16, NULL, a, ids, 5, CT_READ_ZEROS), "rows holds 16 floats"));
  CHECK(fails_with(ct_table_lookup_into(got, 15, a, NULL, 5), "ids is NULL"));
  CHECK(fails_with(ct_table_lookup_into(NULL, 15, a, ids, 5), "rows is NULL"));
  CHECK(fails_with(ct_table_lookup_into(got, 0, a, ids, -1), "n must be >= 0"));
  CHECK(fails_with(ct_table_read_into(got, 15, NULL, a, ids, 5, 9), "unknown read default"));
  CHECK(fails_with(ct_table_lookup_into(got, 0, a, ids, INT64_MAX / 2), "too large"));
  CHECK(ok(ct_table_lookup_into(NULL, 0, a, NULL, 0)) && ok(ct_table_read_into(NULL, 0, NULL, a, NULL, 0, 0)));
  CHECK(ok(ct_table_stats_get(&st, a)) && st.size == 4);
  CHECK(ok(ct_table_close(a)) && ok(ct_table_close(b)));
  CHECK(fails_with(ct_table_lookup_into(got, 15, a, ids, 5), "closed: "));
  ct_table_free(a);
  ct_table_free(b);
}

static void test_into(void) {
  test_into_one(0);
  test_into_one(CT_TABLE_TENSOR_KERNELS);
}

/* What an export stream gives, collected by export_sink (dim 3, one state of width 3). */
typedef struct {
  int64_t total, seen, step, calls, meta_calls;
  int64_t ids[64];
  float emb[64 * 3], s0[64 * 3];
  int abort_at;
} exported;

static int32_t export_sink(uintptr_t ctx, const ct_table_chunk *c) {
  exported *k = (exported *)ctx;
  k->calls++;
  if (k->abort_at != 0 && k->calls == k->abort_at) return 1;
  if (c->kind != CT_CHUNK_ROWS || c->offset != k->seen || c->count <= 0 || c->offset + c->count > 64 ||
      c->stamp != NULL || c->counts != NULL || c->states[0] == NULL || c->states[1] != NULL)
    return 1;
  k->total = c->total_rows;
  k->step = c->step;
  k->meta_calls += c->last_step != NULL && c->frequency != NULL;
  memcpy(k->ids + c->offset, c->ids, (size_t)c->count * sizeof(int64_t));
  memcpy(k->emb + c->offset * 3, c->rows, (size_t)(c->count * 3) * sizeof(float));
  memcpy(k->s0 + c->offset * 3, c->states[0], (size_t)(c->count * 3) * sizeof(float));
  k->seen += c->count;
  return 0;
}

/* ct_table_export_chunks gives ct_table_export's ids, rows and states (momentum caught up for
 * rows that lag behind), chunk by chunk, bit for bit. */
static void test_export_chunks_one(int32_t flags) {
  ct_table a = NULL;
  ct_table_config cfg = config(3, CT_OPT_SGD);
  int64_t all[8] = {8, 1, 7, 2, 6, 3, 5, 4}, some[3] = {2, 5, 8}, cr[4] = {1, 3, 8, 100};
  exported k;
  cfg.opt_params[0] = 0.1;
  cfg.opt_params[1] = 0.9;
  cfg.flags = flags;
  CHECK(ok(ct_table_new(&a, "export-chunks", &cfg)));
  memset(&k, 0, sizeof k);
  CHECK(ok(ct_table_export_chunks(a, 4, export_sink, (uintptr_t)&k)) && k.calls == 0); /* empty */
  update_ids(a, all, 8, 3, 1.0f);
  update_ids(a, some, 3, 3, -0.5f); /* the others lag behind: their rows are caught up */
  update_ids(a, some, 2, 3, 0.25f);
  int64_t *ids, m;
  float *rows, *s0;
  snapshot(a, &ids, &rows, &s0, &m);
  CHECK(m == 8 && s0 != NULL);
  for (int c = 0; c < 4; c++) {
    memset(&k, 0, sizeof k);
    CHECK(ok(ct_table_export_chunks(a, cr[c], export_sink, (uintptr_t)&k)));
    CHECK(k.total == 8 && k.seen == 8 && k.step == 3 && k.calls == (8 + cr[c] - 1) / cr[c]);
    CHECK(k.meta_calls == ((flags & CT_TABLE_TRACK_ACCESS) ? k.calls : 0));
    CHECK(memcmp(k.ids, ids, sizeof(int64_t) * 8) == 0 && memcmp(k.emb, rows, sizeof(float) * 24) == 0 &&
          memcmp(k.s0, s0, sizeof(float) * 24) == 0);
  }
  free(ids);
  free(rows);
  free(s0);
  memset(&k, 0, sizeof k);
  k.abort_at = 2;
  CHECK(fails_with(ct_table_export_chunks(a, 3, export_sink, (uintptr_t)&k), "aborted: ") && k.calls == 2);
  CHECK(fails_with(ct_table_export_chunks(a, 0, export_sink, (uintptr_t)&k), "chunk_rows"));
  CHECK(fails_with(ct_table_export_chunks(a, 3, NULL, 0), "sink is NULL"));
  CHECK(ok(ct_table_close(a)));
  CHECK(fails_with(ct_table_export_chunks(a, 3, export_sink, (uintptr_t)&k), "closed: "));
  ct_table_free(a);
}

static void test_export_chunks(void) {
  test_export_chunks_one(0);
  test_export_chunks_one(CT_TABLE_TENSOR_KERNELS);
  test_export_chunks_one(CT_TABLE_TRACK_ACCESS);
}

/* Whether id has a row in t (a find: inserts nothing). */
static int present(ct_table t, int64_t id) {
  int64_t idx = -1;
  ct_tensor k = ids_tensor(&id, 1), out = NULL;
  int r = ok(ct_table_indices(&out, t, k, 0)) && ok(ct_tensor_copy_to(&idx, sizeof idx, out, CT_INT64));
  ct_tensor_free(out);
  ct_tensor_free(k);
  return r && idx >= 0;
}

/* A delta (ct_table_apply_delta) applies all or nothing, and in order. */
static void test_apply_delta_one(int32_t flags) {
  ct_table b = NULL;
  ct_table_config cfg = config(3, CT_OPT_SPARSE_ADAM);
  float st[3] = {0.5f, 0.5f, 0.5f};
  int64_t id = 77, gone = 1, kept = 2, both[2] = {1, 2};
  ct_table_stats s1, s2;
  cfg.opt_params[0] = 0.1;
  cfg.opt_params[1] = 0.9;
  cfg.opt_params[2] = 0.999;
  cfg.opt_params[3] = 1e-8;
  cfg.flags = flags;
  CHECK(ok(ct_table_new(&b, "apply-delta", &cfg)));
  update_ids(b, both, 2, 3, 1.0f);
  CHECK(ok(ct_table_stats_get(&s1, b)) && present(b, gone) && present(b, kept) && !present(b, id));
  CHECK(fails_with(ct_table_apply_delta(b, s1.step - 1, 1, &gone, 1, &id, st, st, st, NULL, NULL, NULL, NULL), "behind"));
  CHECK(fails_with(ct_table_apply_delta(b, s1.step + 2, 1, NULL, 1, &id, st, st, st, NULL, NULL, NULL, NULL), "deleted ids"));
  CHECK(fails_with(ct_table_apply_delta(b, s1.step + 2, 1, &gone, 1, &id, st, NULL, st, NULL, NULL, NULL, NULL), "state0 is NULL"));
  CHECK(ok(ct_table_stats_get(&s2, b)) && s2.size == s1.size && s2.step == s1.step);
  CHECK(present(b, gone) && !present(b, id));
  /* kept is both deleted and written: the write wins */
  CHECK(ok(ct_table_apply_delta(b, s1.step + 2, 2, both, 1, &kept, st, st, st, NULL, NULL, NULL, NULL)));
  CHECK(ok(ct_table_stats_get(&s2, b)) && s2.size == s1.size - 1 && s2.step == s1.step + 2);
  CHECK(!present(b, gone) && present(b, kept));
  CHECK(ok(ct_table_close(b)));
  ct_table_free(b);
}

/* A small delta of a dim-2 table with one state, on the host (take_small frees the tensors). */
typedef struct {
  int64_t n, ids[8], last[8], freq[8], stamp[8];
  float rows[16], s0[16];
} small_delta;

static void take_small(small_delta *d, ct_tensor x, ct_tensor rows, ct_tensor s0, ct_tensor meta) {
  int64_t m[24];
  CHECK(ok(ct_tensor_numel(&d->n, x)) && d->n <= 8);
  CHECK(ok(ct_tensor_copy_to(d->ids, (size_t)d->n * 8, x, CT_INT64)) &&
        ok(ct_tensor_copy_to(d->rows, (size_t)d->n * 8, rows, CT_FLOAT32)) &&
        ok(ct_tensor_copy_to(d->s0, (size_t)d->n * 8, s0, CT_FLOAT32)) &&
        ok(ct_tensor_copy_to(m, (size_t)d->n * 24, meta, CT_INT64)));
  for (int64_t i = 0; i < d->n; i++) {
    d->last[i] = m[3 * i];
    d->freq[i] = m[3 * i + 1];
    d->stamp[i] = m[3 * i + 2];
  }
  ct_tensor_free(x);
  ct_tensor_free(rows);
  ct_tensor_free(s0);
  ct_tensor_free(meta);
}

/* A delta's chain (ct_table_delta_info): the next one applies, a skipped or repeated one is
 * "incompatible: " and changes nothing; the copy takes the delta's learning rate; ct_table_check
 * passes throughout; set_step below a row's last step and a swap across flags are refused. */
static void test_delta_chain_one(int32_t flags) {
  ct_table a = NULL, b = NULL, c = NULL;
  ct_table_config cfg = config(2, CT_OPT_SGD);
  cfg.opt_params[0] = 0.1;
  cfg.opt_params[1] = 0.9; /* momentum: a state and stamps */
  cfg.flags = flags | CT_TABLE_TRACK_ACCESS;
  int64_t ids[2] = {1, 2};
  CHECK(ok(ct_table_new(&a, "chain-a", &cfg)) && ok(ct_table_new(&b, "chain-b", &cfg)));
  ct_tensor x = NULL, rows = NULL, st[2] = {NULL, NULL}, meta = NULL, del = NULL, ci = NULL, cv = NULL;
  ct_table_delta_info info[3];
  int64_t step[3];
  small_delta k[3];
  for (int i = 0; i < 3; i++) {
    update_ids(a, ids, 2, 2, 1.0f);
    if (i == 2) CHECK(ok(ct_table_set_lr(a, 0.01)));
    CHECK(ok(ct_table_delta(&x, &rows, st, 2, &meta, &del, &step[i], &info[i], &ci, &cv, a, 1)));
    CHECK(info[i].base == i && info[i].seq == i + 1 && info[i].lineage != 0);
    take_small(&k[i], x, rows, st[0], meta);
    ct_tensor_free(del);
    ct_tensor_free(ci);
    ct_tensor_free(cv);
    CHECK(ok(ct_table_check(a)));
  }
  CHECK(info[0].lineage == info[1].lineage && info[1].lineage == info[2].lineage && info[2].opt_params[0] == 0.01);
#define APPLY(i) ct_table_apply_delta(b, step[i], 0, NULL, k[i].n, k[i].ids, k[i].rows, k[i].s0, NULL, k[i].last, k[i].freq, k[i].stamp, &info[i])
  CHECK(fails_with(APPLY(1), "incompatible: "));
  CHECK(ok(APPLY(0)));
  CHECK(fails_with(APPLY(0), "incompatible: "));
  CHECK(fails_with(APPLY(2), "incompatible: "));
  CHECK(ok(APPLY(1)) && ok(APPLY(2)));
#undef APPLY
  ct_table_config got;
  CHECK(ok(ct_table_config_get(&got, b)) && got.opt_params[0] == 0.01);
  CHECK(ok(ct_table_check(b)) && same_tables(a, b));
  /* set_step: not below a row's last step or stamp */
  CHECK(fails_with(ct_table_set_step(a, 0), "below the last step"));
  CHECK(ok(ct_table_set_step(a, 10)) && ok(ct_table_check(a)));
  /* swap: not across flags */
  cfg.flags = flags;
  CHECK(ok(ct_table_new(&c, "chain-c", &cfg)));
  CHECK(fails_with(ct_table_swap(a, c), "differ in"));
  CHECK(ok(ct_table_close(a)) && ok(ct_table_close(b)) && ok(ct_table_close(c)));
  CHECK(fails_with(ct_table_check(a), "closed: "));
  ct_table_free(a);
  ct_table_free(b);
  ct_table_free(c);
}

/* ct_table_check finds a broken invariant (broken by a test hook behind the API's back). */
extern ct_error ct_test_table_break(ct_table t, int32_t what);
static void test_check_finds(void) {
  static const char *const want[3] = {"both a row and an admission count", "beyond the step counter", "row value nan"};
  for (int32_t what = 0; what < 3; what++) {
    ct_table t = NULL;
    ct_table_config cfg = config(2, CT_OPT_SGD);
    cfg.opt_params[0] = 0.1;
    cfg.opt_params[1] = 0.5;
    cfg.flags = CT_TABLE_TRACK_ACCESS;
    int64_t ids[2] = {4, 5};
    CHECK(ok(ct_table_new(&t, "check-finds", &cfg)));
    update_ids(t, ids, 2, 2, 1.0f);
    CHECK(ok(ct_table_check(t)) && ok(ct_test_table_break(t, what)));
    CHECK(fails_with(ct_table_check(t), want[what]));
    CHECK(ok(ct_table_close(t)));
    ct_table_free(t);
  }
}

static void test_apply_delta(void) {
  test_check_finds();
  test_apply_delta_one(0);
  test_apply_delta_one(CT_TABLE_TENSOR_KERNELS | CT_TABLE_TRACK_ACCESS);
  test_delta_chain_one(0);
  test_delta_chain_one(CT_TABLE_TENSOR_KERNELS);
}

static void test_save_import_one(int32_t flags) {
  ct_table a = NULL, b = NULL, c = NULL;
  ct_table_config cfg = config(3, CT_OPT_SGD), got;
  collected k;
  int64_t all[8] = {1, 2, 3, 4, 5, 6, 7, 8}, some[3] = {2, 5, 8}, gone[2] = {3, 4}, fresh = 99;
  int64_t n = 0, kk = 0, counted = 0;
  ct_tensor ki, t1 = NULL, t2 = NULL;
  cfg.opt_params[0] = 0.1;
  cfg.opt_params[1] = 0.9;
  cfg.flags = flags;
  CHECK(ok(ct_table_new(&a, "save-a", &cfg)));
  CHECK(ok(ct_table_new(&b, "save-b", &cfg)));
  update_ids(a, all, 8, 3, 1.0f);
  update_ids(a, some, 3, 3, -0.5f); /* the others lag behind: lazy momentum, stamps differ */
  update_ids(a, some, 2, 3, 0.25f);
  ki = ids_tensor(gone, 2);
  CHECK(ok(ct_table_delete(&n, a, ki)) && n == 2);
  ct_tensor_free(ki);
  CHECK(ok(ct_table_set_admission(a, 3)));
  ki = ids_tensor(&fresh, 1);
  CHECK(ok(ct_table_lookup(&t1, a, ki)));
  ct_tensor_free(t1);
  ct_tensor_free(ki);
  CHECK(ok(ct_table_config_get(&got, a)) && got.dim == 3 && got.opt_params[1] == 0.9 && got.flags == flags);

  memset(&k, 0, sizeof k);
  k.dim = 3;
  CHECK(ok(ct_table_save(a, 4, collect_sink, (uintptr_t)&k)));
  CHECK(k.rows == 6 && k.seen_rows == 6 && k.counts == 1 && k.seen_counts == 1 && k.step == 3 && k.calls == 3);
  CHECK(k.cids[0] == 99 && k.cnt[0] == 1);
  /* Import into b: the step first, then the rows, then the counts. */
  CHECK(ok(ct_table_set_step(b, k.step)));
  CHECK(fails_with(ct_table_import_counts(b, k.counts, k.cids, k.cnt), "admission off"));
  CHECK(ok(ct_table_set_admission(b, 3)));
  CHECK(ok(ct_table_import(b, k.rows, k.ids, k.emb, k.s0, NULL, k.last, k.freq, k.stamp)));
  CHECK(ok(ct_table_import_counts(b, k.counts, k.cids, k.cnt)));
  CHECK(same_tables(a, b));
  CHECK(ok(ct_table_admission(&kk, &counted, b)) && kk == 3 && counted == 1);
  /* Training on from both gives the same numbers (the momentum stamps came along). */
  update_ids(a, all, 8, 3, 0.5f);
  update_ids(b, all, 8, 3, 0.5f);
  CHECK(same_tables(a, b));

  /* Bad imports change nothing. */
  {
    float nan_row[3] = {0, NAN, 0}, st[3] = {0, 0, 0};
    int64_t dup[2] = {50, 50}, id = 51, late = 1000;
    float two[6] = {0, 0, 0, 0, 0, 0};
    ct_table_stats s1, s2;
    CHECK(ok(ct_table_stats_get(&s1, b)));
    CHECK(fails_with(ct_table_import(b, 1, &id, nan_row, st, NULL, NULL, NULL, NULL), "NaN"));
    CHECK(fails_with(ct_table_import(b, 2, dup, two, two, NULL, NULL, NULL, NULL), "not distinct"));
    CHECK(fails_with(ct_table_import(b, 1, &id, st, NULL, NULL, NULL, NULL, NULL), "state0 is NULL"));
    CHECK(fails_with(ct_table_import(b, 1, &id, st, st, NULL, &late, NULL, NULL), "beyond the step"));
    CHECK(fails_with(ct_table_import_counts(b, 1, &all[0], &late), "have rows"));
    CHECK(ok(ct_table_stats_get(&s2, b)) && s1.size == s2.size);
  }
  /* An aborted save is an error. */
  collected_free(&k);
  memset(&k, 0, sizeof k);
  k.dim = 3;
  k.abort_at = 2;
  CHECK(fails_with(ct_table_save(a, 4, collect_sink, (uintptr_t)&k), "aborted: "));
  CHECK(fails_with(ct_table_save(a, 0, collect_sink, (uintptr_t)&k), "chunk_rows"));
  collected_free(&k);

  /* Swap: only between compatible tables. */
  cfg.dim = 4;
  CHECK(ok(ct_table_new(&c, "save-c", &cfg)));
  CHECK(fails_with(ct_table_swap(a, c), "invalid argument: "));
  CHECK(ok(ct_table_swap(a, b)));
  CHECK(same_tables(a, b));
  test_swap_states(flags);

  /* Eviction, removal and compaction keep the rest intact. */
  CHECK(ok(ct_table_evict(&t1, &t2, &n, a, CT_EVICT_LRU, 4)) && n == 2);
  ct_tensor_free(t1);
  ct_tensor_free(t2);
  CHECK(ok(ct_table_evict(NULL, NULL, &n, b, CT_EVICT_LRU, 4)) && n == 2);
  CHECK(same_tables(a, b));
  ki = ids_tensor(some, 1);
  CHECK(ok(ct_table_remove(&t1, &t2, a, ki)));
  ct_tensor_free(t1);
  ct_tensor_free(t2);
  CHECK(ok(ct_table_delete(NULL, b, ki)));
  ct_tensor_free(ki);
  CHECK(ok(ct_table_compact(a)));
  CHECK(same_tables(a, b));
  CHECK(fails_with(ct_table_evict(NULL, NULL, NULL, a, 9, 1), "unknown eviction policy"));

  /* Deltas: after a mark, one update gives its rows; a deletion its id. */
  {
    ct_tensor di, dr, ds[2] = {NULL, NULL}, dm, dd;
    int64_t step = 0, m = 0, d = 0, two[2] = {8, 9};
    CHECK(ok(ct_table_delta(&di, &dr, ds, 2, &dm, &dd, &step, NULL, NULL, NULL, a, 1)));
    ct_tensor_free(di);
    ct_tensor_free(dr);
    ct_tensor_free(ds[0]);
    ct_tensor_free(dm);
    ct_tensor_free(dd);
    CHECK(ok(ct_table_set_admission(a, 0))); /* (with admission on, 9 would not get a row) */
    update_ids(a, two, 2, 3, 1.0f);
    ki = ids_tensor(two, 1);
    CHECK(ok(ct_table_delete(NULL, a, ki)));
    ct_tensor_free(ki);
    CHECK(fails_with(ct_table_delta(&di, &dr, ds, 0, &dm, &dd, &step, NULL, NULL, NULL, a, 1), "room"));
    CHECK(ok(ct_table_delta(&di, &dr, ds, 2, &dm, &dd, &step, NULL, NULL, NULL, a, 0)));
    CHECK(ok(ct_tensor_numel(&m, di)) && m == 1 && ok(ct_tensor_numel(&d, dd)) && d == 1);
    ct_tensor_free(di);
    ct_tensor_free(dr);
    ct_tensor_free(ds[0]);
    ct_tensor_free(dm);
    ct_tensor_free(dd);
  }
  CHECK(ok(ct_table_close(a)));
  CHECK(fails_with(ct_table_save(a, 4, collect_sink, 0), "closed: "));
  CHECK(fails_with(ct_table_compact(a), "closed: "));
  CHECK(ok(ct_table_close(b)));
  CHECK(ok(ct_table_close(c)));
  ct_table_free(a);
  ct_table_free(b);
  ct_table_free(c);
}

/* A save streams the rows in row-index order, in chunks of chunk_rows (one empty chunk for an
 * empty table, none extra when the count is a multiple of it), whether the walk places ids at
 * their rows (few free rows) or sorts them (most rows free: 30 of 40 deleted). */
static void test_save_order(void) {
  ct_table_config cfg = ones_config(2, CT_OPT_ADAGRAD, 0.5);
  ct_table t = NULL;
  collected k;
  cfg.opt_params[3] = 1e-10; /* eps */
  int64_t ids[40], rows[40], n = 0;
  ct_tensor ki, out = NULL;
  for (int i = 0; i < 40; i++) ids[i] = (int64_t)((i * 7919) % 40) * 1000003 - 17;
  CHECK(ok(ct_table_new(&t, "save-order", &cfg)));
  memset(&k, 0, sizeof k);
  k.dim = 2;
  CHECK(ok(ct_table_save(t, 4, collect_sink, (uintptr_t)&k)) && k.rows == 0 && k.calls == 2);
  collected_free(&k);
  ki = ids_tensor(ids, 40);
  CHECK(ok(ct_table_lookup(&out, t, ki)));
  ct_tensor_free(out);
  for (int pass = 0; pass < 2; pass++) { /* 40 rows of 40, then 10 of 40 */
    const int64_t m = pass == 0 ? 40 : 10;
    const int64_t *left = pass == 0 ? ids : ids + 30;
    const int64_t cr[2] = {8, 7};
    for (int c = 0; c < 2; c++) {
      memset(&k, 0, sizeof k);
      k.dim = 2;
      CHECK(ok(ct_table_save(t, cr[c], collect_sink, (uintptr_t)&k)) && k.rows == m && k.seen_rows == m);
      CHECK(k.calls == (m + cr[c] - 1) / cr[c] + 1);
      if (k.ids == NULL) continue; /* the save failed (reported above) */
      ct_tensor kt = ids_tensor(k.ids, m);
      CHECK(ok(ct_table_indices(&out, t, kt, 0)));
      CHECK(ok(ct_tensor_copy_to(rows, (size_t)m * sizeof(int64_t), out, CT_INT64)));
      ct_tensor_free(out);
      ct_tensor_free(kt);
      int good = 1;
      for (int64_t i = 0; i < m; i++) good &= rows[i] >= 0 && (i == 0 || rows[i] > rows[i - 1]);
      for (int64_t i = 0; i < m; i++) { /* the ids saved are the ids left */
        int found = 0;
        for (int64_t j = 0; j < m; j++) found |= k.ids[j] == left[i];
        good &= found;
      }
      CHECK(good);
      collected_free(&k);
    }
    if (pass == 0) {
      ct_tensor kd = ids_tensor(ids, 30);
      CHECK(ok(ct_table_delete(&n, t, kd)) && n == 30);
      ct_tensor_free(kd);
    }
  }
  ct_tensor_free(ki);
  ct_table_free(t);
}

static void test_save_import(void) {
  test_save_import_one(CT_TABLE_TRACK_ACCESS);
  test_save_import_one(CT_TABLE_TENSOR_KERNELS | CT_TABLE_TRACK_ACCESS);
}

/* Without CT_TABLE_TRACK_ACCESS a table keeps no last steps and frequencies: 8 bytes a row
 * less, and what needs them fails (leaving the table as it was). */
static void test_access_opt_in(void) {
  ct_table plain = NULL, tracked = NULL;
  ct_table_config cfg = config(4, CT_OPT_SGD);
  cfg.opt_params[0] = 0.1;
  cfg.block_rows = 64;
  CHECK(ok(ct_table_new(&plain, "access-plain", &cfg)));
  cfg.flags = CT_TABLE_TRACK_ACCESS;
  CHECK(ok(ct_table_new(&tracked, "access-tracked", &cfg)));
  int64_t ids[1000];
  for (int i = 0; i < 1000; i++) ids[i] = (int64_t)i * 7919 - 3000;
  update_ids(plain, ids, 1000, 4, 0.5f);
  update_ids(tracked, ids, 1000, 4, 0.5f);
  ct_table_stats sp, st;
  CHECK(ok(ct_table_stats_get(&sp, plain)) && ok(ct_table_stats_get(&st, tracked)));
  CHECK(sp.size == 1000 && st.size == 1000 && sp.capacity == st.capacity);
  CHECK(st.bytes - sp.bytes >= 8 * st.capacity); /* the tracked table's 8 bytes a row */
  ct_tensor i = NULL, l = NULL, f = NULL;
  int64_t n = -1;
  CHECK(fails_with(ct_table_metadata(&i, &l, &f, plain), "CT_TABLE_TRACK_ACCESS"));
  CHECK(i == NULL && l == NULL && f == NULL);
  for (int32_t p = CT_EVICT_TTL; p <= CT_EVICT_BYTES; p++) {
    CHECK(fails_with(ct_table_evict(&i, NULL, &n, plain, p, 0), "CT_TABLE_TRACK_ACCESS"));
  }
  CHECK(ok(ct_table_stats_get(&sp, plain)) && sp.size == 1000);
  CHECK(ok(ct_table_metadata(&i, &l, &f, tracked)));
  ct_tensor_free(i);
  ct_tensor_free(l);
  ct_tensor_free(f);
  CHECK(ok(ct_table_evict(NULL, NULL, &n, tracked, CT_EVICT_LRU, 10)) && n == 990);
  /* A byte budget compacts, also when it evicts nothing. */
  CHECK(ok(ct_table_stats_get(&st, tracked)) && st.size == 10);
  CHECK(ok(ct_table_evict(NULL, NULL, &n, tracked, CT_EVICT_BYTES, INT64_MAX)) && n == 0);
  CHECK(ok(ct_table_stats_get(&sp, tracked)) && sp.size == 10 && sp.bytes < st.bytes && sp.capacity < st.capacity);
  CHECK(ok(ct_table_close(plain)) && ok(ct_table_close(tracked)));
  ct_table_free(plain);
  ct_table_free(tracked);
}

/* ---- row metadata across the 2^32 step boundary ---------------------------------------------
 * Last steps are stored as 32-bit offsets from a base that follows the step counter (the largest
 * multiple of 2^31 at most step - 2^31, 0 below step 2^32; see csrc/table/meta.h): rows seen within
 * the last 2^31 steps read back exactly, older rows as the base. */
#define P31 ((int64_t)1 << 31)
#define P32 ((int64_t)1 << 32)

static void lookup_id(ct_table t, int64_t id) {
  ct_tensor k = ids_tensor(&id, 1), r = NULL;
  CHECK(ok(ct_table_lookup(&r, t, k)));
  ct_tensor_free(r);
  ct_tensor_free(k);
}

typedef ct_error (*metadata_fn)(ct_tensor *, ct_tensor *, ct_tensor *, ct_table);

/* The metadata of t (at most cap rows) as read reads it (ct_table_metadata or _unsorted) into
 * ids, last and freq; returns the row count. */
static int64_t metadata_by(metadata_fn read, ct_table t, int64_t *ids, int64_t *last, int64_t *freq, int64_t cap) {
  ct_tensor ti = NULL, tl = NULL, tf = NULL;
  int64_t m = -1;
  if (!ok(read(&ti, &tl, &tf, t))) return -1;
  if (ok(ct_tensor_numel(&m, ti)) && m <= cap) {
    ok(ct_tensor_copy_to(ids, (size_t)m * sizeof(int64_t), ti, CT_INT64));
    ok(ct_tensor_copy_to(last, (size_t)m * sizeof(int64_t), tl, CT_INT64));
    ok(ct_tensor_copy_to(freq, (size_t)m * sizeof(int64_t), tf, CT_INT64));
  }
  ct_tensor_free(ti);
  ct_tensor_free(tl);
  ct_tensor_free(tf);
  return m;
}

/* The metadata of t (at most cap rows), ids ascending, into ids, last and freq; returns the row
 * count. */
static int64_t metadata(ct_table t, int64_t *ids, int64_t *last, int64_t *freq, int64_t cap) {
  return metadata_by(ct_table_metadata, t, ids, last, freq, cap);
}

/* TTL-evicts rows more than ttl steps old: 1 if exactly the n ids want went. */
static int evicts(ct_table t, int64_t ttl, const int64_t *want, int64_t n) {
  ct_tensor ti = NULL;
  int64_t got = -1, ids[8];
  int good = ok(ct_table_evict(&ti, NULL, &got, t, CT_EVICT_TTL, ttl)) && got == n && n <= 8 &&
             ok(ct_tensor_copy_to(ids, (size_t)n * sizeof(int64_t), ti, CT_INT64)) &&
             (n == 0 || memcmp(ids, want, (size_t)n * sizeof(int64_t)) == 0);
  ct_tensor_free(ti);
  return good;
}

static void test_metadata_steps(void) {
  ct_table a = NULL, b = NULL;
  ct_table_config cfg = config(2, CT_OPT_SGD);
  const int64_t one = 1, two = 2, six = 6, gone13[2] = {1, 3}, gone24[2] = {2, 4}, five = 5;
  int64_t ids[8], last[8], freq[8], ib[8], lb[8], fb[8], i;
  collected k;
  cfg.opt_params[0] = 0.1;
  cfg.opt_params[1] = 0.9; /* momentum: one state and stamps, saved and imported too */
  cfg.flags = CT_TABLE_TRACK_ACCESS;
  CHECK(ok(ct_table_new(&a, "steps-a", &cfg)));
  CHECK(ok(ct_table_new(&b, "steps-b", &cfg)));
  CHECK(ok(ct_table_set_step(a, 9)));
  update_ids(a, &one, 1, 2, 1.0f); /* step 10 */
  CHECK(ok(ct_table_set_step(a, P32 - 3)));
  for (i = 0; i < 3; i++) update_ids(a, &two, 1, 2, 1.0f); /* up to step 2^32: the base moves to 2^31 */
  lookup_id(a, 3);                                         /* inserted at step 2^32 */
  for (i = 0; i < 5; i++) update_ids(a, &two, 1, 2, 1.0f); /* up to 2^32 + 5 */
  lookup_id(a, 4);
  lookup_id(a, 2); /* present: the shared-lock path */
  CHECK(metadata(a, ids, last, freq, 8) == 4 && ids[0] == 1 && ids[3] == 4);
  CHECK(last[0] == P31 && freq[0] == 1); /* seen at step 10, 2^31 + 5 steps ago: the base */
  CHECK(last[1] == P32 + 5 && freq[1] == 9);
  CHECK(last[2] == P32 && freq[2] == 1 && last[3] == P32 + 5 && freq[3] == 1);

  CHECK(ok(ct_table_set_step(a, P32 + 1000)));
  lookup_id(a, 5);
  CHECK(ok(ct_table_set_step(a, P32 + P31 + 100))); /* the base moves to 2^32 */
  update_ids(a, &six, 1, 2, 1.0f);                  /* step 2^32 + 2^31 + 101 */
  CHECK(metadata(a, ids, last, freq, 8) == 6 && ids[5] == 6);
  CHECK(last[0] == P32);                                              /* id 1: the base */
  CHECK(last[1] == P32 + 5 && last[2] == P32 && last[3] == P32 + 5); /* at or above it: exact */
  CHECK(last[4] == P32 + 1000 && last[5] == P32 + P31 + 101 && freq[5] == 1);

  /* A save imported at the same step reads back the same metadata. */
  memset(&k, 0, sizeof k);
  k.dim = 2;
  CHECK(ok(ct_table_save(a, 4, collect_sink, (uintptr_t)&k)) && k.step == P32 + P31 + 101);
  CHECK(ok(ct_table_set_step(b, k.step)));
  CHECK(ok(ct_table_import(b, k.rows, k.ids, k.emb, k.s0, NULL, k.last, k.freq, k.stamp)));
  CHECK(metadata(b, ib, lb, fb, 8) == 6 && memcmp(ids, ib, 6 * sizeof(int64_t)) == 0 &&
        memcmp(last, lb, 6 * sizeof(int64_t)) == 0 && memcmp(freq, fb, 6 * sizeof(int64_t)) == 0);
  CHECK(same_tables(a, b));
  collected_free(&k);
  /* Imported values are clamped: a last step below the base reads as the base, a frequency
   * beyond 32 bits as 2^32 - 1, which further lookups do not wrap. */
  {
    const int64_t id = 7, old = 10, many = (int64_t)1 << 40;
    const float row[2] = {0, 0};
    CHECK(ok(ct_table_import(b, 1, &id, row, row, NULL, &old, &many, &old)));
    CHECK(metadata(b, ib, lb, fb, 8) == 7 && ib[6] == 7 && lb[6] == P32 && fb[6] == P32 - 1);
    lookup_id(b, 7);
    CHECK(metadata(b, ib, lb, fb, 8) == 7 && lb[6] == P32 + P31 + 101 && fb[6] == P32 - 1);
  }

  /* TTL eviction sees the same ages: ids 1 and 3 are 2^31 + 101 steps old (id 1 by its base),
   * ids 2 and 4 2^31 + 96, id 5 2^31 - 899, id 6 none. */
  CHECK(evicts(a, P31 + 101, NULL, 0));
  CHECK(evicts(a, P31 + 96, gone13, 2));
  CHECK(evicts(a, P31 - 899, gone24, 2));
  CHECK(evicts(a, P31 - 900, &five, 1));
  CHECK(metadata(a, ids, last, freq, 8) == 1 && ids[0] == 6);
  CHECK(ok(ct_table_close(a)));
  CHECK(ok(ct_table_close(b)));
  ct_table_free(a);
  ct_table_free(b);
}

/* ---- eviction's two phases --------------------------------------------------------------------
 * Eviction chooses its rows under the shared lock and takes them under the exclusive one. The
 * test build (CT_TEST_HOOKS) calls ct_test_evict_between_phases in between, holding no lock:
 * what the hook does there is what another thread could do. */
extern void (*ct_test_evict_between_phases)(void);

enum { HOOK_TOUCH, HOOK_INSERT, HOOK_DELETE, HOOK_REBASE, HOOK_CLOSE };
static ct_table hook_table;
static int hook_action;

static void between_phases(void) {
  const int64_t touched[2] = {1, 2}, fresh[2] = {100, 101}, gone = 10;
  ct_tensor k = NULL, r = NULL;
  switch (hook_action) {
    case HOOK_TOUCH: /* a training lookup of ids 1 and 2, at step 20 */
      k = ids_tensor(touched, 2);
      CHECK(ok(ct_table_lookup(&r, hook_table, k)));
      break;
    case HOOK_INSERT:
      k = ids_tensor(fresh, 2);
      CHECK(ok(ct_table_lookup(&r, hook_table, k)));
      break;
    case HOOK_DELETE: /* a remap: the choice is made again */
      k = ids_tensor(&gone, 1);
      CHECK(ok(ct_table_delete(NULL, hook_table, k)));
      break;
    case HOOK_REBASE: /* the metadata's base moves: the choice is made again */
      CHECK(ok(ct_table_set_step(hook_table, P32)));
      break;
    default:
      CHECK(ok(ct_table_close(hook_table)));
  }
  ct_tensor_free(r);
  ct_tensor_free(k);
}

/* A table holding ids 1..10, id i last seen (once) at step i, now at step 20; evicts by
 * policy(param) with action between the phases: 1 if exactly the n ids want went. */
static int evicts_with(int action, int32_t policy, int64_t param, const int64_t *want, int64_t n) {
  ct_table_config cfg = config(2, CT_OPT_SGD);
  ct_tensor ti = NULL;
  int64_t got = -1, ids[10] = {0}, i;
  int good;
  cfg.opt_params[0] = 0.1;
  cfg.flags = CT_TABLE_TRACK_ACCESS;
  CHECK(ok(ct_table_new(&hook_table, "evict-phases", &cfg)));
  for (i = 1; i <= 10; i++) {
    CHECK(ok(ct_table_set_step(hook_table, i)));
    lookup_id(hook_table, i);
  }
  CHECK(ok(ct_table_set_step(hook_table, 20)));
  hook_action = action;
  ct_test_evict_between_phases = between_phases;
  if (action == HOOK_CLOSE) {
    good = fails_with(ct_table_evict(&ti, NULL, &got, hook_table, policy, param), "closed") && ti == NULL;
  } else {
    good = ok(ct_table_evict(&ti, NULL, &got, hook_table, policy, param)) && got == n &&
           ok(ct_tensor_copy_to(ids, (size_t)n * sizeof(int64_t), ti, CT_INT64)) &&
           memcmp(ids, want, (size_t)n * sizeof(int64_t)) == 0;
  }
  ct_test_evict_between_phases = NULL;
  ct_tensor_free(ti);
  ct_error_free(ct_table_close(hook_table)); /* HOOK_CLOSE: closed already */
  ct_table_free(hook_table);
  return good;
}

static void test_evict_phases(void) {
  const int64_t w1_5[5] = {1, 2, 3, 4, 5}, w3_7[5] = {3, 4, 5, 6, 7}, w1_4[4] = {1, 2, 3, 4};
  const int64_t w1_10[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  /* rows trained in between stay (keep-N by rank, TTL by age) */
  CHECK(evicts_with(HOOK_TOUCH, CT_EVICT_LRU, 5, w1_5 + 2, 3));
  CHECK(evicts_with(HOOK_TOUCH, CT_EVICT_TTL, 12, w3_7, 5));
  CHECK(evicts_with(HOOK_TOUCH, CT_EVICT_LFU, 5, w1_5 + 2, 3)); /* ids 1 and 2 now seen twice */
  /* rows inserted in between are not candidates: the chosen five go, seven rows stay */
  CHECK(evicts_with(HOOK_INSERT, CT_EVICT_LRU, 5, w1_5, 5));
  /* chosen again after a delete (9 rows: 4 go) or a rebase (at step 2^32 every row is old) */
  CHECK(evicts_with(HOOK_DELETE, CT_EVICT_LRU, 5, w1_4, 4));
  CHECK(evicts_with(HOOK_REBASE, CT_EVICT_TTL, 12, w1_10, 10));
  CHECK(evicts_with(HOOK_CLOSE, CT_EVICT_LRU, 5, NULL, 0));
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Copies an int64 tensor of n elements out and frees it; 0 if its size differs. */
static int take_ids(ct_tensor t, int64_t *out, int64_t n) {
  int64_t m = -1;
  int r = ok(ct_tensor_numel(&m, t)) && m == n && ok(ct_tensor_copy_to(out, (size_t)n * sizeof(int64_t), t, CT_INT64));
  ct_tensor_free(t);
  return r;
}

/* Every output ordered by id (export, metadata, delta, eviction) lists the ids ascending in
 * signed order, extremes included; this build sorts them all by radix (CT_RADIX_MIN=2). */
static void test_id_order(void) {
  enum { N = 5000 };
  static int64_t ids[N], want[N], got[N];
  const int64_t ext[] = {INT64_MIN, INT64_MIN + 1, -4294967296LL, -1, 0, 1, 4294967296LL, INT64_MAX - 1, INT64_MAX};
  const int next = (int)(sizeof ext / sizeof ext[0]);
  uint64_t r = 99;
  for (int i = 0; i < N; i++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    ids[i] = i < next ? ext[i] : i % 3 == 0 ? (int64_t)(r >> 40) - (1 << 23) : (int64_t)(r ^ (r >> 31));
  }
  memcpy(want, ids, sizeof ids);
  qsort(want, N, sizeof want[0], cmp_i64);
  int distinct = 1;
  for (int i = 1; i < N; i++) distinct &= want[i] != want[i - 1];
  CHECK(distinct);
  ct_table t = NULL;
  ct_table_config cfg = config(2, CT_OPT_SGD);
  cfg.opt_params[0] = 0.1;
  cfg.flags = CT_TABLE_TRACK_ACCESS;
  ct_tensor k = ids_tensor(ids, N), rows = NULL, x = NULL, y = NULL, z = NULL, st[1] = {NULL}, del = NULL;
  CHECK(ok(ct_table_new(&t, "id-order", &cfg)) && ok(ct_table_lookup(&rows, t, k)));
  ct_tensor_free(rows);
  CHECK(ok(ct_table_export(&x, &rows, st, 1, NULL, t)) && take_ids(x, got, N) && memcmp(got, want, sizeof got) == 0);
  ct_tensor_free(rows);
  ct_tensor_free(st[0]);
  CHECK(ok(ct_table_metadata(&x, &y, &z, t)) && take_ids(x, got, N) && memcmp(got, want, sizeof got) == 0);
  ct_tensor_free(y);
  ct_tensor_free(z);
  CHECK(ok(ct_table_delta(&x, &rows, st, 1, &y, &del, NULL, NULL, NULL, NULL, t, 1)) && take_ids(x, got, N) &&
        memcmp(got, want, sizeof got) == 0);
  ct_tensor_free(rows);
  ct_tensor_free(st[0]);
  ct_tensor_free(y);
  ct_tensor_free(del);
  CHECK(ok(ct_table_evict(&x, &rows, NULL, t, CT_EVICT_LRU, 0)) && take_ids(x, got, N) &&
        memcmp(got, want, sizeof got) == 0);
  ct_tensor_free(rows);
  /* the delta's deletions: ascending too */
  CHECK(ok(ct_table_delta(&x, &rows, st, 1, &y, &del, NULL, NULL, NULL, NULL, t, 0)) && take_ids(del, got, N) &&
        memcmp(got, want, sizeof got) == 0);
  ct_tensor_free(x);
  ct_tensor_free(rows);
  ct_tensor_free(st[0]);
  ct_tensor_free(y);
  ct_tensor_free(k);
  CHECK(ok(ct_table_close(t)));
  ct_table_free(t);
}

/* ct_table_remove_unchanged removes only rows whose metadata is still what the caller read. */
static void test_remove_unchanged(void) {
  ct_table t = NULL, plain = NULL;
  ct_table_config cfg = config(2, CT_OPT_SGD);
  int64_t ids[8], last[8], freq[8], got[4] = {0}, n = -1, i;
  const float wrong[2] = {0, 0};
  ct_tensor k, l, f, l4, bad, gi = NULL, gr = NULL;
  cfg.opt_params[0] = 0.1;
  CHECK(ok(ct_table_new(&plain, "remove-plain", &cfg)));
  cfg.flags = CT_TABLE_TRACK_ACCESS;
  CHECK(ok(ct_table_new(&t, "remove-unchanged", &cfg)));
  for (i = 1; i <= 4; i++) {
    CHECK(ok(ct_table_set_step(t, i)));
    lookup_id(t, i);
  }
  CHECK(metadata(t, ids, last, freq, 8) == 4 && ids[0] == 1 && ids[3] == 4);
  CHECK(ok(ct_table_set_step(t, 9)));
  lookup_id(t, 2); /* trained since the read: stays */
  freq[2]++;       /* id 3: not what the table holds: stays */
  ids[4] = 7;      /* absent: ignored */
  last[4] = freq[4] = 0;
  k = ids_tensor(ids, 5);
  l = ids_tensor(last, 5);
  f = ids_tensor(freq, 5);
  l4 = ids_tensor(last, 4);
  bad = rows_tensor(wrong, 1, 2);
  /* bad input: an error, nothing removed */
  CHECK(fails_with(ct_table_remove_unchanged(&gi, &gr, t, k, l4, f), "5 keys need as many last steps"));
  CHECK(fails_with(ct_table_remove_unchanged(&gi, &gr, t, k, bad, f), "last_step must be int64"));
  CHECK(fails_with(ct_table_remove_unchanged(&gi, &gr, t, k, l, NULL), "NULL"));
  CHECK(fails_with(ct_table_remove_unchanged(&gi, &gr, plain, k, l, f), "CT_TABLE_TRACK_ACCESS"));
  CHECK(gi == NULL && gr == NULL && metadata(t, ids, last, freq, 8) == 4);
  CHECK(ok(ct_table_remove_unchanged(&gi, &gr, t, k, l, f)));
  CHECK(ok(ct_tensor_numel(&n, gi)) && n == 2 && ok(ct_tensor_copy_to(got, 2 * sizeof(int64_t), gi, CT_INT64)));
  CHECK(got[0] == 1 && got[1] == 4);
  CHECK(ok(ct_tensor_numel(&n, gr)) && n == 4);
  CHECK(metadata(t, ids, last, freq, 8) == 2 && ids[0] == 2 && ids[1] == 3);
  ct_tensor_free(gi);
  ct_tensor_free(gr);
  ct_tensor_free(k);
  ct_tensor_free(l);
  ct_tensor_free(f);
  ct_tensor_free(l4);
  ct_tensor_free(bad);
  CHECK(ok(ct_table_close(t)) && ok(ct_table_close(plain)));
  ct_table_free(t);
  ct_table_free(plain);
}

/* A row's metadata. */
typedef struct {
  int64_t id, last, freq;
} meta_row;

static int cmp_meta_row(const void *a, const void *b) { return cmp_i64(&((const meta_row *)a)->id, &((const meta_row *)b)->id); }

/* The metadata of t (at most cap rows) as read gives it, into rows in that order; the count. */
static int64_t meta_rows(metadata_fn read, ct_table t, meta_row *rows, int64_t cap) {
  int64_t *v = malloc(3 * (size_t)cap * sizeof(int64_t)), m = metadata_by(read, t, v, v + cap, v + 2 * cap, cap);
  for (int64_t i = 0; i < m && m <= cap; i++) rows[i] = (meta_row){v[i], v[cap + i], v[2 * cap + i]};
  free(v);
  return m;
}

/* ct_table_metadata_unsorted gives the rows of ct_table_metadata, each with its last step and
 * frequency, in the order of their storage (here not by id), in a dense table and in one with
 * most rows deleted (whose id map is exported in its own order). */
static void test_metadata_unsorted(void) {
  enum { M = 1000 };
  static meta_row want[M], got[M];
  static int64_t ids[M];
  ct_table t = NULL;
  ct_table_config cfg = config(2, CT_OPT_SGD);
  cfg.opt_params[0] = 0.1;
  cfg.block_rows = 64;
  cfg.flags = CT_TABLE_TRACK_ACCESS;
  CHECK(ok(ct_table_new(&t, "metadata-unsorted", &cfg)));
  for (int i = 0; i < M; i++) ids[i] = (int64_t)(M - i) * 7919 - 3000; /* descending */
  for (int64_t step = 1; step <= 3; step++) { /* a spread of last steps and frequencies */
    int64_t n = 0, some[M];
    for (int i = 0; i < M; i++) {
      if (i % (step + 1) == 0 || step == 1) some[n++] = ids[i];
    }
    ct_tensor k = ids_tensor(some, n), r = NULL;
    CHECK(ok(ct_table_set_step(t, step)) && ok(ct_table_lookup(&r, t, k)));
    ct_tensor_free(r);
    ct_tensor_free(k);
  }
  for (int round = 0; round < 2; round++) {
    const int64_t m = round == 0 ? M : M / 10;
    CHECK(meta_rows(ct_table_metadata, t, want, M) == m && meta_rows(ct_table_metadata_unsorted, t, got, M) == m);
    int ascending = 1;
    for (int64_t i = 1; i < m; i++) ascending &= got[i - 1].id < got[i].id;
    CHECK(!ascending);
    qsort(got, (size_t)m, sizeof got[0], cmp_meta_row);
    CHECK(memcmp(got, want, (size_t)m * sizeof got[0]) == 0);
    int lasts = 0, freqs = 0; /* the last steps and frequencies seen: 1 to 3 */
    for (int64_t i = 0; i < m; i++) {
      lasts |= 1 << want[i].last;
      freqs |= 1 << want[i].freq;
    }
    CHECK(lasts == 14 && freqs == 14);
    if (round == 0) { /* keep every tenth row: the map is exported, not walked by index */
      int64_t n = 0, gone[M], count = -1;
      for (int i = 0; i < M; i++) {
        if (i % 10 != 0) gone[n++] = ids[i];
      }
      ct_tensor k = ids_tensor(gone, n);
      CHECK(ok(ct_table_delete(&count, t, k)) && count == n);
      ct_tensor_free(k);
    }
  }
  CHECK(ok(ct_table_close(t)));
  ct_table_free(t);
}

/* CT_TABLE_SEED_FROM_NAME: named tables of one seed start apart, the derived seed is reported
 * (without the flag) and reproduces the rows; an unnamed table keeps its seed. */
static void test_seed_from_name(void) {
  ct_table a = NULL, b = NULL, c = NULL, u = NULL;
  ct_table_config cfg = config(3, CT_OPT_NONE), got;
  cfg.seed = 0;
  cfg.flags = CT_TABLE_SEED_FROM_NAME;
  CHECK(ok(ct_table_new(&a, "seeded-a", &cfg)) && ok(ct_table_new(&b, "seeded-b", &cfg)));
  CHECK(ok(ct_table_new(&u, NULL, &cfg)));
  CHECK(ok(ct_table_config_get(&got, a)) && got.seed != 0 && got.flags == 0);
  ct_table_config again = got;
  CHECK(ok(ct_table_new(&c, "seeded-c", &again))); /* a's seed, as is */
  int64_t id = 42;
  ct_tensor k = ids_tensor(&id, 1), r = NULL;
  float ra[3], rb[3], rc[3], ru[3];
  CHECK(ok(ct_table_lookup(&r, a, k)) && take_floats(r, ra, 3));
  CHECK(ok(ct_table_lookup(&r, b, k)) && take_floats(r, rb, 3));
  CHECK(ok(ct_table_lookup(&r, c, k)) && take_floats(r, rc, 3));
  CHECK(ok(ct_table_lookup(&r, u, k)) && take_floats(r, ru, 3));
  CHECK(memcmp(ra, rb, sizeof ra) != 0 && memcmp(ra, rc, sizeof ra) == 0);
  CHECK(ok(ct_table_config_get(&got, u)) && got.seed == 0);
  ct_table ts[4] = {a, b, c, u};
  for (int i = 0; i < 4; i++) {
    CHECK(ok(ct_table_close(ts[i])));
    ct_table_free(ts[i]);
  }
  ct_tensor_free(k);
}

/* ct_table_read_state: rows and states of a few ids as the export gives them, zeros for absent
 * ids, nothing inserted; bad arguments refused. */
static void test_read_state(void) {
  ct_table t = NULL;
  ct_table_config cfg = config(2, CT_OPT_ADAGRAD);
  cfg.opt_params[0] = 0.5;
  cfg.opt_params[3] = 1e-10;
  CHECK(ok(ct_table_new(&t, NULL, &cfg)));
  int64_t ids[3] = {4, 99, 3};
  float g[4] = {1, 2, 3, 4};
  ct_tensor k2 = ids_tensor(ids + 1, 2), gr = rows_tensor(g, 2, 2), k = ids_tensor(ids, 3);
  int64_t two[2] = {4, 3};
  ct_tensor kk = ids_tensor(two, 2);
  CHECK(ok(ct_table_update(t, kk, gr)));
  ct_tensor rows = NULL, states[1] = {NULL}, found = NULL;
  CHECK(fails_with(ct_table_read_state(&rows, states, 0, &found, t, k), "invalid argument: "));
  CHECK(ok(ct_table_read_state(&rows, states, 1, &found, t, k)));
  float r[6], s[6];
  uint8_t f[3];
  CHECK(take_floats(rows, r, 6) && take_floats(states[0], s, 6));
  CHECK(ok(ct_tensor_copy_to(f, sizeof f, found, CT_BOOL)));
  ct_tensor_free(found);
  CHECK(f[0] == 1 && f[1] == 0 && f[2] == 1);
  /* Adagrad's sums: g^2 for 4 and 3, zeros for 99 */
  CHECK(s[0] == 1 && s[1] == 4 && s[2] == 0 && s[3] == 0 && s[4] == 9 && s[5] == 16);
  CHECK(r[2] == 0 && r[3] == 0);
  ct_table_stats st;
  CHECK(ok(ct_table_stats_get(&st, t)) && st.size == 2); /* 99 was not inserted */
  CHECK(ok(ct_table_close(t)));
  CHECK(fails_with(ct_table_read_state(&rows, states, 1, NULL, t, k2), "closed: "));
  ct_table_free(t);
  ct_tensor_free(k);
  ct_tensor_free(k2);
  ct_tensor_free(kk);
  ct_tensor_free(gr);
}

int main(void) {
  test_lifecycle();
  test_large_bags();
  test_seed_from_name();
  test_read_state();
  test_lookup_read_write();
  test_update_and_bad_input();
  test_set_lr();
  test_opt_params_positions();
  test_update_inserts_absent();
  test_kernels_agree();
  test_gather_widths();
  test_lanes_match_scalar();
  test_duplicates_across_batches();
  test_threads();
  test_prefetch();
  test_autograd();
  test_save_import();
  test_apply_delta();
  test_save_order();
  test_export_chunks();
  test_into();
  test_access_opt_in();
  test_metadata_steps();
  test_evict_phases();
  test_remove_unchanged();
  test_metadata_unsorted();
  test_id_order();
  CHECK(ct_live_handles() == 0);
  printf("table: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
