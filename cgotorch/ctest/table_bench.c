/* table_bench.c: single-thread benchmark of the embedding table's kernels through the C ABI,
 * each next to a plain C loop doing the same memory work on the same kind of rows (the
 * bandwidth reference). Built against cgotorch's objects compiled as cgo compiles them:
 * `make table-bench`.
 *
 * Setup, per dim D (16, 64, 128) and per operation: a table pre-sized for and holding N ids,
 * N = 2^26 / D (256 MiB per slot: 4M ids at D = 16, 1M at 64, 512K at 128; -n sets one N for
 * every D), the ids being k * 0x9E3779B97F4A7C15 (k < N, a bijection of int64, so the id map
 * sees spread-out keys). The reference is a flat float array [N, D] per slot (embedding,
 * optimizer states), every page touched before timing. Both are far beyond the 32 MiB L3.
 * Batches of 4,096 ids drawn uniformly from the N (duplicates possible, as in training); the
 * reference works on the rows the table gave those ids (ct_table_indices).
 *
 *   lookup:  ct_table_lookup (id map find + gather into a new [4096, D] tensor, freed) vs
 *            memcpy of row r to out[i] (out allocated once). table_find_dD: the id map part
 *            alone (ct_table_indices without insert: the rows' indices as an int64 tensor).
 *            table_lookup_dD_ref_const (D = 16, 64): the reference with D a compile-time
 *            constant, which GCC copies inline instead of calling memcpy; how the plain loop
 *            is written moves it (on this VM at D = 16: ~20 against ~31 ns per row), and this
 *            one is the tighter bound on one random row per id (ratio_const: table / it).
 *            table_lookup_dD_ref_map: the floor, the reference reading each row's index from
 *            a random slot of an array the size of the id map first (see make_map_floor);
 *            ratio_floor = it / reference, about the least ratio a table whose id map lies
 *            apart from its rows can reach on this machine, and over_floor = table / it.
 *   update:  ct_table_update with grads [4096, D] (validation, summing duplicates, id map,
 *            optimizer step) vs the rule applied to row r in place, batch order:
 *              SGD (lr 0.01):     w -= lr * g
 *              Adagrad:           s += g * g; w -= lr * g / (sqrt(s) + eps)
 *              SparseAdam:        m += (1-b1)(g-m); v += (1-b2)(g*g-v); w -= ss * m / (sqrt(v) + eps)
 *
 * Each repetition (-reps, default 5) times B batches (-batches, default 32) of the table and B
 * of the reference, alternating which goes first (lookups: then B of the find alone and B of
 * the constant-width reference). Every pass gets batches of its own (never
 * reused): 32 batches touch ~130K rows, so a pass that repeated earlier rows would find them
 * in the L3 cache. A figure is the best repetition (thread CPU time; the machine is shared),
 * in ns per row (ns per batch for the Go comparison). Output: `BENCH <name> <value> <unit>`
 * lines; ratio = table / reference (target: at most 1.3).
 *
 * The reference loops are plain: no software prefetch (the table's kernels prefetch rows 16
 * ahead, which is why they can beat them on updates).
 *
 * table_lookup_new10_d16: lookups where every tenth id of a batch is new (see bench_new_ids).
 * Also: the table's bytes per stored id beyond the rows themselves (ct_table_stats: id map,
 * blocks' slack, per-row bookkeeping), pre-sized and grown from empty, with and without access
 * tracking.
 * -track: the kernel benchmarks on tables created with CT_TABLE_TRACK_ACCESS (each training
 * lookup and update also writes the row's access record); names get a _track suffix. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cgotorch.h"

#define BATCH 4096

static int64_t n_ids = 0; /* 0: 2^26 / D */
static int n_batches = 32;
static int n_reps = 5;

static void die(ct_error e, const char *what) {
  if (e == NULL) return;
  fprintf(stderr, "%s: %s\n", what, e);
  exit(1);
}

/* This thread's CPU time (user + system, page faults included): the machine is shared, and CPU
 * time is what other processes' load changes least (-wall: wall-clock time instead). */
