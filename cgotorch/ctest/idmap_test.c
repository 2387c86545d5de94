/* idmap_test.c - unit tests for the id map, cgotorch/csrc/idmap/ (run under ASan + UBSan by
 * `make idmap-test`).
 * Prints one line per failed check and a final "idmap: N passed, M failed"; exits 1 on failure. */
#include "../csrc/idmap/isa.h" /* idmap.h, and whether the map dispatches between two builds */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the segment size the map was built with (idmap.c.h's default unless the build overrides it) */
#ifdef CT_IDMAP_SEG_MAX_LOG
#define CT_IDMAP_SEG_MAX_LOG_FOR_TEST CT_IDMAP_SEG_MAX_LOG
#else
#define CT_IDMAP_SEG_MAX_LOG_FOR_TEST 17
#endif

static long g_pass, g_fail;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) {                                                                 \
            g_pass++;                                                               \
        } else {                                                                    \
            g_fail++;                                                               \
            if (g_fail < 50) fprintf(stderr, "%s:%d: FAIL %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

/* a check inside a loop: count once per loop, report the first failure */
#define LOOP_CHECK(ok, cond)  \
    do {                      \
        if (!(cond)) ok = 0;  \
    } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void *xalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory\n");
        exit(2);
    }
    return p;
}

/* inverse of the map's mixer (murmur3 fmix64), to build ids that collide in the hash */
static uint64_t inv_mul(uint64_t a) { /* a odd: Newton iteration for a^-1 mod 2^64 */
    uint64_t x = a;
    for (int i = 0; i < 6; i++) x *= 2 - a * x;
    return x;
}
static int64_t unmix(uint64_t h) {
    h ^= h >> 33;
    h *= inv_mul(0xc4ceb9fe1a85ec53u);
    h ^= h >> 33;
    h *= inv_mul(0xff51afd7ed558ccdu);
    h ^= h >> 33;
    return (int64_t)h;
}

