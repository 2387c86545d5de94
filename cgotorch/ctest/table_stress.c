/* table_stress.c: many threads on one embedding table at once, through the C ABI: every kind of
 * operation (lookups and reads, into tensors and into the caller's buffers, prefetches, some
 * discarded by another thread while their owner waits for them, updates, backward passes and
 * steps, writes, deletes, exports whole and in chunks, saves, deltas and their application,
 * eviction by each policy, removal, compaction, clear, rate changes, swaps) in a random mix,
 * then Close while they run, for four table configurations (optimizers with one and two
 * states, both layouts, the raw and the tensor kernels, admission). Built and run under
 * ThreadSanitizer by `make table-tsan` (it sees the C++ side's data races, where Go's race
 * detector sees none) and under AddressSanitizer by `make table-sanitize`.
 *
 * What it checks besides the sanitizers' reports:
 *   - while the table is open every call succeeds; once it is being closed, a call either
 *     succeeds or fails with "closed: ", and after Close every call fails so;
 *   - "pure" ids are only ever looked up, read, deleted and evicted, never trained or written,
 *     so every row any call returns for one (lookup, read, prefetch, export, save, eviction,
 *     removal) is its initial value, which depends only on (seed, id), or under admission a
 *     zero row: a row copied while another thread moved or reset it would show;
 *   - every row and optimizer state exported is finite, ids come out ascending, and after
 *     each phase the export, the stats and reads of every exported id agree;
 *   - every kind of operation ran. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgotorch.h"
#include "check.h"

enum {
  D = 8,          /* row width */
  THREADS = 6,    /* workers */
  ROUNDS = 3,     /* phases with the table open throughout (then one that closes it) */
  ITERS = 250,    /* operations per worker and phase */
  BATCH = 40,     /* ids per operation */
  TRAINED = 1500, /* ids 0..TRAINED-1 are trained and written */
  PURE = 600      /* ids PURE0 + 0..PURE-1 are only looked up, read, deleted and evicted */
};
#define PURE0 ((int64_t)1 << 40)
#define NAME "stress"

/* A table configuration the workers run against. */
struct setup {
  const char *name;
  int32_t optimizer;
  double params[4];
  int32_t layout;
  int32_t flags;
  int64_t admission; /* > 1: ids get rows at their k-th training lookup (zero rows before) */
};
static const struct setup setups[] = {
    {"adagrad", CT_OPT_ADAGRAD, {0.1, 0, 0, 1e-10}, CT_LAYOUT_SEPARATE, CT_TABLE_TRACK_ACCESS, 0},
    {"sgd-momentum-interleaved", CT_OPT_SGD, {0.05, 0.9, 0, 0}, CT_LAYOUT_INTERLEAVED, CT_TABLE_TRACK_ACCESS, 0},
    {"adam-tensor-kernels", CT_OPT_SPARSE_ADAM, {0.01, 0.9, 0.999, 1e-8}, CT_LAYOUT_SEPARATE,
     CT_TABLE_TRACK_ACCESS | CT_TABLE_TENSOR_KERNELS, 0},
    {"ftrl-admission", CT_OPT_FTRL, {0.1, 1, 0.01, 0.01}, CT_LAYOUT_SEPARATE, CT_TABLE_TRACK_ACCESS, 2},
};
static struct setup current; /* the one running (set while no worker runs) */
static ct_table spare;       /* a twin the table swaps its contents with (as a checkpoint load does) */

static float pure_init[PURE][D];  /* the initial rows of the pure ids (from a twin table) */
static atomic_int closing;        /* set before the table is closed */
static atomic_long bad;           /* failed checks in the workers */
static atomic_long closed_seen;   /* "closed: " errors the workers met */
static atomic_long kinds[29];     /* operations run, by kind (the branches of operate) */
static atomic_llong offered;      /* a prefetch id its owner waits for, which others may discard */
static atomic_long discarded_waits; /* waits another thread's discard ended (the new path) */

static void ran(int kind) { atomic_fetch_add(&kinds[kind], 1); }