static clockid_t clock_id = CLOCK_THREAD_CPUTIME_ID;
/* -track: the kernel tables keep access metadata (CT_TABLE_TRACK_ACCESS); names get _track */
static int32_t table_flags = 0;
static const char *name_sfx = "";
static double now_ns(void) {
  struct timespec ts;
  clock_gettime(clock_id, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t rng_state = 42;
static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static int64_t key_of(int64_t k) { return (int64_t)((uint64_t)k * 0x9E3779B97F4A7C15ULL); }

static ct_tensor ids_tensor(const int64_t *ids, int64_t n) {
  ct_tensor t = NULL;
  die(ct_tensor_from_data(&t, ids, (size_t)n * sizeof(int64_t), CT_INT64, &n, 1), "ids tensor");
  return t;
}

static ct_tensor rows_tensor(const float *v, int64_t n, int64_t d) {
  ct_tensor t = NULL;
  int64_t shape[2] = {n, d};
  die(ct_tensor_from_data(&t, v, (size_t)(n * d) * sizeof(float), CT_FLOAT32, shape, 2), "rows tensor");
  return t;
}

static ct_table_config config(int64_t dim, int32_t opt, int64_t capacity) {
  ct_table_config c;
  memset(&c, 0, sizeof c);
  c.dim = dim;
  c.capacity = capacity;
  c.initializer = CT_INIT_UNIFORM;
  c.init_params[0] = -0.05;
  c.init_params[1] = 0.05;
  c.optimizer = opt;
  c.device.type = CT_CPU;
  c.device.index = -1;
  c.seed = 1;
  switch (opt) {
    case CT_OPT_SGD: c.opt_params[0] = 0.01; break;
    case CT_OPT_ADAGRAD: c.opt_params[0] = 0.01; c.opt_params[3] = 1e-10; break;
    case CT_OPT_SPARSE_ADAM:
      c.opt_params[0] = 1e-3; c.opt_params[1] = 0.9; c.opt_params[2] = 0.999; c.opt_params[3] = 1e-8;
      break;
    default: break;
  }
  return c;
}

/* A table holding ids key_of(0 .. n-1); rows[k] gets the row of key_of(k). */
static ct_table make_table(const char *name, int64_t n, int64_t dim, int32_t opt, int64_t capacity, int32_t flags,
                           int64_t *rows) {
  ct_table t = NULL;
  ct_table_config cfg = config(dim, opt, capacity);
  cfg.flags = flags;
  die(ct_table_new(&t, name, &cfg), "table new");
  const int64_t chunk = 65536;
  int64_t *ids = malloc(sizeof(int64_t) * (size_t)chunk);
  for (int64_t s = 0; s < n; s += chunk) {
    int64_t m = n - s < chunk ? n - s : chunk;
    for (int64_t i = 0; i < m; i++) ids[i] = key_of(s + i);
    ct_tensor k = ids_tensor(ids, m), r = NULL;
    die(ct_table_indices(&r, t, k, 1), "indices");
    if (rows != NULL) die(ct_tensor_copy_to(rows + s, (size_t)m * sizeof(int64_t), r, CT_INT64), "copy rows");
    ct_tensor_free(k);
    ct_tensor_free(r);
  }
  free(ids);
  return t;
}

static void close_table(ct_table t) {
  die(ct_table_close(t), "close");
  ct_table_free(t);
}

/* The batches of every pass: keys tensors and the rows of their ids. */
typedef struct {
  int count;
  ct_tensor *keys;
  int64_t *rows; /* [count][BATCH] */
} Batches;

static Batches make_batches(const int64_t *row_of, int64_t n, int count) {
  Batches b;
  int64_t ids[BATCH];
  b.count = count;
  b.keys = malloc(sizeof(ct_tensor) * (size_t)count);
  b.rows = malloc(sizeof(int64_t) * (size_t)count * BATCH);
  rng_state = 7;
  for (int j = 0; j < count; j++) {
    for (int i = 0; i < BATCH; i++) {
      int64_t k = (int64_t)(rng_next() % (uint64_t)n);
      ids[i] = key_of(k);
      b.rows[(size_t)j * BATCH + (size_t)i] = row_of[k];
    }
    b.keys[j] = ids_tensor(ids, BATCH);
  }
  return b;
}

static void free_batches(Batches *b) {
  for (int j = 0; j < b->count; j++) ct_tensor_free(b->keys[j]);
  free(b->keys);
  free(b->rows);
}

/* The reference's arrays get what the table's storage gets (see "huge-page backed row storage"
 * in csrc/table/table.cc.h): 2 MiB alignment and MADV_HUGEPAGE. With 4 KiB pages a random row
 * costs a page walk, which on this virtual machine made the plain loops slower than the table. */
static float *flat(int64_t n, float v) {
  const size_t bytes = sizeof(float) * (size_t)n, huge = (size_t)2 << 20;
  float *p = NULL;
  if (posix_memalign((void **)&p, huge, (bytes + huge - 1) / huge * huge) != 0) p = NULL;
#ifdef MADV_HUGEPAGE
  if (p != NULL && bytes >= huge) madvise(p, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);
#endif
  if (p == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) p[i] = v;
  return p;
}

/* ---- the reference loops ------------------------------------------------------------------ */

static void ref_gather(const float *w, const int64_t *rows, int64_t d, float *out) {
  for (int i = 0; i < BATCH; i++) memcpy(out + (size_t)i * (size_t)d, w + rows[i] * d, sizeof(float) * (size_t)d);
}

/* ref_gather with the row size a compile-time constant (d = W): GCC copies a short constant
 * size inline (a few vector moves) instead of calling memcpy, as the table's gather does for
 * widths up to 64 floats. Still no prefetch, but the copies of consecutive rows then overlap in
 * the core, so this is the tighter bound on what one random row per id costs. */
#define REF_GATHER_CONST(W)                                                     \
  static void ref_gather_##W(const float *w, const int64_t *rows, float *out) { \
    for (int i = 0; i < BATCH; i++)                                             \
      memcpy(out + (size_t)i * (W), w + rows[i] * (W), sizeof(float) * (W));   \
  }
REF_GATHER_CONST(16)
REF_GATHER_CONST(64)

static int has_const_ref(int64_t d) { return d == 16 || d == 64; }

/* The floor under a lookup: ref_gather that first reads each row's index from a random 16-byte
 * slot {id, row} of an array the size of a pre-sized id map (16 bytes a slot at load 9/16), as
 * any table whose id map lies apart from its rows must (a perfect map: one slot, no probing,
 * no hashing, a plain loop as the reference is). Its time over ref_gather's is about the least
 * ratio such a table can reach here; the table's over its, what the table adds beyond that
 * one line. */
typedef struct {
  int64_t *slots; /* [nslots][2]: {id, row} */
  uint32_t *pos;  /* [count][BATCH]: the slot of each batch entry's row */
} MapFloor;

static MapFloor make_map_floor(const Batches *b, int64_t n) {
  MapFloor f;
  const size_t nslots = ((size_t)n * 16 / 9 + 3) & ~(size_t)3;
  uint32_t *slot_of = malloc(sizeof(uint32_t) * nslots); /* a random slot per row */
  f.slots = (int64_t *)flat((int64_t)nslots * 4, 0.f);
  f.pos = malloc(sizeof(uint32_t) * (size_t)b->count * BATCH);
  if (slot_of == NULL || f.pos == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < nslots; i++) slot_of[i] = (uint32_t)i;
  for (size_t i = nslots - 1; i > 0; i--) { /* Fisher-Yates */
    const size_t j = (size_t)(rng_next() % (i + 1));
    const uint32_t t = slot_of[i];
    slot_of[i] = slot_of[j];
    slot_of[j] = t;
  }
  for (int64_t r = 0; r < n; r++) {
    f.slots[2 * (size_t)slot_of[r]] = key_of(r);
    f.slots[2 * (size_t)slot_of[r] + 1] = r;
  }
  for (size_t i = 0; i < (size_t)b->count * BATCH; i++) f.pos[i] = slot_of[b->rows[i]];
  free(slot_of);
  return f;
}

static void ref_map_gather(const MapFloor *f, const uint32_t *pos, const float *w, int64_t d, float *out) {
  for (int i = 0; i < BATCH; i++) {
    const int64_t r = f->slots[2 * (size_t)pos[i] + 1];
    memcpy(out + (size_t)i * (size_t)d, w + r * d, sizeof(float) * (size_t)d);
  }
}

/* The constant-width reference at dim d (has_const_ref(d)). */
static void ref_gather_const(const float *w, const int64_t *rows, int64_t d, float *out) {
  if (d == 16) ref_gather_16(w, rows, out);
  else ref_gather_64(w, rows, out);
}

static void ref_sgd(float *w, const int64_t *rows, int64_t d, const float *g, float lr) {
  for (int i = 0; i < BATCH; i++) {
    float *wr = w + rows[i] * d;
    const float *gi = g + (size_t)i * (size_t)d;
    for (int64_t j = 0; j < d; j++) wr[j] -= lr * gi[j];
  }
}

static void ref_adagrad(float *w, float *s, const int64_t *rows, int64_t d, const float *g, float lr, float eps) {
  for (int i = 0; i < BATCH; i++) {
    float *wr = w + rows[i] * d, *sr = s + rows[i] * d;
    const float *gi = g + (size_t)i * (size_t)d;
    for (int64_t j = 0; j < d; j++) {
      sr[j] += gi[j] * gi[j];
      wr[j] -= lr * gi[j] / (sqrtf(sr[j]) + eps);
    }
  }
}

static void ref_adam(float *w, float *m, float *v, const int64_t *rows, int64_t d, const float *g, float a1,
                     float a2, float ss, float eps) {
  for (int i = 0; i < BATCH; i++) {
    float *wr = w + rows[i] * d, *mr = m + rows[i] * d, *vr = v + rows[i] * d;
    const float *gi = g + (size_t)i * (size_t)d;
    for (int64_t j = 0; j < d; j++) {
      mr[j] += a1 * (gi[j] - mr[j]);
      vr[j] += a2 * (gi[j] * gi[j] - vr[j]);
      wr[j] -= ss * mr[j] / (sqrtf(vr[j]) + eps);
    }
  }
}

/* ---- timing ------------------------------------------------------------------------------- */

static void report(const char *what, int64_t d, double table_ns, double ref_ns) {
  printf("BENCH table_%s_d%ld%s %.2f ns/row\n", what, (long)d, name_sfx, table_ns);
  printf("BENCH table_%s_d%ld%s_ref %.2f ns/row\n", what, (long)d, name_sfx, ref_ns);
  printf("BENCH table_%s_d%ld%s_ratio %.2f x\n", what, (long)d, name_sfx, table_ns / ref_ns);
  fflush(stdout);
}

static const char *opt_name(int32_t opt) {
  switch (opt) {
    case CT_OPT_SGD: return "sgd";
    case CT_OPT_ADAGRAD: return "adagrad";
    case CT_OPT_SPARSE_ADAM: return "adam";
    default: return "lookup";
  }
}

/* One table (optimizer opt, or lookups when CT_OPT_NONE) at dim d, against its reference. */
static void bench(int64_t d, int32_t opt) {
  const int64_t n = n_ids > 0 ? n_ids : ((int64_t)1 << 26) / d;
  int64_t *row_of = malloc(sizeof(int64_t) * (size_t)n);
  ct_table t = make_table("bench", n, d, opt, n, table_flags, row_of);
  /* lookups: also the id map alone (pass 2), the constant-width reference (pass 3 where
   * there is one) and the floor (the last pass) */
  const int have_const = opt == CT_OPT_NONE && has_const_ref(d);
  const int passes = opt == CT_OPT_NONE ? 4 + have_const : 2;
  Batches b = make_batches(row_of, n, passes * n_reps * n_batches);
  free(row_of);
  MapFloor mf = {NULL, NULL};
  if (opt == CT_OPT_NONE) mf = make_map_floor(&b, n);
  const int64_t cells = n * d;
  float *w = flat(cells, 0.01f);
  float *s0 = opt == CT_OPT_ADAGRAD || opt == CT_OPT_SPARSE_ADAM ? flat(cells, 0.f) : NULL;
  float *s1 = opt == CT_OPT_SPARSE_ADAM ? flat(cells, 0.f) : NULL;
  float *out = flat((int64_t)BATCH * d, 0.f);
  float *g = flat((int64_t)BATCH * d, 0.f);
  for (int64_t i = 0; i < (int64_t)BATCH * d; i++) g[i] = (float)((double)(rng_next() >> 11) * 0x1.0p-53 - 0.5);
  ct_tensor grads = rows_tensor(g, BATCH, d);
  double best_t = 1e300, best_r = 1e300, best_f = 1e300, best_c = 1e300, best_m = 1e300;
  int64_t step = 0;
  for (int rep = 0; rep < n_reps; rep++) {
    for (int which = 0; which < passes; which++) {
      const int table_turn = which < 2 && (which + rep) % 2 == 0, find_turn = which == 2;
      const int map_turn = opt == CT_OPT_NONE && which == passes - 1, const_turn = have_const && which == 3;
      double t0 = now_ns();
      const int first = (passes * rep + which) * n_batches; /* this pass's batches */
      for (int j = first; j < first + n_batches; j++) {
        const int64_t *rows = b.rows + (size_t)j * BATCH;
        if (find_turn) {
          ct_tensor r = NULL;
          die(ct_table_indices(&r, t, b.keys[j], 0), "indices");
          ct_tensor_free(r);
          continue;
        }
        if (const_turn) {
          ref_gather_const(w, rows, d, out);
          continue;
        }
        if (map_turn) {
          ref_map_gather(&mf, mf.pos + (size_t)j * BATCH, w, d, out);
          continue;
        }
        if (table_turn) {
          if (opt == CT_OPT_NONE) {
            ct_tensor r = NULL;
            die(ct_table_lookup(&r, t, b.keys[j]), "lookup");
            ct_tensor_free(r);
          } else {
            die(ct_table_update(t, b.keys[j], grads), "update");
          }
          continue;
        }
        switch (opt) {
          case CT_OPT_NONE: ref_gather(w, rows, d, out); break;
          case CT_OPT_SGD: ref_sgd(w, rows, d, g, 0.01f); break;
          case CT_OPT_ADAGRAD: ref_adagrad(w, s0, rows, d, g, 0.01f, 1e-10f); break;
          case CT_OPT_SPARSE_ADAM: {
            step++;
            const double ss = 1e-3 * sqrt(1 - pow(0.999, (double)step)) / (1 - pow(0.9, (double)step));
            ref_adam(w, s0, s1, rows, d, g, 0.1f, 0.001f, (float)ss, 1e-8f);
            break;
          }
        }
      }
      double dt = (now_ns() - t0) / ((double)n_batches * BATCH);
      if (find_turn) {
        if (dt < best_f) best_f = dt;
      } else if (const_turn) {
        if (dt < best_c) best_c = dt;
      } else if (map_turn) {
        if (dt < best_m) best_m = dt;
      } else if (table_turn) {
        if (dt < best_t) best_t = dt;
      } else if (dt < best_r) {
        best_r = dt;
      }
    }
  }
  /* Keep the reference's results alive. */
  volatile float sink = w[(size_t)b.rows[0] * (size_t)d] + out[0];
  (void)sink;
  report(opt_name(opt), d, best_t, best_r);
  if (opt == CT_OPT_NONE) printf("BENCH table_find_d%ld%s %.2f ns/row\n", (long)d, name_sfx, best_f);
  if (have_const) {
    printf("BENCH table_lookup_d%ld%s_ref_const %.2f ns/row\n", (long)d, name_sfx, best_c);
    printf("BENCH table_lookup_d%ld%s_ratio_const %.2f x\n", (long)d, name_sfx, best_t / best_c);
  }
  if (opt == CT_OPT_NONE) {
    printf("BENCH table_lookup_d%ld%s_ref_map %.2f ns/row\n", (long)d, name_sfx, best_m);
    printf("BENCH table_lookup_d%ld%s_ratio_floor %.2f x\n", (long)d, name_sfx, best_m / best_r);
    printf("BENCH table_lookup_d%ld%s_over_floor %.2f x\n", (long)d, name_sfx, best_t / best_m);
    free(mf.slots);
    free(mf.pos);
  }
  ct_tensor_free(grads);
  free_batches(&b);
  free(w);
  free(s0);
  free(s1);
  free(out);
  free(g);
  close_table(t);
}

/* Training lookups at dim d where every tenth id of a batch is new to the table (the others
 * random ids it holds, as in table_lookup_dD): ns per row, the best pass (-reps) of -batches
 * batches, each pass with new ids of its own. A batch with a new id takes the insert path: it
 * inserts the ids the first (shared-lock) find missed, initialises their rows and gathers. */
static void bench_new_ids(int64_t d) {
  const int64_t n = n_ids > 0 ? n_ids : ((int64_t)1 << 26) / d;
  const int64_t total = (int64_t)n_reps * n_batches;
  ct_table t = make_table("bench_new", n, d, CT_OPT_NONE, n + total * (BATCH / 10 + 1), table_flags, NULL);
  ct_tensor *keys = malloc(sizeof(ct_tensor) * (size_t)total);
  int64_t ids[BATCH], fresh = n;
  rng_state = 11;
  for (int64_t j = 0; j < total; j++) {
    for (int i = 0; i < BATCH; i++) ids[i] = key_of(i % 10 == 0 ? fresh++ : (int64_t)(rng_next() % (uint64_t)n));
    keys[j] = ids_tensor(ids, BATCH);
  }
  double best = 1e300;
  for (int rep = 0; rep < n_reps; rep++) {
    const double t0 = now_ns();
    for (int j = rep * n_batches; j < (rep + 1) * n_batches; j++) {
      ct_tensor r = NULL;
      die(ct_table_lookup(&r, t, keys[j]), "lookup");
      ct_tensor_free(r);
    }
    const double dt = (now_ns() - t0) / ((double)n_batches * BATCH);
    if (dt < best) best = dt;
  }
  printf("BENCH table_lookup_new10_d%ld%s %.2f ns/row\n", (long)d, name_sfx, best);
  fflush(stdout);
  for (int64_t j = 0; j < total; j++) ct_tensor_free(keys[j]);
  free(keys);
  close_table(t);
}

/* Bytes per stored id beyond the rows: (stats.bytes - size * dim * 4) / size. */
static void overhead(int64_t n, int64_t capacity, int32_t flags, const char *what) {
  ct_table t = make_table("bench-overhead", n, 16, CT_OPT_SGD, capacity, flags, NULL);
  ct_table_stats st;
  die(ct_table_stats_get(&st, t), "stats");
  const double rows = (double)st.size * (double)st.dim * sizeof(float);
  printf("BENCH table_overhead_%s %.1f B/id\n", what, ((double)st.bytes - rows) / (double)st.size);
  fflush(stdout);
  close_table(t);
}

int main(int argc, char **argv) {
  int only = 0;            /* -only D: one dim */
  const char *op = NULL;   /* -op lookup|sgd|adagrad|adam: one operation */
  for (int i = 1; i < argc; i += 2) {
    if (strcmp(argv[i], "-wall") == 0) {
      clock_id = CLOCK_MONOTONIC;
      i--;
    } else if (strcmp(argv[i], "-track") == 0) {
      table_flags = CT_TABLE_TRACK_ACCESS;
      name_sfx = "_track";
      i--;
    } else if (i + 1 >= argc) {
      fprintf(stderr, "missing value for %s\n", argv[i]);
      return 2;
    } else if (strcmp(argv[i], "-n") == 0) n_ids = atoll(argv[i + 1]);
    else if (strcmp(argv[i], "-batches") == 0) n_batches = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-reps") == 0) n_reps = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-only") == 0) only = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-op") == 0) op = argv[i + 1];
    else {
      fprintf(stderr, "usage: table_bench [-wall] [-track] [-n ids] [-batches B] [-reps R] [-only D] [-op lookup|sgd|adagrad|adam|overhead]\n");
      return 2;
    }
  }
  if (n_batches < 1 || n_ids < 0 || n_reps < 1) return 2;
  die(ct_set_num_threads(1), "threads");
  const int64_t dims[3] = {16, 64, 128};
  const int32_t ops[4] = {CT_OPT_NONE, CT_OPT_SGD, CT_OPT_ADAGRAD, CT_OPT_SPARSE_ADAM};
  printf("# table_bench: %ld ids (0: 2^26 / D), %d batches of %d per pass, best of %d\n", (long)n_ids, n_batches,
         BATCH, n_reps);
  for (int di = 0; di < 3; di++) {
    if (only != 0 && dims[di] != only) continue;
    for (int oi = 0; oi < 4; oi++) {
      if (op == NULL || strcmp(op, opt_name(ops[oi])) == 0) bench(dims[di], ops[oi]);
    }
    if (dims[di] == 16 && (op == NULL || strcmp(op, "lookup") == 0)) bench_new_ids(dims[di]);
  }
  if (op == NULL || strcmp(op, "overhead") == 0) {
    const int64_t n = n_ids > 0 ? n_ids : (int64_t)1 << 22;
    overhead(n, n, 0, "presized");
    overhead(n, 0, 0, "grown");
    overhead(n, n, CT_TABLE_TRACK_ACCESS, "presized_track_access");
    overhead(n, 0, CT_TABLE_TRACK_ACCESS, "grown_track_access");
  }
  return 0;
}
