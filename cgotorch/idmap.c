/* idmap.c - id map + index allocator for the dynamic hash embedding table.
 * See idmap.h for the contract. Pure C11 (+ __builtin_prefetch where available).
 *
 * Structure
 *   h = mix64(id)                       strong 64-bit finaliser (ids are often sequential)
 *   dir[h >> (64 - gdepth)]             extendible-hashing directory, entries {slots, mask, seg}
 *   seg: slots[cap], cap = 2^j          linear probing from h & (cap - 1), 16-byte slots
 *   slot: {key = id, val = index + 1}   val == 0 marks an empty slot, so no id value is reserved
 * A segment holding `depth` hash bits is shared by 2^(gdepth - depth) directory entries.
 * A full segment doubles while it is below SEG_MAX_SLOTS, then splits in two by the next
 * hash bit (the directory doubles when needed), so one growth step moves at most one
 * segment. Max load is 3/4. Deletion is backward-shift (no tombstones).
 *
 * Failure atomicity: find_or_insert computes, before touching anything, an upper bound
 * of the new ids per segment and acquires all memory for the growth it needs; only then
 * does it change the map. A guard (a lower bound of the smallest segment headroom)
 * lets batches that cannot overflow any segment skip this planning.
 *
 * Batched operations are software pipelined: the hash and the slot address of id i+PF are
 * computed and prefetched while id i is probed.
 */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* mmap, madvise */
#endif
#include "idmap.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#ifndef CT_IDMAP_PF
#define CT_IDMAP_PF 16 /* prefetch distance, must be a power of 2 */
#endif
#define PF CT_IDMAP_PF
#if (PF & (PF - 1)) != 0 || PF < 1
#error "CT_IDMAP_PF must be a power of two"
#endif

#ifndef CT_IDMAP_SEG_MAX_LOG
#define CT_IDMAP_SEG_MAX_LOG 17 /* 2^17 slots * 16 B = 2 MiB */
#endif
#define SEG_MIN_SLOTS ((size_t)16)
#define SEG_MAX_SLOTS ((size_t)1 << CT_IDMAP_SEG_MAX_LOG)
#define MAX_DEPTH 40u          /* directory depth limit (2^40 segments: never reached) */
#define MAX_SLOTS ((size_t)1 << 40) /* per segment; beyond this we report out-of-memory */

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_R(p) __builtin_prefetch((p), 0, 3)
#define PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PREFETCH_R(p) ((void)(p))
#define PREFETCH_W(p) ((void)(p))
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#endif

typedef struct slot {
    int64_t key;
    int64_t val; /* index + 1; 0 = empty */
} slot_t;

typedef struct seg {
    slot_t *slots;
    size_t cap; /* power of two */
    size_t size;
    size_t limit;    /* max ids before growth: cap * 3/4 */
    uint64_t prefix; /* the segment's top `depth` hash bits */
    unsigned depth;
    /* planning scratch, zero outside of a growth plan */
    unsigned flag;
    unsigned k;      /* planned split levels (0: resize in place) */
    size_t pending;  /* upper bound of ids this batch may add */
    size_t first;    /* first piece of its plan */
} seg_t;

typedef struct dirent {
    slot_t *slots;
    uint64_t mask;
    seg_t *seg;
} dirent_t;

struct ct_idmap {
    dirent_t *dir;
    unsigned gdepth; /* >= 1; directory has 2^gdepth entries */
    size_t nsegs;
    size_t size;
    int64_t guard; /* lower bound of min over segments of (limit - size) */
    size_t bytes;
    /* index allocator */
    int64_t high_water;
    int64_t *free_list; /* stack: reuse is LIFO */
    size_t free_len, free_cap;
};

/* ---------------------------------------------------------------- allocation */

long ct_idmap_fail_after = -1;

static int fail_now(void) {
    if (ct_idmap_fail_after < 0) return 0;
    if (ct_idmap_fail_after == 0) return 1;
    ct_idmap_fail_after--;
    return 0;
}