static void fail(const char *what, ct_error err) {
  fprintf(stderr, "stress: %s%s%s\n", what, err ? ": " : "", err ? err : "");
  atomic_fetch_add(&bad, 1);
}

/* A call's error: none, or "closed: " once closing. Returns 1 when the call succeeded. */
static int call_ok(ct_error err, const char *what) {
  if (err == NULL) return 1;
  if (atomic_load(&closing) && strncmp(err, "closed: ", 8) == 0) {
    atomic_fetch_add(&closed_seen, 1);
  } else {
    fail(what, err);
  }
  ct_error_free(err);
  return 0;
}

static uint32_t next(uint32_t *r) {
  *r = *r * 1664525u + 1013904223u;
  return *r >> 8;
}

static ct_tensor tensor(const void *data, size_t bytes, int32_t dtype, int64_t n, int64_t d) {
  ct_tensor t = NULL;
  int64_t shape[2];
  shape[0] = n;
  shape[1] = d;
  if (!ok(ct_tensor_from_data(&t, data, bytes, dtype, shape, d ? 2 : 1))) fail("tensor", NULL);
  return t;
}

static int64_t numel(ct_tensor t) {
  int64_t n = -1;
  if (t && !ok(ct_tensor_numel(&n, t))) n = -1;
  return n;
}

/* Copies t (numel n, n at most cap) into out as dtype; 0 if that fails. */
static int copy_out(void *out, size_t elem, int64_t cap, ct_tensor t, int32_t dtype, int64_t *n) {
  *n = numel(t);
  if (*n < 0 || *n > cap) return 0;
  return ok(ct_tensor_copy_to(out, (size_t)*n * elem, t, dtype));
}

static int zeros(const float *row) {
  for (int j = 0; j < D; j++)
    if (row[j] != 0) return 0;
  return 1;
}

static int is_pure(int64_t id) { return id >= PURE0 && id < PURE0 + PURE; }

/* Checks the rows of ids that are pure against their initial values (found: NULL, or which
 * rows were found; the others must be zero rows). */
static void check_rows(const char *what, const int64_t *ids, const float *rows, const uint8_t *found, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float *row = rows + i * D;
    for (int j = 0; j < D; j++) {
      if (!isfinite(row[j])) {
        fail(what, "a row is not finite");
        return;
      }
    }
    if (!is_pure(ids[i])) continue;
    const float *want = pure_init[ids[i] - PURE0];
    for (int j = 0; j < D; j++) {
      const float w = found && !found[i] ? 0.0f : want[j];
      if (row[j] != w && !(current.admission > 1 && row[j] == 0 && zeros(row))) {
        fprintf(stderr, "stress: %s: id %lld col %d: %g, want %g\n", what, (long long)ids[i], j, row[j], w);
        atomic_fetch_add(&bad, 1);
        return;
      }
    }
  }
}

/* Takes rows [n, D] (and found [n] when given), checks them, frees them. */
static void take_rows(const char *what, const int64_t *ids, int64_t n, ct_tensor rows, ct_tensor found) {
  static _Thread_local float buf[BATCH * 4 * D];
  static _Thread_local uint8_t fb[BATCH * 4];
  int64_t m = 0, mf = 0;
  if (!copy_out(buf, sizeof(float), BATCH * 4 * D, rows, CT_FLOAT32, &m) || m != n * D ||
      (found && (!copy_out(fb, 1, BATCH * 4, found, CT_BOOL, &mf) || mf != n))) {
    fail(what, "unexpected result shape");
  } else {
    check_rows(what, ids, buf, found ? fb : NULL, n);
  }
  ct_tensor_free(rows);
  ct_tensor_free(found);
}

/* Export: ids ascending, every row and state finite (Adagrad's sums of squares also not
 * negative), pure rows initial. Returns the count; keep (may be NULL) gets the ids tensor. */