static int cmp_pair(const void *a, const void *b) {
    const int64_t *x = (const int64_t *)a, *y = (const int64_t *)b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* export as sorted (id, idx) pairs; returns count (caller frees *out) */
static size_t export_sorted(const ct_idmap *m, int64_t **out) {
    size_t n = ct_idmap_size(m);
    int64_t *ids = (int64_t *)xalloc(n * sizeof(int64_t)), *idx = (int64_t *)xalloc(n * sizeof(int64_t));
    size_t r = ct_idmap_export(m, ids, idx, n);
    int64_t *p = (int64_t *)xalloc(2 * n * sizeof(int64_t));
    for (size_t i = 0; i < n; i++) p[2 * i] = ids[i], p[2 * i + 1] = idx[i];
    qsort(p, n, 2 * sizeof(int64_t), cmp_pair);
    free(ids);
    free(idx);
    *out = p;
    return r;
}

static int maps_equal(const ct_idmap *a, const ct_idmap *b) {
    if (ct_idmap_size(a) != ct_idmap_size(b)) return 0;
    if (ct_idmap_high_water(a) != ct_idmap_high_water(b)) return 0;
    int64_t *pa, *pb;
    size_t na = export_sorted(a, &pa), nb = export_sorted(b, &pb);
    int eq = na == nb && memcmp(pa, pb, 2 * na * sizeof(int64_t)) == 0;
    free(pa);
    free(pb);
    return eq;
}

/* ------------------------------------------------------------------ tests */

static void test_empty_and_null(void) {
    ct_idmap_free(NULL);
    ct_idmap *m = ct_idmap_new(0);
    CHECK(m != NULL);
    CHECK(ct_idmap_size(m) == 0);
    CHECK(ct_idmap_high_water(m) == 0);
    CHECK(ct_idmap_capacity(m) > 0);
    CHECK(ct_idmap_bytes(m) > 0);
    CHECK(ct_idmap_find(m, NULL, 0, NULL) == 0);
    CHECK(ct_idmap_find_or_insert(m, NULL, 0, NULL, NULL) == 0);
    CHECK(ct_idmap_erase(m, NULL, 0, NULL) == 0);
    CHECK(ct_idmap_export(m, NULL, NULL, 0) == 0);
    CHECK(ct_idmap_reserve(m, 0) == 0);
    int64_t id = 42, out = 7;
    CHECK(ct_idmap_find(m, &id, 1, &out) == 0 && out == -1);
    CHECK(ct_idmap_erase(m, &id, 1, &out) == 0 && out == -1);
    CHECK(ct_idmap_erase(m, &id, 1, NULL) == 0);
    ct_idmap_clear(m);
    CHECK(ct_idmap_size(m) == 0);
    ct_idmap_free(m);
}

static void test_contiguous_and_dups(void) {
    ct_idmap *m = ct_idmap_new(0);
    enum { N = 1000 };
    int64_t ids[N], out[N];
    uint8_t nw[N];
    for (int i = 0; i < N; i++) ids[i] = (int64_t)((rnd() | 1) * (uint64_t)(i + 1));
    for (int i = 0; i < N; i++) /* make sure they are distinct */
        for (int j = 0; j < i; j++)
            if (ids[j] == ids[i]) ids[i] ^= 0x5555, j = -1;
    CHECK(ct_idmap_find_or_insert(m, ids, N, out, nw) == N);
    int ok = 1;
    for (int i = 0; i < N; i++) LOOP_CHECK(ok, out[i] == i && nw[i] == 1);
    CHECK(ok);
    CHECK(ct_idmap_size(m) == N && ct_idmap_high_water(m) == N);
    /* again: all found, nothing new */
    CHECK(ct_idmap_find_or_insert(m, ids, N, out, nw) == 0);
    ok = 1;
    for (int i = 0; i < N; i++) LOOP_CHECK(ok, out[i] == i && nw[i] == 0);
    CHECK(ok);
    /* duplicates inside one batch: one index, is_new only on the first occurrence */
    int64_t d[8] = {5, 6, 5, 5, 7, 6, ids[3], 5};
    int64_t o[8];
    uint8_t dn[8];
    CHECK(ct_idmap_find_or_insert(m, d, 8, o, dn) == 3);
    CHECK(o[0] == N && o[2] == N && o[3] == N && o[7] == N);
    CHECK(o[1] == N + 1 && o[5] == N + 1 && o[4] == N + 2 && o[6] == 3);
    CHECK(dn[0] == 1 && dn[1] == 1 && dn[4] == 1);
    CHECK(dn[2] == 0 && dn[3] == 0 && dn[5] == 0 && dn[6] == 0 && dn[7] == 0);
    CHECK(ct_idmap_size(m) == N + 3 && ct_idmap_high_water(m) == N + 3);
    /* is_new may be NULL */
    int64_t e[3] = {100000007, 100000007, 5};
    CHECK(ct_idmap_find_or_insert(m, e, 3, o, NULL) == 1);
    CHECK(o[0] == N + 3 && o[1] == N + 3 && o[2] == N);
    ct_idmap_free(m);
}

static void test_find_never_inserts(void) {
    ct_idmap *m = ct_idmap_new(16);
    int64_t ids[100], out[100];
    for (int i = 0; i < 100; i++) ids[i] = i * 7919;
    CHECK(ct_idmap_find_or_insert(m, ids, 50, out, NULL) == 50);
    size_t bytes = ct_idmap_bytes(m);
    CHECK(ct_idmap_find(m, ids, 100, out) == 50);
    int ok = 1;
    for (int i = 0; i < 100; i++) LOOP_CHECK(ok, out[i] == (i < 50 ? i : -1));
    CHECK(ok);
    CHECK(ct_idmap_size(m) == 50 && ct_idmap_high_water(m) == 50 && ct_idmap_bytes(m) == bytes);
    ct_idmap_free(m);
}

static void test_extreme_ids(void) {
    ct_idmap *m = ct_idmap_new(0);
    int64_t ex[] = {0, -1, INT64_MIN, INT64_MAX, 1, INT64_MIN + 1, INT64_MAX - 1, -2};
    const int NE = (int)(sizeof ex / sizeof ex[0]);
    int64_t out[8];
    uint8_t nw[8];
    CHECK(ct_idmap_find(m, ex, NE, out) == 0);
    CHECK(ct_idmap_find_or_insert(m, ex, NE, out, nw) == NE);
    int ok = 1;
    for (int i = 0; i < NE; i++) LOOP_CHECK(ok, out[i] == i && nw[i]);
    CHECK(ok);
    CHECK(ct_idmap_find(m, ex, NE, out) == (size_t)NE);
    ok = 1;
    for (int i = 0; i < NE; i++) LOOP_CHECK(ok, out[i] == i);
    CHECK(ok);
    /* sequential ids, ids sharing their low 32 bits, ids sharing their high bits */
    enum { N = 200000 };
    int64_t *ids = (int64_t *)xalloc(3 * N * sizeof(int64_t));
    int64_t *o = (int64_t *)xalloc(3 * N * sizeof(int64_t));
    for (int i = 0; i < N; i++) {
        ids[i] = 1000000 + i;
        ids[N + i] = ((int64_t)(i + 1) << 32) | 0x1234;
        ids[2 * N + i] = (int64_t)0x7000000000000000 + ((int64_t)i << 1) + 7;
    }
    CHECK(ct_idmap_find_or_insert(m, ids, 3 * N, o, NULL) == 3 * N);
    ok = 1;
    for (int i = 0; i < 3 * N; i++) LOOP_CHECK(ok, o[i] == NE + i);
    CHECK(ok);
    CHECK(ct_idmap_find(m, ids, 3 * N, o) == 3 * N);
    ok = 1;
    for (int i = 0; i < 3 * N; i++) LOOP_CHECK(ok, o[i] == NE + i);
    CHECK(ok);
    /* extremes still there, erase them, they are gone */
    CHECK(ct_idmap_find(m, ex, NE, out) == (size_t)NE);
    CHECK(ct_idmap_erase(m, ex, NE, out) == NE);
    ok = 1;
    for (int i = 0; i < NE; i++) LOOP_CHECK(ok, out[i] == i);
    CHECK(ok);
    CHECK(ct_idmap_find(m, ex, NE, out) == 0);
    CHECK(ct_idmap_find(m, ids, 3 * N, o) == 3 * N);
    free(ids);
    free(o);
    ct_idmap_free(m);
}

/* ids whose hashes share their top 24 bits (one directory segment) or their low 20 bits
 * (one probe position): exercises skewed splits, long probe runs and backward shift. */
static void test_hash_collisions(void) {
    enum { N = 300000, L = 3000 };
    int64_t *ids = (int64_t *)xalloc(N * sizeof(int64_t)), *o = (int64_t *)xalloc(N * sizeof(int64_t));
    /* distinct hashes: top 24 bits fixed for the first third, top 3 bits for the rest */
    for (int i = 0; i < N; i++) {
        uint64_t lo = (uint64_t)i * 0x9e3779b97f4a7c15u;
        ids[i] = i < N / 3 ? unmix((lo & (((uint64_t)1 << 40) - 1)) | ((uint64_t)0xabcdef << 40))
                           : unmix((lo >> 3) | ((uint64_t)5 << 61));
    }
    ct_idmap *m = ct_idmap_new(0);
    for (int off = 0; off < N; off += 4096) {
        int b = N - off < 4096 ? N - off : 4096;
        CHECK(ct_idmap_find_or_insert(m, ids + off, b, o + off, NULL) >= 0);
    }
    int ok = 1;
    for (int i = 0; i < N; i++) LOOP_CHECK(ok, o[i] == i);
    CHECK(ok);
    CHECK(ct_idmap_find(m, ids, N, o) == N);
    ok = 1;
    for (int i = 0; i < N; i++) LOOP_CHECK(ok, o[i] == i);
    CHECK(ok);
    CHECK(ct_idmap_check(m) == 0);
    ct_idmap_free(m);

    /* one probe position: L ids whose hash low 20 bits are equal, plus random neighbours */
    m = ct_idmap_new(0);
    for (int i = 0; i < L; i++) ids[i] = unmix((rnd() << 20) | 0x12345);
    for (int i = L; i < 2 * L; i++) ids[i] = (int64_t)rnd();
    CHECK(ct_idmap_find_or_insert(m, ids, 2 * L, o, NULL) == 2 * L);
    /* erase every other colliding id, the rest must still be found */
    int64_t *er = (int64_t *)xalloc(L * sizeof(int64_t));
    int ne = 0;
    for (int i = 0; i < 2 * L; i += 2) er[ne++] = ids[i];
    CHECK(ct_idmap_erase(m, er, ne, NULL) == ne);
    CHECK(ct_idmap_find(m, ids, 2 * L, o) == (size_t)(2 * L - ne));
    ok = 1;
    for (int i = 0; i < 2 * L; i++) LOOP_CHECK(ok, o[i] == (i % 2 == 0 ? -1 : i));
    CHECK(ok);
    CHECK(ct_idmap_check(m) == 0);
    free(er);
    free(ids);
    free(o);
    ct_idmap_free(m);
}

/* Structured id families (sequential, negative, shifted, repeated halves, strided) sit as
 * close to their home lines as random ids do (300K of any family here: 0.08 lines per id,
 * at most 14-20), and spread over segments as evenly. A hash that passes random ids but keeps
 * structure fails here, not only by running slowly: one multiply between xorshifts confines
 * (a << 32) | a to a sliver of each segment (228 lines per id at 100K), and a 128-bit multiply
 * folded hi ^ lo does too at 300K (515); both were 4-5% faster than fmix64 on random ids. A
 * hash with good low bits and the id's own bits on top keeps lines short but piles sequential
 * ids into one segment (452K slots in the 1K-slot build). */
static void test_structured_ids(void) {
    enum { N = 300000, F = 9 };
    int64_t *ids = (int64_t *)xalloc(N * sizeof(int64_t)), *o = (int64_t *)xalloc(N * sizeof(int64_t));
    for (int f = 0; f < F; f++) {
        for (int64_t a = 0; a < N; a++) {
            const uint64_t u = (uint64_t)a;
            switch (f) {
            case 0: ids[a] = a; break;
            case 1: ids[a] = -a - 1; break;
            case 2: ids[a] = (int64_t)(u << 32); break;
            case 3: ids[a] = (int64_t)(u << 32 | u); break;
            case 4: ids[a] = (int64_t)(u << 44); break;
            case 5: ids[a] = a * 1000; break;
            case 6: ids[a] = (int64_t)(u << 16 | u); break;
            case 7: ids[a] = (int64_t)(u << 20 | 7); break;
            default: ids[a] = (int64_t)rnd(); break;
            }
        }
        ct_idmap *m = ct_idmap_new(0);
        int ok = 1;
        for (int off = 0; off < N; off += 4096) {
            const int b = N - off < 4096 ? N - off : 4096;
            LOOP_CHECK(ok, ct_idmap_find_or_insert(m, ids + off, b, o + off, NULL) == b);
        }
        CHECK(ok);
        size_t most = 0;
        const size_t lines = ct_idmap_probe_lines(m, &most);
        unsigned depth = 0;
        size_t max_slots = 0;
        const size_t segs = ct_idmap_segments(m, &depth, &max_slots);
        if (getenv("IDMAP_TEST_VERBOSE"))
            printf("family %d: %.3f lines per id, most %zu; %zu segments, depth %u, largest %zu slots\n", f,
                   (double)lines / N, most, segs, depth, max_slots);
        CHECK(lines < N / 5 && most < 40);
        /* spread over segments too (the directory takes the hash's high bits) */
        CHECK(max_slots <= ((size_t)1 << CT_IDMAP_SEG_MAX_LOG_FOR_TEST) && ((size_t)1 << depth) <= 4 * segs);
        ct_idmap_free(m);
    }
    free(ids);
    free(o);
}

static void test_erase_reuse(void) {
    ct_idmap *m = ct_idmap_new(0);
    int64_t ids[5] = {11, 22, 655922, 44, 55}, out[5];
    CHECK(ct_idmap_find_or_insert(m, ids, 5, out, NULL) == 5);
    int64_t del = 655922, freed = -5;
    CHECK(ct_idmap_erase(m, &del, 1, &freed) == 1 && freed == 2);
    CHECK(ct_idmap_size(m) == 4 && ct_idmap_high_water(m) == 5);
    int64_t nid = 328637, got = -5;
    uint8_t nw = 0;
    CHECK(ct_idmap_find_or_insert(m, &nid, 1, &got, &nw) == 1 && got == 2 && nw == 1);
    CHECK(ct_idmap_high_water(m) == 5);
    /* LIFO reuse: erase 11 (0) then 44 (3) then 55 (4): reuse order 4, 3, 0, then 5 */
    int64_t d3[3] = {11, 44, 55}, f3[3];
    CHECK(ct_idmap_erase(m, d3, 3, f3) == 3 && f3[0] == 0 && f3[1] == 3 && f3[2] == 4);
    int64_t n4[4] = {1001, 1002, 1003, 1004}, g4[4];
    CHECK(ct_idmap_find_or_insert(m, n4, 4, g4, NULL) == 4);
    CHECK(g4[0] == 4 && g4[1] == 3 && g4[2] == 0 && g4[3] == 5);
    CHECK(ct_idmap_high_water(m) == 6);
    /* erase absent ids, and the same id twice in one batch */
    int64_t d4[4] = {999999, 1001, 1001, -77}, f4[4];
    CHECK(ct_idmap_erase(m, d4, 4, f4) == 1);
    CHECK(f4[0] == -1 && f4[1] == 4 && f4[2] == -1 && f4[3] == -1);
    CHECK(ct_idmap_erase(m, d4, 4, NULL) == 0);
    CHECK(ct_idmap_size(m) == 5);
    ct_idmap_free(m);
}

/* pack: a dry run reports exactly the moves the real one makes; afterwards every id keeps its
 * index if it was below size and otherwise has the one its move gave it, the indices are
 * [0, size) each once, and new ids continue at size */
static void test_pack(void) {
    enum { N = 20000 };
    ct_idmap *m = ct_idmap_new(0);
    int64_t *ids = (int64_t *)xalloc(N * sizeof(int64_t)), *idx = (int64_t *)xalloc(N * sizeof(int64_t));
    int64_t *gone = (int64_t *)xalloc(N * sizeof(int64_t)), *got = (int64_t *)xalloc(N * sizeof(int64_t));
    int64_t *f0 = (int64_t *)xalloc(N * sizeof(int64_t)), *t0 = (int64_t *)xalloc(N * sizeof(int64_t));
    int64_t *f1 = (int64_t *)xalloc(N * sizeof(int64_t)), *t1 = (int64_t *)xalloc(N * sizeof(int64_t));
    int64_t *moved_to = (int64_t *)xalloc(N * sizeof(int64_t));
    uint8_t *erased = (uint8_t *)xalloc(N), *seen = (uint8_t *)xalloc(N);
    memset(seen, 0, N);
    for (size_t i = 0; i < N; i++) ids[i] = (int64_t)rnd();
    CHECK(ct_idmap_find_or_insert(m, ids, N, idx, NULL) == N);
    size_t ng = 0;
    for (size_t i = 0; i < N; i++) {
        erased[i] = rnd() % 3 == 0 || i >= N - 100; /* a third, and the last hundred */
        if (erased[i]) gone[ng++] = ids[i];
    }
    CHECK(ct_idmap_erase(m, gone, ng, NULL) == (int64_t)ng);
    const size_t size = ct_idmap_size(m), moves = ct_idmap_pack_moves(m);
    CHECK(size == N - ng && moves > 0 && moves < ng);
    CHECK(ct_idmap_pack(m, f0, t0, moves - 1, 1) == -1 && ct_idmap_high_water(m) == N);
    CHECK(ct_idmap_pack(m, f0, t0, N, 0) == (int64_t)moves && ct_idmap_high_water(m) == N);
    const size_t bytes = ct_idmap_bytes(m);
    CHECK(ct_idmap_pack(m, f1, t1, moves, 1) == (int64_t)moves);
    CHECK(ct_idmap_bytes(m) + ng * sizeof(int64_t) <= bytes); /* the free list's memory went */
    CHECK(memcmp(f0, f1, moves * sizeof(int64_t)) == 0 && memcmp(t0, t1, moves * sizeof(int64_t)) == 0);
    CHECK(ct_idmap_size(m) == size && ct_idmap_high_water(m) == (int64_t)size && ct_idmap_check(m) == 0);
    for (size_t i = 0; i < N; i++) moved_to[i] = -1;
    int ok = 1;
    for (size_t k = 0; k < moves; k++) {
        LOOP_CHECK(ok, f1[k] >= (int64_t)size && f1[k] < N && t1[k] >= 0 && t1[k] < (int64_t)size);
        if (f1[k] >= 0 && f1[k] < N) moved_to[f1[k]] = t1[k];
    }
    CHECK(ok);
    CHECK(ct_idmap_find(m, ids, N, got) == size);
    ok = 1;
    for (size_t i = 0; i < N; i++) {
        if (erased[i]) {
            LOOP_CHECK(ok, got[i] == -1);
            continue;
        }
        LOOP_CHECK(ok, got[i] == (idx[i] < (int64_t)size ? idx[i] : moved_to[idx[i]]));
        if (got[i] >= 0 && got[i] < (int64_t)size) {
            LOOP_CHECK(ok, !seen[got[i]]);
            seen[got[i]] = 1;
        }
    }
    CHECK(ok);
    int64_t fresh = 5, at = -1;
    CHECK(ct_idmap_pack_moves(m) == 0 && ct_idmap_pack(m, f0, t0, 0, 1) == 0);
    CHECK(ct_idmap_find_or_insert(m, &fresh, 1, &at, NULL) == 1 && at == (int64_t)size);
    CHECK(ct_idmap_erase(m, &fresh, 1, NULL) == 1 && ct_idmap_find_or_insert(m, &fresh, 1, &at, NULL) == 1 &&
          at == (int64_t)size); /* a free list again after it was freed */
    CHECK(ct_idmap_check(m) == 0);
    free(ids);
    free(idx);
    free(gone);
    free(got);
    free(f0);
    free(t0);
    free(f1);
    free(t1);
    free(moved_to);
    free(erased);
    free(seen);
    ct_idmap_free(m);
}

static void test_growth(void) {
    enum { N = 3000000 };
    int64_t *ids = (int64_t *)xalloc(N * sizeof(int64_t)), *o = (int64_t *)xalloc(N * sizeof(int64_t));
    for (int i = 0; i < N; i++) ids[i] = (int64_t)rnd();
    /* batched in odd sizes, hint 0 */
    ct_idmap *m = ct_idmap_new(0);
    size_t bsz[] = {1, 2, 3, 17, 4096, 999, 65536, 300000};
    size_t off = 0, k = 0;
    double most = 0; /* bytes per id, the largest seen from 1M ids on */
    while (off < N) {
        size_t b = bsz[k++ % 8];
        if (b > N - off) b = N - off;
        CHECK(ct_idmap_find_or_insert(m, ids + off, b, o + off, NULL) == (int64_t)b);
        off += b;
        const double per_id = (double)ct_idmap_bytes(m) / (double)off;
        if (off >= 1000000 && per_id > most) most = per_id;
    }
    /* graded segment capacities keep a grown map's bytes per id near their mean, 31 B; with
     * all segments splitting together they went from 21 to 43 B */
    printf("idmap_test: grown from 1M to %d ids: at most %.1f bytes/id\n", N, most);
    CHECK(most <= 33.0);
    int ok = 1;
    for (int i = 0; i < N; i++) LOOP_CHECK(ok, o[i] == i);
    CHECK(ok);
    CHECK(ct_idmap_size(m) == N && ct_idmap_high_water(m) == N);
    CHECK(ct_idmap_capacity(m) >= N);
    CHECK(ct_idmap_find(m, ids, N, o) == N);
    ok = 1;
    for (int i = 0; i < N; i++) LOOP_CHECK(ok, o[i] == i);
    CHECK(ok);
    size_t e = ct_idmap_export(m, NULL, NULL, 0);
    CHECK(e == N);
    CHECK(ct_idmap_check(m) == 0);
    printf("idmap_test: %d ids grown from hint 0: %.1f bytes/id, capacity %zu\n", N,
           (double)ct_idmap_bytes(m) / N, ct_idmap_capacity(m));
    ct_idmap_free(m);

    /* one huge batch into an empty map */
    m = ct_idmap_new(0);
    CHECK(ct_idmap_find_or_insert(m, ids, N, o, NULL) == N);
    ok = 1;
    for (int i = 0; i < N; i++) LOOP_CHECK(ok, o[i] == i);
    CHECK(ok);
    CHECK(ct_idmap_find(m, ids, N, o) == N);
    ok = 1;
    for (int i = 0; i < N; i++) LOOP_CHECK(ok, o[i] == i);
    CHECK(ok);
    CHECK(ct_idmap_check(m) == 0);
    /* a huge batch of ids that are all present must not grow the map */
    size_t bytes = ct_idmap_bytes(m);
    CHECK(ct_idmap_find_or_insert(m, ids, N, o, NULL) == 0);
    CHECK(ct_idmap_bytes(m) == bytes);
    ct_idmap_free(m);
    free(ids);
    free(o);
}

static void test_reserve_clear_export(void) {
    enum { N = 500000 };
    int64_t *ids = (int64_t *)xalloc(N * sizeof(int64_t)), *o = (int64_t *)xalloc(N * sizeof(int64_t));
    for (int i = 0; i < N; i++) ids[i] = (int64_t)rnd();
    ct_idmap *m = ct_idmap_new(0);
    CHECK(ct_idmap_reserve(m, N) == 0);
    CHECK(ct_idmap_capacity(m) >= N);
    size_t bytes = ct_idmap_bytes(m);
    for (int off = 0; off < N; off += 4096) {
        int b = N - off < 4096 ? N - off : 4096;
        CHECK(ct_idmap_find_or_insert(m, ids + off, b, o + off, NULL) == b);
    }
    CHECK(ct_idmap_bytes(m) == bytes); /* reserved: no growth */
    CHECK(ct_idmap_check(m) == 0);
    /* reserve on a non-empty map, then more inserts need no growth either */
    CHECK(ct_idmap_reserve(m, N) == 0);
    CHECK(ct_idmap_capacity(m) >= 2 * (size_t)N);
    bytes = ct_idmap_bytes(m);
    int64_t *more = (int64_t *)xalloc(N * sizeof(int64_t));
    for (int i = 0; i < N; i++) more[i] = (int64_t)rnd();
    CHECK(ct_idmap_find_or_insert(m, more, N, o, NULL) == N);
    CHECK(ct_idmap_bytes(m) == bytes);
    CHECK(ct_idmap_reserve(m, 0) == 0 && ct_idmap_bytes(m) == bytes);
    CHECK(ct_idmap_check(m) == 0);
    /* export: count == size, every pair found, cap limits the writes */
    size_t sz = ct_idmap_size(m);
    CHECK(sz == 2 * (size_t)N);
    int64_t *ei = (int64_t *)xalloc(sz * sizeof(int64_t)), *ex = (int64_t *)xalloc(sz * sizeof(int64_t));
    CHECK(ct_idmap_export(m, ei, ex, sz) == sz);
    int64_t *chk = (int64_t *)xalloc(sz * sizeof(int64_t));
    CHECK(ct_idmap_find(m, ei, sz, chk) == sz);
    int ok = 1;
    for (size_t i = 0; i < sz; i++) LOOP_CHECK(ok, chk[i] == ex[i]);
    CHECK(ok);
    /* indices are exactly 0..sz-1 */
    uint8_t *seen = (uint8_t *)calloc(sz, 1);
    ok = 1;
    for (size_t i = 0; i < sz; i++) {
        LOOP_CHECK(ok, ex[i] >= 0 && (size_t)ex[i] < sz && !seen[ex[i]]);
        if (ex[i] >= 0 && (size_t)ex[i] < sz) seen[ex[i]] = 1;
    }
    CHECK(ok);
    int64_t a[3] = {-9, -9, -9}, b[3] = {-9, -9, -9};
    CHECK(ct_idmap_export(m, a, b, 2) == sz && a[2] == -9 && b[2] == -9 && a[0] != -9);
    /* export by index: every id at its index, live set exactly there; hw bounds the writes;
     * an erased id's index stays not live */
    int64_t *at = (int64_t *)xalloc((sz + 1) * sizeof(int64_t));
    uint8_t *live = (uint8_t *)calloc(sz + 1, 1);
    at[sz] = -9;
    CHECK(ct_idmap_export_by_index(m, at, live, sz / 2) == sz / 2);
    ok = 1;
    for (size_t i = 0; i < sz; i++) LOOP_CHECK(ok, live[i] == (i < sz / 2));
    CHECK(ok);
    CHECK(ct_idmap_export_by_index(m, at, live, sz + 1) == sz && at[sz] == -9 && live[sz] == 0);
    ok = 1;
    for (size_t i = 0; i < sz; i++) LOOP_CHECK(ok, at[ex[i]] == ei[i] && live[i] == 1);
    CHECK(ok);
    int64_t gone;
    CHECK(ct_idmap_erase(m, &ei[7], 1, &gone) == 1 && gone == ex[7]);
    memset(live, 0, sz + 1);
    CHECK(ct_idmap_export_by_index(m, at, live, sz) == sz - 1);
    ok = 1;
    for (size_t i = 0; i < sz; i++) LOOP_CHECK(ok, live[i] == ((int64_t)i != ex[7]) && (!live[i] || at[i] != ei[7]));
    CHECK(ok);
    /* live from the free list: the same flags, 0 at and above the high water mark */
    uint8_t *lv = (uint8_t *)xalloc(sz + 2);
    memset(lv, 7, sz + 2);
    CHECK(ct_idmap_live(m, lv, sz + 1) == sz - 1 && lv[sz] == 0 && lv[sz + 1] == 7);
    ok = 1;
    for (size_t i = 0; i < sz; i++) LOOP_CHECK(ok, lv[i] == live[i]);
    CHECK(ok);
    CHECK(ct_idmap_live(m, lv, (size_t)ex[7]) == (size_t)ex[7] && ct_idmap_live(m, NULL, 0) == 0);
    /* export marked: the pairs at marked indices (here every third), each once; NULL: all */
    memset(lv, 0, sz + 2);
    size_t want = 0;
    for (size_t i = 0; i < sz; i += 3) lv[i] = 1, want += live[i];
    int64_t *mi = (int64_t *)xalloc(sz * sizeof(int64_t)), *mx = (int64_t *)xalloc(sz * sizeof(int64_t));
    CHECK(ct_idmap_export_marked(m, lv, sz, mi, mx, sz) == want);
    ok = 1;
    for (size_t i = 0; i < want; i++) {
        LOOP_CHECK(ok, mx[i] >= 0 && (size_t)mx[i] < sz && lv[mx[i]] == 1 && at[mx[i]] == mi[i]);
        if (mx[i] >= 0 && (size_t)mx[i] < sz) lv[mx[i]] = 2; /* a second pair at it fails */
    }
    CHECK(ok);
    CHECK(ct_idmap_export_marked(m, lv, 1, mi, mx, sz) == (live[0] ? 1u : 0u)); /* hw bounds the marks read */
    CHECK(ct_idmap_export_marked(m, lv, sz, mi, mx, 2) == 2);
    CHECK(ct_idmap_export_marked(m, NULL, 0, mi, mx, sz) == sz - 1);
    uint8_t *none = (uint8_t *)malloc(1); /* hw 0: no mark may be read (ASan: none + 1 is not) */
    CHECK(none != NULL && ct_idmap_export_marked(m, none + 1, 0, mi, mx, sz) == 0);
    free(none);
    free(mi);
    free(mx);
    free(lv);
    free(at);
    free(live);
    /* clear */
    ct_idmap_clear(m);
    CHECK(ct_idmap_size(m) == 0 && ct_idmap_high_water(m) == 0);
    CHECK(ct_idmap_check(m) == 0);
    CHECK(ct_idmap_export(m, a, b, 3) == 0);
    CHECK(ct_idmap_find(m, ids, N, o) == 0);
    int64_t one = ids[7], oi = -5;
    CHECK(ct_idmap_find_or_insert(m, &one, 1, &oi, NULL) == 1 && oi == 0);
    /* free list is emptied by clear: after erase + clear, new ids start at 0 again */
    CHECK(ct_idmap_erase(m, &one, 1, NULL) == 1);
    ct_idmap_clear(m);
    CHECK(ct_idmap_find_or_insert(m, ids, 3, o, NULL) == 3 && o[0] == 0 && o[1] == 1 && o[2] == 2);
    ct_idmap_free(m);
    /* capacity hint */
    m = ct_idmap_new(N);
    CHECK(m && ct_idmap_capacity(m) >= N);
    bytes = ct_idmap_bytes(m);
    CHECK(ct_idmap_find_or_insert(m, ids, N, o, NULL) == N && ct_idmap_bytes(m) == bytes);
    ct_idmap_free(m);
    free(seen);
    free(chk);
    free(ei);
    free(ex);
    free(more);
    free(ids);
    free(o);
}

/* Randomized churn against a reference that simulates map and allocator exactly. */
/* A reserve sizes every segment for its share of the ids at load 9/16 (capacities need not be
 * powers of two), so a pre-sized map costs about 29 bytes per id whatever the count: with
 * power-of-two segments it swung between 21 and 43 with the count. Small-segment builds pay
 * more for the per-segment margin. */
static void test_reserve_bytes(void) {
    const size_t ns[] = {10000, 100000, 700000, 3000000};
    const double bound = CT_IDMAP_SEG_MAX_LOG_FOR_TEST >= 17 ? 30.0 : 39.0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        ct_idmap *m = ct_idmap_new(ns[i]);
        CHECK(m != NULL);
        if (!m) continue;
        const double per_id = (double)ct_idmap_bytes(m) / (double)ns[i];
        if (per_id > bound) printf("idmap_test: reserve(%zu): %.2f bytes/id > %.1f\n", ns[i], per_id, bound);
        CHECK(per_id <= bound);
        CHECK(ct_idmap_capacity(m) >= ns[i]);
        CHECK(ct_idmap_check(m) == 0);
        ct_idmap_free(m);
    }
}