static void *xmalloc(size_t bytes) {
    if (fail_now()) return NULL;
    return malloc(bytes ? bytes : 1);
}

static void *xcalloc(size_t n, size_t size) {
    if (fail_now()) return NULL;
    if (n == 0 || size == 0) return calloc(1, 1);
    return calloc(n, size);
}

static void xfree(void *p) { free(p); }

/* Slot arrays, zero-filled. Arrays of 2 MiB and more are mapped 2 MiB-aligned and marked
 * for transparent huge pages (Linux): random probes into a large table otherwise pay a
 * TLB miss (a page walk) on nearly every access. */
#define HUGE_BYTES ((size_t)2 << 20)
#ifndef CT_IDMAP_NO_HUGE
#if defined(__linux__) && defined(MADV_HUGEPAGE) && defined(MAP_ANONYMOUS)
#define USE_HUGE 1
#endif
#endif

static slot_t *slots_alloc(size_t cap) {
#ifdef USE_HUGE
    const size_t bytes = cap * sizeof(slot_t);
    if (bytes >= HUGE_BYTES) {
        if (fail_now()) return NULL;
        size_t len = bytes + HUGE_BYTES;
        char *p = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == (char *)MAP_FAILED) return NULL;
        uintptr_t a = ((uintptr_t)p + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1);
        size_t head = a - (uintptr_t)p, tail = len - head - bytes;
        if (head) munmap(p, head);
        if (tail) munmap((char *)a + bytes, tail);
        madvise((void *)a, bytes, MADV_HUGEPAGE); /* advisory: ignore failure */
        return (slot_t *)a;
    }
#endif
    /* cache-line aligned, so that a probe line is one cache line */
    if (fail_now()) return NULL;
    slot_t *p = (slot_t *)aligned_alloc(64, cap * sizeof(slot_t)); /* cap >= 16: size % 64 == 0 */
    if (p) memset(p, 0, cap * sizeof(slot_t));
    return p;
}

static void slots_free(slot_t *p, size_t cap) {
    if (!p) return;
#ifdef USE_HUGE
    if (cap * sizeof(slot_t) >= HUGE_BYTES) {
        munmap(p, cap * sizeof(slot_t));
        return;
    }
#endif
    (void)cap;
    free(p);
}

/* ---------------------------------------------------------------- hashing */