static int64_t check_export(ct_table t, const char *what, ct_tensor *keep) {
  ct_tensor ids = NULL, rows = NULL, states[2] = {NULL, NULL};
  if (!call_ok(ct_table_export(&ids, &rows, states, 2, NULL, t), what)) return -1;
  const int64_t n = numel(ids), cap = (n > 0 ? n : 1) * D;
  int64_t *iv = malloc((size_t)cap * sizeof(int64_t)), m = 0;
  float *rv = malloc((size_t)cap * sizeof(float)), *sv = malloc((size_t)cap * sizeof(float));
  if (!copy_out(iv, sizeof(int64_t), n, ids, CT_INT64, &m) || !copy_out(rv, sizeof(float), cap, rows, CT_FLOAT32, &m) ||
      m != n * D) {
    fail(what, "unexpected export shape");
  } else {
    for (int64_t i = 1; i < n; i++)
      if (iv[i - 1] >= iv[i]) {
        fail(what, "ids not ascending");
        break;
      }
    check_rows(what, iv, rv, NULL, n);
  }
  for (int k = 0; k < 2 && states[k]; k++) { /* [n, D] or [n, 1] */
    if (!copy_out(sv, sizeof(float), cap, states[k], CT_FLOAT32, &m) || (m != n * D && m != n)) {
      fail(what, "unexpected state shape");
      continue;
    }
    for (int64_t i = 0; i < m; i++)
      if (!isfinite(sv[i]) || (current.optimizer == CT_OPT_ADAGRAD && sv[i] < 0)) {
        fail(what, "a state is negative or not finite");
        break;
      }
  }
  free(iv);
  free(rv);
  free(sv);
  if (keep != NULL) {
    *keep = ids;
  } else {
    ct_tensor_free(ids);
  }
  ct_tensor_free(rows);
  ct_tensor_free(states[0]);
  ct_tensor_free(states[1]);
  return n;
}

struct save_ctx {
  int64_t rows;
  int bad_chunk;
  int64_t last_id; /* an export's: the last id seen */
};

/* A save's or an export's chunks (rows in order, and an export's ids ascending across chunks) */
static int32_t save_sink(uintptr_t ctx, const ct_table_chunk *c) {
  struct save_ctx *s = (struct save_ctx *)ctx;
  if (c->kind != CT_CHUNK_ROWS) return 0;
  if (c->offset != s->rows) s->bad_chunk = 1;
  if (c->stamp == NULL) /* an export */
    for (int64_t i = 0; i < c->count; i++) {
      if (s->rows + i > 0 && c->ids[i] <= s->last_id) s->bad_chunk = 1;
      s->last_id = c->ids[i];
    }
  s->rows += c->count;
  check_rows(c->stamp == NULL ? "export chunks" : "save", c->ids, c->rows, NULL, c->count);
  return 0;
}

/* Evicted or removed ids (ascending for eviction) and their rows. */
static void take_removed(const char *what, ct_tensor ids, ct_tensor rows, int ascending) {
  int64_t iv[TRAINED + PURE], n = 0, m = 0;
  static _Thread_local float rv[(TRAINED + PURE) * D];
  if (!copy_out(iv, sizeof(int64_t), TRAINED + PURE, ids, CT_INT64, &n) ||
      !copy_out(rv, sizeof(float), (TRAINED + PURE) * D, rows, CT_FLOAT32, &m) || m != n * D) {
    fail(what, "unexpected result shape");
  } else {
    for (int64_t i = 1; ascending && i < n; i++)
      if (iv[i - 1] >= iv[i]) fail(what, "ids not ascending");
    check_rows(what, iv, rv, NULL, n);
  }
  ct_tensor_free(ids);
  ct_tensor_free(rows);
}

/* Removes up to BATCH of the rows metadata (ids mi, last steps ml, frequencies mf) lists, if
 * unchanged since; frees the three. */