/* hint 0: segments grown by inserts (power-of-two capacities); hint P: sized by a reserve (any
 * multiple of 16), where probe runs and backward shifts wrap at other places */
static void test_churn(size_t hint) {
    enum { P = 60000, ROUNDS = 400, MAXB = 3000 };
    int64_t *pool = (int64_t *)xalloc(P * sizeof(int64_t));
    int64_t *ref = (int64_t *)xalloc(P * sizeof(int64_t)); /* index of pool[i] or -1 */
    int64_t *rfree = (int64_t *)xalloc((P + 16) * sizeof(int64_t));
    size_t rfree_len = 0, rsize = 0;
    int64_t rhw = 0;
    /* distinct pool ids: random, extremes, small sequential */
    for (int i = 0; i < P; i++) {
        if (i < 1000) pool[i] = i - 500;
        else pool[i] = (int64_t)rnd();
    }
    pool[1000] = INT64_MIN;
    pool[1001] = INT64_MAX;
    for (int i = 1002; i < P; i++) /* a random 64-bit collision with 0..1001 is astronomically unlikely */
        if (pool[i] >= -500 && pool[i] < 500) pool[i] = (int64_t)rnd() | ((int64_t)1 << 40);
    for (int i = 0; i < P; i++) ref[i] = -1;

    ct_idmap *m = ct_idmap_new(hint);
    int *which = (int *)xalloc(MAXB * sizeof(int));
    int64_t *b = (int64_t *)xalloc(MAXB * sizeof(int64_t)), *o = (int64_t *)xalloc(MAXB * sizeof(int64_t));
    uint8_t *nw = (uint8_t *)xalloc(MAXB);
    int ok_find = 1, ok_ins = 1, ok_er = 1, ok_cnt = 1, ok_inv = 1;
    for (int r = 0; r < ROUNDS; r++) {
        int n = (int)(rnd() % MAXB);
        int range = (int)(rnd() % 3 == 0 ? 2000 : P); /* sometimes a hot range with many dups */
        for (int i = 0; i < n; i++) which[i] = (int)(rnd() % (uint64_t)range), b[i] = pool[which[i]];
        int op = (int)(rnd() % 10);
        if (op < 3) { /* find */
            size_t f = ct_idmap_find(m, b, n, o), rf = 0;
            for (int i = 0; i < n; i++) {
                LOOP_CHECK(ok_find, o[i] == ref[which[i]]);
                rf += ref[which[i]] >= 0;
            }
            LOOP_CHECK(ok_cnt, f == rf);
        } else if (op < 7) { /* insert */
            int64_t got = ct_idmap_find_or_insert(m, b, n, o, nw);
            int64_t exp = 0;
            for (int i = 0; i < n; i++) {
                int w = which[i];
                int fresh = 0;
                if (ref[w] < 0) {
                    ref[w] = rfree_len ? rfree[--rfree_len] : rhw++;
                    rsize++;
                    exp++;
                    fresh = 1;
                }
                LOOP_CHECK(ok_ins, o[i] == ref[w] && nw[i] == fresh);
            }
            LOOP_CHECK(ok_cnt, got == exp);
        } else { /* erase */
            int64_t got = ct_idmap_erase(m, b, n, (r & 1) ? o : NULL);
            int64_t exp = 0;
            for (int i = 0; i < n; i++) {
                int w = which[i];
                int64_t e = -1;
                if (ref[w] >= 0) {
                    e = ref[w];
                    rfree[rfree_len++] = e;
                    ref[w] = -1;
                    rsize--;
                    exp++;
                }
                if (r & 1) LOOP_CHECK(ok_er, o[i] == e);
            }
            LOOP_CHECK(ok_cnt, got == exp);
        }
        LOOP_CHECK(ok_cnt, ct_idmap_size(m) == rsize && ct_idmap_high_water(m) == rhw);
        LOOP_CHECK(ok_inv, ct_idmap_check(m) == 0);
        if (r == ROUNDS / 2) { /* occasionally clear in the middle */
            ct_idmap_clear(m);
            for (int i = 0; i < P; i++) ref[i] = -1;
            rfree_len = 0;
            rsize = 0;
            rhw = 0;
        }
    }
    CHECK(ok_find);
    CHECK(ok_ins);
    CHECK(ok_er);
    CHECK(ok_cnt);
    CHECK(ok_inv);
    /* full export comparison */
    int64_t *pairs;
    size_t en = export_sorted(m, &pairs);
    CHECK(en == rsize);
    int64_t *rp = (int64_t *)xalloc(2 * rsize * sizeof(int64_t) + 16);
    size_t k = 0;
    for (int i = 0; i < P; i++)
        if (ref[i] >= 0) rp[2 * k] = pool[i], rp[2 * k + 1] = ref[i], k++;
    qsort(rp, k, 2 * sizeof(int64_t), cmp_pair);
    CHECK(k == rsize && memcmp(rp, pairs, 2 * k * sizeof(int64_t)) == 0);
    free(rp);
    free(pairs);
    free(nw);
    free(o);
    free(b);
    free(which);
    free(rfree);
    free(ref);
    free(pool);
    ct_idmap_free(m);
}