static inline uint64_t mix64(int64_t id) {
    /* murmur3 fmix64: a bijection with full avalanche */
    uint64_t x = (uint64_t)id;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

/* floor(sqrt(x)), integer only (no libm) */
static uint64_t isqrt64(uint64_t x) {
    uint64_t r = 0, bit = (uint64_t)1 << 62;
    while (bit > x) bit >>= 2;
    while (bit) {
        if (x >= r + bit) {
            x -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
        bit >>= 2;
    }
    return r;
}

/* expected share plus 4 standard deviations plus 16, saturating */
static size_t with_margin(size_t share) {
    size_t m = (size_t)(4 * isqrt64(share) + 16);
    return share > SIZE_MAX - m ? SIZE_MAX : share + m;
}

static inline size_t limit_for(size_t cap) { return cap - cap / 4; }

/* smallest power-of-two capacity >= SEG_MIN_SLOTS whose limit holds n ids; 0 if too big */
static size_t cap_for(size_t n) {
    size_t cap = SEG_MIN_SLOTS;
    while (limit_for(cap) < n) {
        if (cap >= MAX_SLOTS) return 0;
        cap <<= 1;
    }
    return cap;
}

#define LINE_SLOTS 4u /* 64-byte cache line of 16-byte slots */

/* probing starts at the first slot of the cache line the hash points into */
static inline uint64_t home_of(uint64_t h, uint64_t mask) {
    return h & mask & ~(uint64_t)(LINE_SLOTS - 1);
}

/* first slot at or after `pos` that is empty or holds `key` */
static inline slot_t *probe(slot_t *slots, uint64_t mask, uint64_t pos, int64_t key) {
    for (;;) {
        slot_t *s = &slots[pos];
        if (s->val == 0 || s->key == key) return s;
        pos = (pos + 1) & mask;
    }
}

static inline const dirent_t *dir_of(const dirent_t *dir, unsigned sh, uint64_t h) {
    return &dir[h >> sh];
}

/* ---------------------------------------------------------------- segments */

static void recompute_guard(ct_idmap *m) {
    size_t n = (size_t)1 << m->gdepth, j = 0;
    size_t g = SIZE_MAX;
    while (j < n) {
        seg_t *s = m->dir[j].seg;
        size_t room = s->limit - s->size;
        if (room < g) g = room;
        j += (size_t)1 << (m->gdepth - s->depth);
    }
    m->guard = g > (size_t)INT64_MAX ? INT64_MAX : (int64_t)g;
}

/* iterate distinct segments: for (j = 0; j < N; j = next_seg(m, j)) */
static inline size_t next_seg(const ct_idmap *m, size_t j) {
    return j + ((size_t)1 << (m->gdepth - m->dir[j].seg->depth));
}

typedef struct piece {
    size_t need;
    size_t cap;
    slot_t *slots;
    seg_t *seg; /* new header for pieces > 0 */
} piece_t;

enum { PLAN_BATCH = 0, PLAN_RESERVE = 1 };

/* The split level for a segment that must absorb `req` ids in total: 0 (resize in place)
 * while it stays within SEG_MAX_SLOTS, else enough levels for SEG_MAX_SLOTS pieces.
 * A split that would blow up the directory far beyond the number of segments (hashes
 * skewed into one segment: only adversarial ids do that) resizes in place instead. */
static unsigned choose_k(const ct_idmap *m, const seg_t *s, size_t req) {
    size_t c = cap_for(req);
    if ((c != 0 && c <= SEG_MAX_SLOTS) || s->depth >= MAX_DEPTH) return 0;
    unsigned k = 1;
    while (s->depth + k < MAX_DEPTH && with_margin(req >> k) > limit_for(SEG_MAX_SLOTS)) k++;
    if (s->depth + k > m->gdepth &&
        ((size_t)1 << (s->depth + k)) > 8 * (m->nsegs + ((size_t)1 << k)) + 64)
        return 0;
    return k;
}

static inline size_t piece_of(uint64_t h, unsigned depth, unsigned k) {
    return k ? (size_t)((h << depth) >> (64 - k)) : 0;
}

/* Grow every segment in segs[0..ns) with flag set, so that it can absorb s->pending more
 * ids. All memory is acquired first; on failure nothing changes and -1 is returned.
 * mode PLAN_BATCH: pieces of split segments are sized from the exact count of absent
 * batch ids (ids/n) that fall in them; PLAN_RESERVE: from the expected share + margin. */
static int grow_segments(ct_idmap *m, seg_t **segs, size_t ns, int mode, const int64_t *ids,
                         size_t n) {
    size_t njobs = 0, npieces = 0;
    unsigned maxd = m->gdepth;
    for (size_t i = 0; i < ns; i++) {
        seg_t *s = segs[i];
        if (!s->flag) continue;
        size_t req = s->size + s->pending;
        if (req < s->size || req > (MAX_SLOTS << 20)) return -1; /* absurd request */
        s->k = choose_k(m, s, req);
        s->first = npieces;
        npieces += (size_t)1 << s->k;
        if (s->depth + s->k > maxd) maxd = s->depth + s->k;
        njobs++;
    }
    if (njobs == 0) return 0;

    int rc = -1;
    dirent_t *newdir = NULL;
    piece_t *pc = (piece_t *)xcalloc(npieces, sizeof(piece_t));
    if (!pc) goto out;

    /* needs */
    for (size_t i = 0; i < ns; i++) {
        seg_t *s = segs[i];
        if (!s->flag) continue;
        piece_t *p = pc + s->first;
        if (s->k == 0) {
            p->need = s->size + s->pending;
            continue;
        }
        for (size_t j = 0; j < s->cap; j++)
            if (s->slots[j].val != 0) p[piece_of(mix64(s->slots[j].key), s->depth, s->k)].need++;
        if (mode == PLAN_RESERVE) {
            size_t extra = with_margin(s->pending >> s->k);
            for (size_t q = 0; q < ((size_t)1 << s->k); q++) p[q].need += extra;
        }
    }
    if (mode == PLAN_BATCH) {
        /* exact (duplicates counted twice) count of absent batch ids per piece */
        const unsigned sh = 64 - m->gdepth;
        for (size_t i = 0; i < n; i++) {
            uint64_t h = mix64(ids[i]);
            const dirent_t *d = dir_of(m->dir, sh, h);
            seg_t *s = d->seg;
            if (!s->flag || s->k == 0) continue;
            slot_t *sl = probe(d->slots, d->mask, home_of(h, d->mask), ids[i]);
            if (sl->val == 0) pc[s->first + piece_of(h, s->depth, s->k)].need++;
        }
    }
    for (size_t q = 0; q < npieces; q++) {
        pc[q].cap = cap_for(pc[q].need);
        if (pc[q].cap == 0) goto out;
    }

    /* acquire */
    if (maxd > m->gdepth) {
        newdir = (dirent_t *)xmalloc(sizeof(dirent_t) << maxd);
        if (!newdir) goto out;
    }
    for (size_t i = 0; i < ns; i++) {
        seg_t *s = segs[i];
        if (!s->flag) continue;
        for (size_t q = 0; q < ((size_t)1 << s->k); q++) {
            piece_t *p = pc + s->first + q;
            p->slots = slots_alloc(p->cap);
            if (!p->slots) goto out;
            if (q > 0) {
                p->seg = (seg_t *)xcalloc(1, sizeof(seg_t));
                if (!p->seg) goto out;
            }
        }
    }

    /* commit: nothing below can fail */
    if (newdir) {
        size_t nn = (size_t)1 << maxd;
        unsigned dsh = maxd - m->gdepth;
        for (size_t j = 0; j < nn; j++) newdir[j] = m->dir[j >> dsh];
        m->bytes += (sizeof(dirent_t) << maxd) - (sizeof(dirent_t) << m->gdepth);
        xfree(m->dir);
        m->dir = newdir;
        m->gdepth = maxd;
        newdir = NULL;
    }
    for (size_t i = 0; i < ns; i++) {
        seg_t *s = segs[i];
        if (!s->flag) continue;
        const size_t np = (size_t)1 << s->k;
        piece_t *p = pc + s->first;
        for (size_t q = 0; q < np; q++) p[q].need = 0; /* reuse as size */
        for (size_t j = 0; j < s->cap; j++) {
            const slot_t *o = &s->slots[j];
            if (o->val == 0) continue;
            uint64_t h = mix64(o->key);
            piece_t *t = p + piece_of(h, s->depth, s->k);
            uint64_t mask = t->cap - 1, pos = home_of(h, mask);
            while (t->slots[pos].val != 0) pos = (pos + 1) & mask;
            t->slots[pos] = *o;
            t->need++;
        }
        m->bytes -= s->cap * sizeof(slot_t);
        slots_free(s->slots, s->cap);
        const unsigned nd = s->depth + s->k;
        const uint64_t pre = s->prefix << s->k;
        for (size_t q = 0; q < np; q++) {
            seg_t *t = q ? p[q].seg : s;
            t->slots = p[q].slots;
            t->cap = p[q].cap;
            t->size = p[q].need;
            t->limit = limit_for(p[q].cap);
            t->depth = nd;
            t->prefix = pre | q;
            t->flag = 0;
            t->k = 0;
            t->pending = 0;
            t->first = 0;
            m->bytes += t->cap * sizeof(slot_t) + (q ? sizeof(seg_t) : 0);
            size_t span = (size_t)1 << (m->gdepth - nd);
            size_t base = (size_t)t->prefix << (m->gdepth - nd);
            dirent_t de = {t->slots, (uint64_t)(t->cap - 1), t};
            for (size_t j = 0; j < span; j++) m->dir[base + j] = de;
        }
        m->nsegs += np - 1;
        /* keep the flag semantics of the caller: s is done */
    }
    rc = 0;

out:
    if (rc != 0 && pc) {
        for (size_t q = 0; q < npieces; q++) {
            slots_free(pc[q].slots, pc[q].cap);
            xfree(pc[q].seg);
        }
    }
    xfree(newdir);
    xfree(pc);
    return rc;
}

/* ---------------------------------------------------------------- lifecycle */

ct_idmap *ct_idmap_new(size_t capacity_hint) {
    ct_idmap *m = (ct_idmap *)xcalloc(1, sizeof(ct_idmap));
    if (!m) return NULL;
    seg_t *s = (seg_t *)xcalloc(1, sizeof(seg_t));
    slot_t *sl = slots_alloc(SEG_MIN_SLOTS);
    dirent_t *dir = (dirent_t *)xmalloc(2 * sizeof(dirent_t));
    if (!s || !sl || !dir) {
        xfree(s);
        slots_free(sl, SEG_MIN_SLOTS);
        xfree(dir);
        xfree(m);
        return NULL;
    }
    s->slots = sl;
    s->cap = SEG_MIN_SLOTS;
    s->limit = limit_for(SEG_MIN_SLOTS);
    dir[0].slots = dir[1].slots = sl;
    dir[0].mask = dir[1].mask = SEG_MIN_SLOTS - 1;
    dir[0].seg = dir[1].seg = s;
    m->dir = dir;
    m->gdepth = 1;
    m->nsegs = 1;
    m->bytes = sizeof(ct_idmap) + sizeof(seg_t) + SEG_MIN_SLOTS * sizeof(slot_t) + 2 * sizeof(dirent_t);
    recompute_guard(m);
    if (capacity_hint && ct_idmap_reserve(m, capacity_hint) != 0) {
        ct_idmap_free(m);
        return NULL;
    }
    return m;
}

void ct_idmap_free(ct_idmap *m) {
    if (!m) return;
    size_t n = (size_t)1 << m->gdepth;
    for (size_t j = 0; j < n;) {
        seg_t *s = m->dir[j].seg;
        j = next_seg(m, j);
        slots_free(s->slots, s->cap);
        xfree(s);
    }
    xfree(m->dir);
    xfree(m->free_list);
    xfree(m);
}

size_t ct_idmap_size(const ct_idmap *m) { return m->size; }
size_t ct_idmap_bytes(const ct_idmap *m) { return m->bytes; }
int64_t ct_idmap_high_water(const ct_idmap *m) { return m->high_water; }

size_t ct_idmap_capacity(const ct_idmap *m) {
    size_t n = (size_t)1 << m->gdepth, c = 0;
    for (size_t j = 0; j < n; j = next_seg(m, j)) c += m->dir[j].seg->limit;
    return c;
}

int ct_idmap_reserve(ct_idmap *m, size_t additional) {
    if (additional == 0) return 0;
    size_t n = (size_t)1 << m->gdepth;
    seg_t **segs = (seg_t **)xmalloc(m->nsegs * sizeof(seg_t *));
    if (!segs) return -1;
    size_t ns = 0;
    for (size_t j = 0; j < n; j = next_seg(m, j)) {
        seg_t *s = m->dir[j].seg;
        size_t extra = with_margin(additional >> s->depth);
        segs[ns++] = s;
        if (extra > s->limit - s->size) {
            s->flag = 1;
            s->pending = extra;
        }
    }
    int rc = grow_segments(m, segs, ns, PLAN_RESERVE, NULL, 0);
    for (size_t i = 0; i < ns; i++) segs[i]->flag = 0, segs[i]->pending = 0, segs[i]->k = 0;
    xfree(segs);
    if (rc == 0) recompute_guard(m);
    return rc;
}

void ct_idmap_clear(ct_idmap *m) {
    size_t n = (size_t)1 << m->gdepth;
    for (size_t j = 0; j < n; j = next_seg(m, j)) {
        seg_t *s = m->dir[j].seg;
        if (s->size) memset(s->slots, 0, s->cap * sizeof(slot_t));
        s->size = 0;
    }
    m->size = 0;
    m->high_water = 0;
    m->free_len = 0;
    recompute_guard(m);
}

size_t ct_idmap_export(const ct_idmap *m, int64_t *ids, int64_t *idx, size_t cap) {
    size_t n = (size_t)1 << m->gdepth, w = 0;
    for (size_t j = 0; j < n && w < cap; j = next_seg(m, j)) {
        const seg_t *s = m->dir[j].seg;
        for (size_t i = 0; i < s->cap && w < cap; i++) {
            if (s->slots[i].val == 0) continue;
            ids[w] = s->slots[i].key;
            idx[w] = s->slots[i].val - 1;
            w++;
        }
    }
    return m->size;
}

/* ---------------------------------------------------------------- batched ops */

#ifndef CT_IDMAP_PF2
#define CT_IDMAP_PF2 16 /* steps a probe waits for the next line it prefetched */
#endif
#define PF2 CT_IDMAP_PF2
#define QCAP 64 /* deferred-probe FIFO, power of two > PF2 + 1 */
#if QCAP <= PF2 + 1 || (QCAP & (QCAP - 1)) != 0
#error "QCAP must be a power of two larger than CT_IDMAP_PF2 + 1"
#endif

/* val of a slot claimed by the current find_or_insert batch whose index is not yet assigned */
#define CLAIMED INT64_MIN

typedef struct pending {
    const dirent_t *d;
    uint64_t pos; /* first slot of the next line to scan */
    size_t i;     /* batch position */
    size_t t;     /* step at which the line was prefetched */
} pending_t;

/* bit j set where slot j of the line at `l` is empty / holds `key` */
static inline unsigned line_empty(const slot_t *l) {
    return (unsigned)(l[0].val == 0) | (unsigned)(l[1].val == 0) << 1 | (unsigned)(l[2].val == 0) << 2 |
           (unsigned)(l[3].val == 0) << 3;
}
static inline unsigned line_match(const slot_t *l, int64_t key) {
    return (unsigned)(l[0].key == key) | (unsigned)(l[1].key == key) << 1 | (unsigned)(l[2].key == key) << 2 |
           (unsigned)(l[3].key == key) << 3;
}

static inline unsigned ctz4(unsigned x) { /* x in 1..15 */
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctz(x);
#else
    unsigned r = 0;
    while (!(x & 1)) x >>= 1, r++;
    return r;
#endif
}

/* The probe engine shared by find and phase 1 of find_or_insert.
 * Probing goes a cache line at a time. The home line of id i+PF is prefetched while id i
 * is probed; a probe that must go on to the next line prefetches it and waits in a FIFO
 * for PF2 steps, so no step waits on memory that was not prefetched.
 * Linear probing with backward-shift deletion keeps every id's run from its home slot to
 * its slot free of empty slots, so within a line a match decides before an empty slot.
 * insert == 0: out[i] = index or -1. Returns the number found.
 * insert == 1: an absent id is written to the first empty slot with val CLAIMED; out[i] is
 * then ~(address of its slot) (negative) for claimed or pending-claimed ids, which phase 2
 * resolves in batch order. Returns the number of slots claimed. Only inserts happen during
 * a pass (slots only ever fill), so a deferred probe's position stays valid, and a later
 * duplicate of an id follows its first occurrence through the FIFO. */
static inline size_t probe_batch(const ct_idmap *m, const int64_t *ids, size_t n, int64_t *out,
                                 uint8_t *is_new, const int insert) {
    const dirent_t *dir = m->dir;
    const unsigned sh = 64 - m->gdepth;
    uint64_t ring[PF];
    pending_t q[QCAP];
    size_t qh = 0, qt = 0, step = 0, i = 0, cnt = 0;
    const size_t pre = n < PF ? n : PF;
    for (size_t j = 0; j < pre; j++) {
        uint64_t h = mix64(ids[j]);
        const dirent_t *d = dir_of(dir, sh, h);
        ring[j] = h;
        if (insert) PREFETCH_W(&d->slots[home_of(h, d->mask)]);
        else PREFETCH_R(&d->slots[home_of(h, d->mask)]);
    }
    while (i < n || qh != qt) {
        const dirent_t *d;
        uint64_t pos;
        size_t idx;
        if (qh != qt && (i >= n || step - q[qh & (QCAP - 1)].t >= PF2)) {
            const pending_t *p = &q[qh & (QCAP - 1)];
            d = p->d;
            pos = p->pos;
            idx = p->i;
            qh++;
        } else {
            const uint64_t h = ring[i & (PF - 1)];
            if (LIKELY(i + PF < n)) {
                uint64_t h2 = mix64(ids[i + PF]);
                const dirent_t *d2 = dir_of(dir, sh, h2);
                ring[i & (PF - 1)] = h2;
                if (insert) PREFETCH_W(&d2->slots[home_of(h2, d2->mask)]);
                else PREFETCH_R(&d2->slots[home_of(h2, d2->mask)]);
            }
            d = dir_of(dir, sh, h);
            pos = home_of(h, d->mask);
            idx = i++;
        }
        step++;
        const int64_t key = ids[idx];
        slot_t *l = &d->slots[pos];
        const unsigned e = line_empty(l);
        const unsigned k = line_match(l, key) & ~e;
        if (k) {
            slot_t *s = &l[ctz4(k)];
            if (insert && s->val == CLAIMED) {
                out[idx] = (int64_t)~(uintptr_t)s;
            } else {
                out[idx] = s->val - 1;
                if (insert && is_new) is_new[idx] = 0;
                if (!insert) cnt++;
            }
        } else if (e) {
            if (insert) {
                slot_t *s = &l[ctz4(e)];
                s->key = key;
                s->val = CLAIMED;
                d->seg->size++;
                out[idx] = (int64_t)~(uintptr_t)s;
                cnt++;
            } else {
                out[idx] = -1;
            }
        } else {
            pending_t *p = &q[qt & (QCAP - 1)];
            pos = (pos + LINE_SLOTS) & d->mask;
            if (insert) PREFETCH_W(&d->slots[pos]);
            else PREFETCH_R(&d->slots[pos]);
            p->d = d;
            p->pos = pos;
            p->i = idx;
            p->t = step;
            qt++;
        }
    }
    return cnt;
}

size_t ct_idmap_find(const ct_idmap *m, const int64_t *ids, size_t n, int64_t *out) {
    return probe_batch(m, ids, n, out, NULL, 0);
}

/* make sure no segment can overflow during a pass over ids; -1 (unchanged) on OOM */
static int plan_batch(ct_idmap *m, const int64_t *ids, size_t n) {
    const size_t maxt = n < m->nsegs ? n : m->nsegs;
    seg_t **touched = (seg_t **)xmalloc(maxt * sizeof(seg_t *));
    if (!touched) return -1;
    size_t nt = 0;
    {
        const dirent_t *dir = m->dir;
        const unsigned sh = 64 - m->gdepth;
        for (size_t i = 0; i < n; i++) {
            seg_t *s = dir_of(dir, sh, mix64(ids[i]))->seg;
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
            uint64_t h = mix64(ids[i]);
            const dirent_t *d = dir_of(dir, sh, h);
            if (!d->seg->flag) continue;
            if (probe(d->slots, d->mask, home_of(h, d->mask), ids[i])->val != 0) d->seg->pending--;
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

int64_t ct_idmap_find_or_insert(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out,
                                uint8_t *is_new) {
    if (n == 0) return 0;
    if (m->guard < 0 || n > (size_t)m->guard) {
        if (plan_batch(m, ids, n) != 0) return -1;
    }
    /* phase 1: every absent id claims a slot (no segment can overflow: planned above) */
    const size_t claimed = probe_batch(m, ids, n, out, is_new, 1);
    if (claimed == 0) return 0;
    /* phase 2: assign indices in batch order; the first occurrence of an id gets it */
    int64_t hw = m->high_water;
    int64_t *fl = m->free_list;
    size_t fl_len = m->free_len;
    for (size_t i = 0; i < n; i++) {
        if (out[i] >= 0) continue;
        slot_t *s = (slot_t *)~(uintptr_t)out[i];
        if (s->val == CLAIMED) {
            const int64_t idx = fl_len ? fl[--fl_len] : hw++;
            s->val = idx + 1;
            out[i] = idx;
            if (is_new) is_new[i] = 1;
        } else {
            out[i] = s->val - 1;
            if (is_new) is_new[i] = 0;
        }
    }
    m->high_water = hw;
    m->free_len = fl_len;
    m->size += claimed;
    m->guard -= (int64_t)claimed;
    return (int64_t)claimed;
}

/* Erase runs one id at a time in order (backward shifts move ids, so probes cannot be
 * deferred), prefetching the home line of id i+PF. */
int64_t ct_idmap_erase(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out) {
    if (n == 0) return 0;
    if (m->free_cap - m->free_len < n) {
        size_t want = m->free_len + n;
        if (want < m->free_len || want > SIZE_MAX / sizeof(int64_t)) return -1;
        size_t nc = m->free_cap * 2;
        if (nc < want) nc = want;
        if (nc < 16) nc = 16;
        int64_t *nf = (int64_t *)xmalloc(nc * sizeof(int64_t));
        if (!nf) return -1;
        if (m->free_len) memcpy(nf, m->free_list, m->free_len * sizeof(int64_t));
        xfree(m->free_list);
        m->bytes += (nc - m->free_cap) * sizeof(int64_t);
        m->free_list = nf;
        m->free_cap = nc;
    }
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
        PREFETCH_W(&d->slots[home_of(h, d->mask)]);
    }
    for (size_t i = 0; i < n; i++) {
        const uint64_t h = ring[i & (PF - 1)];
        if (LIKELY(i + PF < n)) {
            uint64_t h2 = mix64(ids[i + PF]);
            const dirent_t *d2 = dir_of(dir, sh, h2);
            ring[i & (PF - 1)] = h2;
            PREFETCH_W(&d2->slots[home_of(h2, d2->mask)]);
        }
        const dirent_t *d = dir_of(dir, sh, h);
        slot_t *slots = d->slots;
        const uint64_t mask = d->mask;
        slot_t *s = probe(slots, mask, home_of(h, mask), ids[i]);
        if (s->val == 0) {
            if (out) out[i] = -1;
            continue;
        }
        const int64_t idx = s->val - 1;
        if (out) out[i] = idx;
        fl[fl_len++] = idx;
        erased++;
        d->seg->size--;
        /* backward-shift deletion: pull later ids of the run into the hole when the hole
         * lies within [their home, their slot) */
        uint64_t hole = (uint64_t)(s - slots), j = hole;
        for (;;) {
            j = (j + 1) & mask;
            slot_t *t = &slots[j];
            if (t->val == 0) break;
            uint64_t home = home_of(mix64(t->key), mask);
            if (((j - home) & mask) >= ((j - hole) & mask)) {
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