static void remove_unchanged(ct_table t, ct_tensor mi, ct_tensor ml, ct_tensor mf, uint32_t *r) {
  const int64_t n = numel(mi);
  int64_t *v = malloc((size_t)(n > 0 ? n : 1) * 3 * sizeof(int64_t)), sel[3][BATCH], m = 0, k = 0;
  if (!copy_out(v, sizeof(int64_t), n, mi, CT_INT64, &m) || !copy_out(v + n, sizeof(int64_t), n, ml, CT_INT64, &m) ||
      !copy_out(v + 2 * n, sizeof(int64_t), n, mf, CT_INT64, &m) || m != n) {
    fail("metadata", "unexpected result shape");
  } else {
    for (; k < BATCH && k < n; k++) {
      const int64_t i = (int64_t)(next(r) % (uint32_t)n);
      for (int c = 0; c < 3; c++) sel[c][k] = v[c * n + i];
    }
    ct_tensor ki = tensor(sel[0], (size_t)k * sizeof(int64_t), CT_INT64, k, 0);
    ct_tensor kl = tensor(sel[1], (size_t)k * sizeof(int64_t), CT_INT64, k, 0);
    ct_tensor kf = tensor(sel[2], (size_t)k * sizeof(int64_t), CT_INT64, k, 0), x = NULL, rows = NULL;
    if (call_ok(ct_table_remove_unchanged(&x, &rows, t, ki, kl, kf), "remove unchanged"))
      take_removed("remove unchanged", x, rows, 0);
    ct_tensor_free(ki);
    ct_tensor_free(kl);
    ct_tensor_free(kf);
  }
  free(v);
  ct_tensor_free(mi);
  ct_tensor_free(ml);
  ct_tensor_free(mf);
}

/* Applies a delta at the table's step: ids[1..n) deleted, ids[0] written (row vals, zero
 * states). Refused as behind when another thread's step came first, which races allow. */
static void apply_delta(ct_table t, const int64_t *ids, int64_t n, const float *vals) {
  static const float zeros[D];
  ct_table_stats s;
  if (!call_ok(ct_table_stats_get(&s, t), "stats")) return;
  ct_error e = ct_table_apply_delta(t, s.step, n - 1, ids + 1, 1, ids, vals, s.num_states > 0 ? zeros : NULL,
                                    s.num_states > 1 ? zeros : NULL, NULL, NULL, NULL, NULL);
  if (e != NULL && strstr(e, "behind the table's step") != NULL) {
    ct_error_free(e);
    return;
  }
  call_ok(e, "apply delta");
}