/* Out-of-memory atomicity: fail the k-th allocation for k = 0, 1, ... until the call
 * succeeds; after each failure the map must equal a twin that never saw the call, and the
 * twin and the map must then answer the same follow-up calls identically. */
static void build_twins(ct_idmap **a, ct_idmap **b, const int64_t *base, size_t nb) {
    *a = ct_idmap_new(0);
    *b = ct_idmap_new(0);
    if (!*a || !*b) exit(2);
    int64_t *o = (int64_t *)xalloc(nb * sizeof(int64_t));
    ct_idmap_find_or_insert(*a, base, nb, o, NULL);
    ct_idmap_find_or_insert(*b, base, nb, o, NULL);
    /* some freed indices in the allocator */
    ct_idmap_erase(*a, base, nb / 10, NULL);
    ct_idmap_erase(*b, base, nb / 10, NULL);
    free(o);
}

static void test_oom(void) {
    enum { NB = 20000, NI = 60000 };
    int64_t *base = (int64_t *)xalloc(NB * sizeof(int64_t));
    int64_t *ins = (int64_t *)xalloc(NI * sizeof(int64_t));
    int64_t *o1 = (int64_t *)xalloc(NI * sizeof(int64_t)), *o2 = (int64_t *)xalloc(NI * sizeof(int64_t));
    for (int i = 0; i < NB; i++) base[i] = (int64_t)rnd();
    for (int i = 0; i < NI; i++) ins[i] = i % 3 ? (int64_t)rnd() : base[i % NB]; /* mix of new/old */

    /* find_or_insert: a batch forcing growth of many segments and the directory */
    int failures = 0, ok = 1;
    for (long k = 0;; k++) {
        ct_idmap *a, *b;
        build_twins(&a, &b, base, NB);
        size_t bytes = ct_idmap_bytes(a), cap = ct_idmap_capacity(a);
        ct_idmap_fail_after = k;
        int64_t r = ct_idmap_find_or_insert(a, ins, NI, o1, NULL);
        ct_idmap_fail_after = -1;
        if (r < 0) {
            failures++;
            LOOP_CHECK(ok, maps_equal(a, b));
            LOOP_CHECK(ok, ct_idmap_bytes(a) == bytes && ct_idmap_capacity(a) == cap);
            LOOP_CHECK(ok, ct_idmap_check(a) == 0);
            /* same follow-up behaviour (this checks the free list too) */
            int64_t ra = ct_idmap_find_or_insert(a, ins, NI, o1, NULL);
            int64_t rb = ct_idmap_find_or_insert(b, ins, NI, o2, NULL);
            LOOP_CHECK(ok, ra == rb && ra > 0 && memcmp(o1, o2, NI * sizeof(int64_t)) == 0);
            LOOP_CHECK(ok, maps_equal(a, b));
            LOOP_CHECK(ok, ct_idmap_check(a) == 0 && ct_idmap_check(b) == 0);
        } else {
            int64_t rb = ct_idmap_find_or_insert(b, ins, NI, o2, NULL);
            LOOP_CHECK(ok, r == rb && memcmp(o1, o2, NI * sizeof(int64_t)) == 0);
            LOOP_CHECK(ok, maps_equal(a, b));
        }
        ct_idmap_free(a);
        ct_idmap_free(b);
        if (r >= 0) break;
        if (k > 10000) {
            ok = 0;
            break;
        }
    }
    CHECK(ok);
    CHECK(failures >= 2);

    /* erase: the free list must grow; failure leaves everything as it was */
    failures = 0;
    ok = 1;
    for (long k = 0;; k++) {
        ct_idmap *a, *b;
        build_twins(&a, &b, base, NB);
        ct_idmap_fail_after = k;
        int64_t r = ct_idmap_erase(a, base + NB / 10, NB - NB / 10, o1);
        ct_idmap_fail_after = -1;
        if (r < 0) {
            failures++;
            LOOP_CHECK(ok, maps_equal(a, b));
            int64_t ra = ct_idmap_erase(a, base + NB / 10, NB / 2, o1);
            int64_t rb = ct_idmap_erase(b, base + NB / 10, NB / 2, o2);
            LOOP_CHECK(ok, ra == rb && ra == NB / 2 && memcmp(o1, o2, (NB / 2) * sizeof(int64_t)) == 0);
            ra = ct_idmap_find_or_insert(a, ins, NI, o1, NULL);
            rb = ct_idmap_find_or_insert(b, ins, NI, o2, NULL);
            LOOP_CHECK(ok, ra == rb && memcmp(o1, o2, NI * sizeof(int64_t)) == 0);
        } else {
            LOOP_CHECK(ok, r == NB - NB / 10);
        }
        ct_idmap_free(a);
        ct_idmap_free(b);
        if (r >= 0) break;
    }
    CHECK(ok);
    CHECK(failures >= 1);

    /* reserve and new */
    failures = 0;
    ok = 1;
    for (long k = 0;; k++) {
        ct_idmap *a, *b;
        build_twins(&a, &b, base, NB);
        size_t bytes = ct_idmap_bytes(a);
        ct_idmap_fail_after = k;
        int r = ct_idmap_reserve(a, 1000000);
        ct_idmap_fail_after = -1;
        if (r < 0) {
            failures++;
            LOOP_CHECK(ok, maps_equal(a, b) && ct_idmap_bytes(a) == bytes);
        } else {
            LOOP_CHECK(ok, ct_idmap_capacity(a) >= NB + 1000000 && maps_equal(a, b));
        }
        ct_idmap_free(a);
        ct_idmap_free(b);
        if (r == 0) break;
    }
    CHECK(ok);
    CHECK(failures >= 2);
    failures = 0;
    for (long k = 0;; k++) {
        ct_idmap_fail_after = k;
        ct_idmap *a = ct_idmap_new(100000);
        ct_idmap_fail_after = -1;
        if (!a) {
            failures++;
            continue;
        }
        CHECK(ct_idmap_capacity(a) >= 100000);
        ct_idmap_free(a);
        break;
    }
    CHECK(failures >= 3);
    /* an absurd reserve is reported as out-of-memory, not a crash */
    ct_idmap *m = ct_idmap_new(0);
    CHECK(ct_idmap_reserve(m, SIZE_MAX / 2) == -1);
    CHECK(ct_idmap_size(m) == 0);
    int64_t x = 3, y;
    CHECK(ct_idmap_find_or_insert(m, &x, 1, &y, NULL) == 1 && y == 0);
    ct_idmap_free(m);
    free(base);
    free(ins);
    free(o1);
    free(o2);
}

