/* batch.c.h - the id map's batched operations: the pipelined probe engine, find, find_or_insert
 * (claim, then assign indices in batch order) and erase (backward shift).
 * A part of idmap.c.h (included by it, in the order listed there; not a header of its own). */

#ifndef CT_IDMAP_CHUNK
#define CT_IDMAP_CHUNK 2048 /* ids per probe chunk (deferred probes wait on the stack: 64 KiB) */
#endif
#define CHUNK CT_IDMAP_CHUNK

/* val of a slot claimed by the current find_or_insert batch whose index is not yet assigned */
#define CLAIMED INT64_MIN

typedef struct deferred {
    const dirent_t *d;
    slot_t *l; /* the line last scanned: full, without the id */
    uint64_t h;
    size_t i;  /* batch position */
} deferred_t;

/* Scan one line: *e gets bit j set where slot j is empty, and the return value bit j set
 * where slot j holds `key` and is not empty. SSE2 on x86-64 (pcmpeqq with SSE4.1). */
#if defined(__SSE2__) && !defined(CT_IDMAP_NO_SIMD)
#include <emmintrin.h>
#if defined(__SSE4_1__)
#include <smmintrin.h>
#endif
static inline __m128i eq64(__m128i a, __m128i b) {
#if defined(__SSE4_1__)
    return _mm_cmpeq_epi64(a, b);
#else
    __m128i c = _mm_cmpeq_epi32(a, b);
    return _mm_and_si128(c, _mm_shuffle_epi32(c, _MM_SHUFFLE(2, 3, 0, 1)));
#endif
}
static inline unsigned line_scan(const slot_t *l, int64_t key, unsigned *e) {
    /* compare each slot {key_j, val_j} with {key, 0}: lane 0 = match, lane 1 = empty */
    const __m128i kz = _mm_set_epi64x(0, key);
    const __m128i c0 = eq64(_mm_load_si128((const __m128i *)&l[0]), kz);
    const __m128i c1 = eq64(_mm_load_si128((const __m128i *)&l[1]), kz);
    const __m128i c2 = eq64(_mm_load_si128((const __m128i *)&l[2]), kz);
    const __m128i c3 = eq64(_mm_load_si128((const __m128i *)&l[3]), kz);
    /* low dword of every lane: a = {m0, e0, m1, e1}, b = {m2, e2, m3, e3} */
    const __m128 a = _mm_shuffle_ps(_mm_castsi128_ps(c0), _mm_castsi128_ps(c1), _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 b = _mm_shuffle_ps(_mm_castsi128_ps(c2), _mm_castsi128_ps(c3), _MM_SHUFFLE(2, 0, 2, 0));
    const unsigned mm = (unsigned)_mm_movemask_ps(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    const unsigned ee = (unsigned)_mm_movemask_ps(_mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    *e = ee;
    return mm & ~ee;
}
#else
static inline unsigned line_scan(const slot_t *l, int64_t key, unsigned *e) {
    const unsigned ee = (unsigned)(l[0].val == 0) | (unsigned)(l[1].val == 0) << 1 |
                        (unsigned)(l[2].val == 0) << 2 | (unsigned)(l[3].val == 0) << 3;
    const unsigned mm = (unsigned)(l[0].key == key) | (unsigned)(l[1].key == key) << 1 |
                        (unsigned)(l[2].key == key) << 2 | (unsigned)(l[3].key == key) << 3;
    *e = ee;
    return mm & ~ee;
}
#endif

/* bit j set where slot j of the line at l is empty */
static inline unsigned line_empties(const slot_t *l) {
#if defined(__SSE2__) && !defined(CT_IDMAP_NO_SIMD)
    const __m128i z = _mm_setzero_si128();
    const __m128i v01 = _mm_unpackhi_epi64(_mm_load_si128((const __m128i *)&l[0]), _mm_load_si128((const __m128i *)&l[1]));
    const __m128i v23 = _mm_unpackhi_epi64(_mm_load_si128((const __m128i *)&l[2]), _mm_load_si128((const __m128i *)&l[3]));
    return (unsigned)_mm_movemask_pd(_mm_castsi128_pd(eq64(v01, z))) |
           (unsigned)_mm_movemask_pd(_mm_castsi128_pd(eq64(v23, z))) << 2;
#else
    return (unsigned)(l[0].val == 0) | (unsigned)(l[1].val == 0) << 1 | (unsigned)(l[2].val == 0) << 2 |
           (unsigned)(l[3].val == 0) << 3;
#endif
}

static inline unsigned ctz8(unsigned x) { /* x in 1..15, or with bit 3 forced: 0..3 */
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctz(x | 8u);
#else
    unsigned r = 0;
    x |= 8u;
    while (!(x & 1)) x >>= 1, r++;
    return r;
#endif
}

/* One probe step: scan the line l of segment d for ids[i] (branch-free).
 * Resolved: writes out[i] (and claims a slot when inserting). Unresolved (line full, no
 * match): appends a deferred probe and prefetches the line after l (past the segment's end
 * when the probe wraps: a harmless miss, the deferred pass wraps; see next_line).
 * Linear probing with backward-shift deletion keeps every id's run from its home line to
 * its slot free of empty slots, so within a line a match decides before an empty slot. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline void probe_step(const dirent_t *d, slot_t *l, uint64_t h, size_t i, int64_t key, int64_t *out,
                              deferred_t *dq, size_t *nd, size_t *cnt, slot_t *dummy, const int insert) {
    unsigned e;
    const unsigned k = line_scan(l, key, &e);
    const uint64_t unresolved = (k | e) == 0;
    /* arithmetic selects keep the compiler from turning this into branches: the next line
     * only when needed, else l again (already in the cache) */
    const slot_t *next = l + (LINE_SLOTS & (0 - (unsigned)unresolved));
    if (insert) PREFETCH_W(next);
    else PREFETCH_R(next);
    deferred_t *q = &dq[*nd];
    q->d = d;
    q->l = l;
    if (insert) q->h = h; /* a find has no use for it */
    q->i = i;
    *nd += (size_t)unresolved;
    /* Within a line a match comes before any empty slot (runs have no empty slot), so the
     * lowest bit of k | e is the id's slot: found, or the one to claim. */
    slot_t *ps = &l[ctz8(k | e)];
    const uint64_t found = k != 0;
    if (!insert) {
        /* found: val - 1; else -1 */
        out[i] = (int64_t)(((uint64_t)ps->val & (0 - found)) - 1);
        *cnt += (size_t)found;
        return;
    }
    const uint64_t claim = (found | unresolved) ^ 1;
    slot_t *t = (slot_t *)((uintptr_t)dummy ^ (((uintptr_t)ps ^ (uintptr_t)dummy) & (0 - (uintptr_t)claim)));
    t->key = key;
    t->val = CLAIMED;
    d->seg->size += (size_t)claim;
    d->seg->hi += (size_t)((h >> d->nb) & claim);
    *cnt += (size_t)claim;
    /* found or just claimed (garbage if unresolved: rewritten when resolved) */
    const int64_t pv = ps->val;
    const uint64_t pend = pv == CLAIMED;
    const uint64_t a = ~(uint64_t)(uintptr_t)ps, b = (uint64_t)pv - 1;
    out[i] = (int64_t)(b ^ ((a ^ b) & (0 - pend)));
}

/* the line after l in segment d, wrapping around its end */
static inline slot_t *next_line(const dirent_t *d, slot_t *l) {
    slot_t *x = l + LINE_SLOTS;
    return x == d->slots + d->cap ? d->slots : x;
}

/* The probe engine shared by find and phase 1 of find_or_insert. Probing goes a cache
 * line at a time. The home line of id i+PF is prefetched while id i is probed. Per chunk of
 * CHUNK ids, probes whose line is full go on to the next line in a later pass over the
 * chunk's deferred probes (their lines were prefetched when deferred), so no step waits on
 * memory that was not prefetched and no step takes a data-dependent branch.
 * insert == 0: out[i] = index or -1; returns the number found.
 * insert == 1: an absent id is written to the first empty slot with val CLAIMED and
 * out[i] = ~(address of its slot) (negative) for claimed or pending-claimed ids, resolved
 * per chunk in batch order by assign_chunk(); returns the number claimed. Only inserts
 * happen during a pass (slots only fill), so deferred positions stay valid, and a later
 * duplicate of an id follows its first occurrence pass by pass.
 * hashed: out[0..n) already holds mix64(ids[i]). */
static void assign_chunk(ct_idmap *m, size_t c0, size_t c1, int64_t *out, uint8_t *is_new);

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define ALWAYS_INLINE inline
#endif

static ALWAYS_INLINE size_t probe_batch(ct_idmap *mm, const ct_idmap *m, const int64_t *ids, size_t n,
                                 int64_t *out, uint8_t *is_new, const int insert, const int hashed) {
    const dirent_t *dir = m->dir;
    const unsigned sh = 64 - m->gdepth;
    struct {
        const dirent_t *d;
        slot_t *l; /* home line */
        uint64_t h;
    } ring[PF]; /* the ids PF ahead, their home lines already prefetched */
    deferred_t dq[CHUNK];
    slot_t dummy = {0, 0};
    size_t cnt = 0;
    const size_t pre = n < PF ? n : PF;
    for (size_t j = 0; j < pre; j++) {
        const uint64_t h = hashed ? (uint64_t)out[j] : mix64(ids[j]);
        const dirent_t *d = dir_of(dir, sh, h);
        ring[j].d = d;
        ring[j].h = h;
        ring[j].l = d->slots + home_of(h, d->cap);
        if (insert) PREFETCH_W(ring[j].l);
        else PREFETCH_R(ring[j].l);
    }
    const size_t last = n > PF ? n - PF : 0;
    for (size_t c0 = 0; c0 < n; c0 += CHUNK) {
        const size_t c1 = n - c0 < CHUNK ? n : c0 + CHUNK;
        size_t nd = 0;
        /* ids before c1r fetch the id PF ahead; the batch's last PF have none */
        const size_t c1r = c1 < last ? c1 : (last > c0 ? last : c0);
        for (size_t i = c0; i < c1r; i++) {
            const size_t r = i & (PF - 1);
            const dirent_t *d = ring[r].d;
            slot_t *l = ring[r].l;
            const uint64_t h = insert ? ring[r].h : 0; /* (a find has no use for it) */
            const uint64_t h2 = hashed ? (uint64_t)out[i + PF] : mix64(ids[i + PF]);
            const dirent_t *d2 = dir_of(dir, sh, h2);
            slot_t *l2 = d2->slots + home_of(h2, d2->cap);
            ring[r].d = d2;
            ring[r].l = l2;
            if (insert) {
                ring[r].h = h2;
                PREFETCH_W(l2);
            } else {
                PREFETCH_R(l2);
            }
            probe_step(d, l, h, i, ids[i], out, dq, &nd, &cnt, &dummy, insert);
        }
        for (size_t i = c1r; i < c1; i++) {
            const size_t r = i & (PF - 1);
            const uint64_t h = insert ? ring[r].h : 0;
            probe_step(ring[r].d, ring[r].l, h, i, ids[i], out, dq, &nd, &cnt, &dummy, insert);
        }
        while (nd) { /* deferred passes: compacts dq in place (write index <= read index) */
            size_t nd2 = 0;
            for (size_t j = 0; j < nd; j++) {
                const deferred_t q = dq[j];
                probe_step(q.d, next_line(q.d, q.l), insert ? q.h : 0, q.i, ids[q.i], out, dq, &nd2, &cnt,
                           &dummy, insert);
            }
            nd = nd2;
        }
        if (insert) assign_chunk(mm, c0, c1, out, is_new);
    }
    return cnt;
}

/* phase 2 of find_or_insert for out[c0..c1): in batch order, the first occurrence of a
 * claimed id gets the next index (free list first, LIFO; else high_water++). */
static void assign_chunk(ct_idmap *m, size_t c0, size_t c1, int64_t *out, uint8_t *is_new) {
    int64_t hw = m->high_water;
    int64_t *fl = m->free_list;
    size_t fl_len = m->free_len;
    slot_t other = {0, 1};
    for (size_t i = c0; i < c1; i++) {
        const int64_t o = out[i];
        const int pend = o < 0;
        slot_t *s = pend ? (slot_t *)~(uintptr_t)o : &other;
        const int fresh = s->val == CLAIMED;
        if (is_new) is_new[i] = (uint8_t)fresh;
        if (fresh) {
            const int64_t idx = fl_len ? fl[--fl_len] : hw++;
            s->val = idx + 1;
            out[i] = idx;
        } else {
            out[i] = pend ? s->val - 1 : o;
        }
    }
    m->high_water = hw;
    m->free_len = fl_len;
}

size_t BATCH_OP(find)(const ct_idmap *m, const int64_t *ids, size_t n, int64_t *out) {
    return probe_batch(NULL, m, ids, n, out, NULL, 0, 0);
}

static size_t claim_batch(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out, uint8_t *is_new) {
    return probe_batch(m, m, ids, n, out, is_new, 1, 0);
}

static size_t claim_batch_hashed(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out,
                                 uint8_t *is_new) {
    return probe_batch(m, m, ids, n, out, is_new, 1, 1);
}

/* make sure no segment can overflow during a pass over ids; -1 (unchanged) on OOM.
 * Leaves mix64(ids[i]) in hout[i]. */
static int plan_batch(ct_idmap *m, const int64_t *ids, size_t n, int64_t *hout) {
    const size_t maxt = n < m->nsegs ? n : m->nsegs;
    seg_t **touched = (seg_t **)xmalloc(maxt * sizeof(seg_t *));
    if (!touched) return -1;
    size_t nt = 0;
    {
        const dirent_t *dir = m->dir;
        const unsigned sh = 64 - m->gdepth;
        for (size_t i = 0; i < n; i++) {
            const uint64_t h = mix64(ids[i]);
            hout[i] = (int64_t)h;
            seg_t *s = dir_of(dir, sh, h)->seg;
            if (s->pending++ == 0) touched[nt++] = s;
        }
    }
    int over = 0;
    for (size_t t = 0; t < nt; t++) {
        seg_t *s = touched[t];
        if (s->pending > s->limit - s->size) s->flag = 1, over = 1;
    }
    int rc = 0;
    if (over) {
        /* drop ids already present from the bound of the segments that would overflow */
        const dirent_t *dir = m->dir;
        const unsigned sh = 64 - m->gdepth;
        for (size_t i = 0; i < n; i++) {
            const uint64_t h = (uint64_t)hout[i];
            const dirent_t *d = dir_of(dir, sh, h);
            if (!d->seg->flag) continue;
            if (probe(d->slots, d->cap, home_of(h, d->cap), ids[i])->val != 0) d->seg->pending--;
        }
        for (size_t t = 0; t < nt; t++) {
            seg_t *s = touched[t];
            if (s->flag && s->pending <= s->limit - s->size) s->flag = 0;
        }
        rc = grow_segments(m, touched, nt, PLAN_BATCH, ids, n);
    }
    for (size_t t = 0; t < nt; t++) touched[t]->pending = 0, touched[t]->flag = 0, touched[t]->k = 0;
    xfree(touched);
    if (rc == 0) recompute_guard(m);
    return rc;
}

int64_t BATCH_OP(find_or_insert)(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out,
                                 uint8_t *is_new) {
    if (n == 0) return 0;
    size_t claimed;
    /* phase 1 claims slots for absent ids, phase 2 assigns their indices (per chunk);
     * no segment can overflow: planned first unless the guard shows it cannot happen */
    if (m->guard >= 0 && n <= (size_t)m->guard) {
        claimed = claim_batch(m, ids, n, out, is_new);
    } else {
        if (plan_batch(m, ids, n, out) != 0) return -1;
        claimed = claim_batch_hashed(m, ids, n, out, is_new); /* hashes left in out */
    }
    m->size += claimed;
    m->guard -= (int64_t)claimed;
    return (int64_t)claimed;
}

/* Erase runs one id at a time in order (backward shifts move ids, so probes cannot be
 * deferred), prefetching the home line of id i+PF. */
int64_t BATCH_OP(erase)(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out) {
    if (n == 0) return 0;
    if (free_reserve(m, n) != 0) return -1;
    const dirent_t *dir = m->dir;
    const unsigned sh = 64 - m->gdepth;
    int64_t *fl = m->free_list;
    size_t fl_len = m->free_len;
    size_t erased = 0;
    uint64_t ring[PF];
    const size_t pre = n < PF ? n : PF;
    for (size_t i = 0; i < pre; i++) {
        uint64_t h = mix64(ids[i]);
        const dirent_t *d = dir_of(dir, sh, h);
        ring[i] = h;
        PREFETCH_W(&d->slots[home_of(h, d->cap)]);
    }
    for (size_t i = 0; i < n; i++) {
        const uint64_t h = ring[i & (PF - 1)];
        if (LIKELY(i + PF < n)) {
            uint64_t h2 = mix64(ids[i + PF]);
            const dirent_t *d2 = dir_of(dir, sh, h2);
            ring[i & (PF - 1)] = h2;
            PREFETCH_W(&d2->slots[home_of(h2, d2->cap)]);
        }
        const dirent_t *d = dir_of(dir, sh, h);
        slot_t *slots = d->slots;
        const uint64_t cap = d->cap;
        slot_t *s = probe(slots, cap, home_of(h, cap), ids[i]);
        if (s->val == 0) {
            if (out) out[i] = -1;
            continue;
        }
        const int64_t idx = s->val - 1;
        if (out) out[i] = idx;
        fl[fl_len++] = idx;
        erased++;
        d->seg->size--;
        d->seg->hi -= (size_t)((h >> d->nb) & 1);
        /* backward-shift deletion: pull later ids of the run into the hole when the hole
         * lies within [their home, their slot) */
        uint64_t hole = (uint64_t)(s - slots), j = hole;
        for (;;) {
            j = wrap_add(j, 1, cap);
            slot_t *t = &slots[j];
            if (t->val == 0) break;
            uint64_t home = home_of(mix64(t->key), cap);
            if (ring_dist(home, j, cap) >= ring_dist(hole, j, cap)) {
                slots[hole] = *t;
                hole = j;
            }
        }
        slots[hole].key = 0;
        slots[hole].val = 0;
    }
    m->free_len = fl_len;
    m->size -= erased;
    return (int64_t)erased;
}