/* One random operation on t. */
static void operate(ct_table t, uint32_t *r) {
  int64_t ids[BATCH], n = 1 + next(r) % BATCH;
  const int pure = next(r) & 1;
  for (int64_t i = 0; i < n; i++) ids[i] = pure ? PURE0 + next(r) % PURE : (int64_t)(next(r) % TRAINED);
  float vals[BATCH * D];
  for (int64_t i = 0; i < n * D; i++) vals[i] = (float)(next(r) % 2001) / 1000.0f - 1.0f;
  ct_tensor k = tensor(ids, (size_t)n * sizeof(int64_t), CT_INT64, n, 0), rows = NULL, found = NULL, x = NULL;
  const uint32_t op = next(r) % 100;
  if (op < 20) { /* training lookup, into a tensor or the caller's buffer */
    ran(0);
    if (op & 1) {
      ran(24);
      if (call_ok(ct_table_lookup_into(vals, n * D, t, ids, n), "lookup into"))
        check_rows("lookup into", ids, vals, NULL, n);
    } else if (call_ok(ct_table_lookup(&rows, t, k), "lookup")) {
      take_rows("lookup", ids, n, rows, NULL);
    }
  } else if (op < 32) { /* read, likewise */
    ran(1);
    uint8_t fb[BATCH];
    if (op & 1) {
      ran(25);
      if (call_ok(ct_table_read_into(vals, n * D, fb, t, ids, n, CT_READ_ZEROS), "read into"))
        check_rows("read into", ids, vals, fb, n);
    } else if (call_ok(ct_table_read(&rows, &found, t, k, CT_READ_ZEROS), "read")) {
      take_rows("read", ids, n, rows, found);
    }
  } else if (op < 36) { /* prefetch, then wait */
    ran(2);
    int64_t id = -1;
    int32_t ready = 0;
    if (op & 1) {
      /* Discard the prefetch another thread offered, which its owner may be waiting for (or
       * have consumed already: "unknown prefetch: "); then offer one's own while waiting for
       * it, which another thread may discard: the wait then fails with "unknown prefetch: ". */
      const int64_t other = (int64_t)atomic_exchange(&offered, -1);
      if (other >= 0) {
        ct_error e = ct_table_prefetch_discard(t, other);
        if (e != NULL && strncmp(e, "unknown prefetch: ", 18) == 0) {
          ct_error_free(e);
        } else {
          call_ok(e, "prefetch discard");
        }
      }
      if (call_ok(ct_table_prefetch(&id, t, k, CT_READ_ZEROS), "prefetch")) {
        atomic_store(&offered, (long long)id);
        ct_error e = ct_table_prefetch_wait(&rows, &found, &ready, t, id, -1);
        long long mine = (long long)id;
        atomic_compare_exchange_strong(&offered, &mine, -1);
        if (e != NULL && strncmp(e, "unknown prefetch: ", 18) == 0) {
          /* discarded before the wait began, or while it waited */
          if (strstr(e, "discarded while waited for") != NULL) atomic_fetch_add(&discarded_waits, 1);
          ct_error_free(e);
        } else if (call_ok(e, "prefetch wait")) {
          if (ready) take_rows("prefetch", ids, n, rows, found);
          else fail("prefetch wait", "not ready without a time limit");
        }
      }
    } else if (call_ok(ct_table_prefetch(&id, t, k, CT_READ_ZEROS), "prefetch") &&
               call_ok(ct_table_prefetch_wait(&rows, &found, &ready, t, id, -1), "prefetch wait")) {
      if (ready) take_rows("prefetch", ids, n, rows, found);
      else fail("prefetch wait", "not ready without a time limit");
    }
  } else if (op < 40) { /* autograd lookup (training: inserts), and a backward pass for trained ids */
    ran(3);
    ct_table_forward_options o;
    memset(&o, 0, sizeof o);
    o.train = 1;
    o.fused = (int32_t)(op & 1);
    if (call_ok(ct_table_forward(&rows, t, k, &o), "forward")) {
      if (pure) {
        take_rows("forward", ids, n, rows, NULL);
      } else { /* a backward pass: fused, a step at once; else pending until a step */
        ran(21 + o.fused);
        ct_tensor g = tensor(vals, (size_t)(n * D) * sizeof(float), CT_FLOAT32, n, D);
        if (call_ok(ct_tensor_backward(rows, g, 0), "backward") && !o.fused) call_ok(ct_table_step(NULL, t), "step");
        ct_tensor_free(g);
        ct_tensor_free(rows);
      }
    }
  } else if (op < 56 && !pure) { /* update and write: trained ids only */
    ran(4);
    ct_tensor v = tensor(vals, (size_t)(n * D) * sizeof(float), CT_FLOAT32, n, D);
    if (op == 49) { /* a learning-rate schedule's step (SGD momentum: every row caught up) */
      ran(26);
      call_ok(ct_table_set_lr(t, 0.005 + (double)(next(r) % 10) / 1000.0), "set lr");
    } else if (op < 50) {
      call_ok(ct_table_update(t, k, v), "update");
    } else if (op == 55) { /* a replica's delta: ids[1..n) deleted, ids[0] written, the step */
      ran(28);
      apply_delta(t, ids, n, vals);
    } else {
      ran(16);
      call_ok(ct_table_write(t, k, v), "write");
    }
    ct_tensor_free(v);
  } else if (op < 64) {
    ran(5);
    call_ok(ct_table_delete(NULL, t, k), "delete");
  } else if (op < 67) {
    ran(6);
    if (call_ok(ct_table_indices(&x, t, k, 0), "indices")) ct_tensor_free(x);
  } else if (op < 71) {
    ran(7);
    check_export(t, "export", NULL);
  } else if (op < 74) {
    ran(8);
    struct save_ctx s = {0, 0, 0};
    if (op & 1) {
      ran(23);
      if (call_ok(ct_table_export_chunks(t, 48, save_sink, (uintptr_t)&s), "export chunks") && s.bad_chunk)
        fail("export chunks", "chunk offsets or id order");
    } else if (call_ok(ct_table_save(t, 64, save_sink, (uintptr_t)&s), "save") && s.bad_chunk) {
      fail("save", "chunk offsets");
    }
  } else if (op < 77) {
    ran(9);
    ct_tensor dm = NULL, dd = NULL, st[2] = {NULL, NULL};
    if (call_ok(ct_table_delta(&x, &rows, st, 2, &dm, &dd, NULL, NULL, NULL, NULL, t, (int32_t)(op & 1)), "delta")) {
      take_removed("delta", x, rows, 1);
      ct_tensor_free(st[0]);
      ct_tensor_free(st[1]);
      ct_tensor_free(dm);
      ct_tensor_free(dd);
    }
  } else if (op < 85) { /* eviction by each policy */
    ran(10);
    static const int32_t policy[4] = {CT_EVICT_TTL, CT_EVICT_LRU, CT_EVICT_LFU, CT_EVICT_BYTES};
    static const int64_t param[4] = {30, 1200, 1200, 1200 * 120};
    const int p = (int)(op % 4);
    ran(17 + p);
    if (call_ok(ct_table_evict(&x, &rows, NULL, t, policy[p], param[p]), "evict")) take_removed("evict", x, rows, 1);
  } else if (op < 89) {
    ran(11);
    if (call_ok(ct_table_remove(&x, &rows, t, k), "remove")) take_removed("remove", x, rows, 0);
  } else if (op < 93) { /* remove some rows unchanged since their metadata was read */
    ran(12);
    ct_tensor mi = NULL, ml = NULL, mf = NULL;
    if (call_ok(ct_table_metadata(&mi, &ml, &mf, t), "metadata")) remove_unchanged(t, mi, ml, mf, r);
  } else if (op < 97) {
    ran(13);
    call_ok(ct_table_compact(t), "compact");
  } else if (op == 97) { /* swap contents with the twin: its pure rows are initial too */
    ran(27);
    call_ok(ct_table_swap(t, spare), "swap");
  } else if (op < 99) {
    ran(14);
    ct_table_stats s;
    if (call_ok(ct_table_stats_get(&s, t), "stats") && (s.size < 0 || s.capacity < s.size)) fail("stats", "sizes");
    call_ok(ct_table_check(t), "check"); /* the invariants, while the others work */
  } else {
    ran(15);
    call_ok(ct_table_clear(t), "clear");
  }
  ct_tensor_free(k);
}