/* The two builds of the batched operations (csrc/idmap/isa.h) give the same results, and a map is
 * one data structure whichever build touched it: one map switches build every batch (and every
 * kind of operation meets both builds: batch k runs operation k % 4 on build (k ^ k / 4) & 1),
 * its twin stays on the baseline, and every output and the final contents agree. */
static void test_isa_builds_agree(void) {
    enum { NBATCH = 120, B = 3000 };
    ct_idmap *a = ct_idmap_new(0), *b = ct_idmap_new(0);
    if (!a || !b) exit(2);
    int64_t *ids = (int64_t *)xalloc(B * sizeof(int64_t));
    int64_t *oa = (int64_t *)xalloc(B * sizeof(int64_t)), *ob = (int64_t *)xalloc(B * sizeof(int64_t));
    uint8_t na[B], nb[B];
    int ok = 1;
    const int saved = ct_idmap_baseline_only;
    for (int k = 0; k < NBATCH; k++) {
        for (int i = 0; i < B; i++) /* new ids, repeats of recent ones, and duplicates */
            ids[i] = (int64_t)(rnd() % (uint64_t)(B * (k + 1))) * 0x9E3779B97F4A7C15LL;
        const int build_a = (k ^ (k >> 2)) & 1; /* 1: baseline */
        ct_idmap_baseline_only = build_a;
        int64_t ra;
        size_t fa;
        switch (k % 4) {
        case 0:
        case 1:
            ra = ct_idmap_find_or_insert(a, ids, B, oa, na);
            ct_idmap_baseline_only = 1;
            LOOP_CHECK(ok, ra == ct_idmap_find_or_insert(b, ids, B, ob, nb) && memcmp(na, nb, B) == 0);
            break;
        case 2:
            ra = ct_idmap_erase(a, ids, B / 3, oa);
            ct_idmap_baseline_only = 1;
            LOOP_CHECK(ok, ra == ct_idmap_erase(b, ids, B / 3, ob));
            break;
        default:
            fa = ct_idmap_find(a, ids, B, oa);
            ct_idmap_baseline_only = 1;
            LOOP_CHECK(ok, fa == ct_idmap_find(b, ids, B, ob));
            ct_idmap_baseline_only = build_a;
            LOOP_CHECK(ok, ct_idmap_reserve(a, B) == 0);
            ct_idmap_baseline_only = 1;
            LOOP_CHECK(ok, ct_idmap_reserve(b, B) == 0);
        }
        LOOP_CHECK(ok, memcmp(oa, ob, (k % 4 == 2 ? B / 3 : B) * sizeof(int64_t)) == 0);
    }
    ct_idmap_baseline_only = saved;
    CHECK(ok);
    CHECK(maps_equal(a, b));
    CHECK(ct_idmap_check(a) == 0 && ct_idmap_check(b) == 0);
    CHECK(ct_idmap_size(a) > 100000); /* the maps grew through many splits */
    ct_idmap_baseline_only = 1;
    CHECK(strcmp(ct_idmap_isa(), "baseline") == 0);
#ifdef CT_IDMAP_DISPATCH /* the CPU's build, when it has x86-64-v3 */
    ct_idmap_baseline_only = 0;
    CHECK(strcmp(ct_idmap_isa(), __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3" : "baseline") == 0);
#endif
    ct_idmap_baseline_only = saved;
    ct_idmap_free(a);
    ct_idmap_free(b);
    free(ids);
    free(oa);
    free(ob);
}

static void run_all(void) {
    test_empty_and_null();
    test_contiguous_and_dups();
    test_find_never_inserts();
    test_extreme_ids();
    test_hash_collisions();
    test_structured_ids();
    test_erase_reuse();
    test_pack();
    test_growth();
    test_reserve_clear_export();
    test_reserve_bytes();
    test_churn(0);
    test_churn(60000);
    test_oom();
}

int main(void) {
    /* every test with the build the CPU gets, then with the baseline build */
    printf("idmap_test: batched operations built for %s\n", ct_idmap_isa());
    run_all();
    ct_idmap_baseline_only = 1;
    run_all();
    ct_idmap_baseline_only = 0;
    test_isa_builds_agree();
    printf("idmap: %ld passed, %ld failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