struct worker {
  uint32_t seed;
  int closer;  /* closes the table halfway */
  ct_table t;  /* a handle of its own, opened before the threads start (a worker starting after
                  the closer closed the table would find no table of that name to open) */
};

static void *work(void *arg) {
  struct worker *w = (struct worker *)arg;
  ct_table t = w->t;
  uint32_t r = w->seed;
  for (int i = 0; i < ITERS; i++) {
    if (w->closer && i == ITERS / 2) {
      atomic_store(&closing, 1);
      if (!ok(ct_table_close(t))) fail("close", NULL);
    }
    operate(t, &r);
  }
  ct_table_free(t);
  return NULL;
}

/* Runs the workers once; closer: whether one of them closes the table halfway. */
static void run_phase(uint32_t seed, int closer) {
  pthread_t th[THREADS];
  struct worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i].seed = seed + 7919u * (uint32_t)i;
    w[i].closer = closer && i == 0;
    w[i].t = NULL;
    CHECK(ok(ct_table_open(&w[i].t, NAME)));
    CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(th[i], NULL) == 0);
}

/* With no other thread running: the export, the stats and reads of every exported id agree. */
static void check_agree(ct_table t) {
  ct_table_stats s;
  ct_tensor ids = NULL, rows = NULL, found = NULL;
  const int64_t n = check_export(t, "export at rest", &ids);
  CHECK(ok(ct_table_stats_get(&s, t)) && n == s.size);
  uint8_t *fb = malloc((size_t)(n > 0 ? n : 1));
  int64_t m = 0, all = 1;
  CHECK(ids != NULL && ok(ct_table_read(&rows, &found, t, ids, CT_READ_ZEROS)) &&
        copy_out(fb, 1, n, found, CT_BOOL, &m) && m == n);
  for (int64_t i = 0; i < m; i++) all &= fb[i];
  CHECK(all);
  free(fb);
  ct_tensor_free(found);
  ct_tensor_free(ids);
  ct_tensor_free(rows);
}

static ct_table_config stress_config(const struct setup *u) {
  ct_table_config c;
  memset(&c, 0, sizeof c);
  c.dim = D;
  c.block_rows = 64; /* small blocks: growth and compaction move and free many */
  c.initializer = CT_INIT_UNIFORM;
  c.init_params[0] = -1;
  c.init_params[1] = 1;
  c.optimizer = u->optimizer;
  memcpy(c.opt_params, u->params, sizeof u->params);
  c.device.type = CT_CPU;
  c.device.index = -1;
  c.seed = 99;
  c.layout = u->layout;
  c.flags = u->flags;
  return c;
}

/* The pure ids' initial rows, from a twin table (same configuration and seed). */
static void initial_rows(const ct_table_config *cfg) {
  int64_t ids[PURE], m = 0;
  for (int i = 0; i < PURE; i++) ids[i] = PURE0 + i;
  ct_tensor k = tensor(ids, sizeof ids, CT_INT64, PURE, 0), rows = NULL;
  ct_table twin = NULL;
  CHECK(ok(ct_table_new(&twin, NAME "-twin", cfg)) && ok(ct_table_lookup(&rows, twin, k)) &&
        copy_out(pure_init, sizeof(float), PURE * D, rows, CT_FLOAT32, &m) && m == PURE * D);
  ct_tensor_free(rows);
  ct_tensor_free(k);
  CHECK(ok(ct_table_close(twin)));
  ct_table_free(twin);
}

/* ROUNDS phases with the table open, then one in which a worker closes it. */
static void stress(const struct setup *u) {
  current = *u;
  atomic_store(&offered, -1); /* no id of the last setup's table */
  const ct_table_config cfg = stress_config(u);
  initial_rows(&cfg);
  ct_table t = NULL;
  CHECK(ok(ct_table_new(&t, NAME, &cfg)) && ok(ct_table_new(&spare, NAME "-spare", &cfg)));
  if (u->admission > 1) CHECK(ok(ct_table_set_admission(t, u->admission)) && ok(ct_table_set_admission(spare, u->admission)));
  const long bad0 = atomic_load(&bad);
  for (uint32_t round = 1; round <= ROUNDS; round++) {
    run_phase(round, 0); /* all at once, the table open throughout */
    CHECK(atomic_load(&closed_seen) == 0);
    check_agree(t);
    CHECK(ok(ct_table_check(t)));
  }
  run_phase(ROUNDS + 1, 1); /* again, one worker closing the table halfway */
  const long closed = atomic_exchange(&closed_seen, 0);
  CHECK(closed > 0);
  CHECK(fails_with(ct_table_compact(t), "closed: "));
  ct_table_free(t);
  CHECK(ok(ct_table_close(spare)));
  ct_table_free(spare);
  spare = NULL;
  atomic_store(&closing, 0);
  printf("table stress %s: %d threads x %d operations x %d phases, %ld calls met the closed table, "
         "%ld prefetch waits ended by a discard, %ld checks failed\n",
         u->name, THREADS, ITERS, ROUNDS + 1, closed, atomic_exchange(&discarded_waits, 0),
         atomic_load(&bad) - bad0);
}

int main(void) {
  CHECK(ok(ct_set_num_threads(1))); /* libtorch's OpenMP runtime is not instrumented */
  for (size_t i = 0; i < sizeof setups / sizeof setups[0]; i++) stress(&setups[i]);
  CHECK(atomic_load(&bad) == 0);
  for (int i = 0; i < (int)(sizeof kinds / sizeof kinds[0]); i++) CHECK(atomic_load(&kinds[i]) > 0); /* every kind ran */
  CHECK(ct_live_handles() == 0);
  printf("table stress: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
