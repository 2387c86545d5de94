/* idmap.c - id map + index allocator for the dynamic hash embedding table.
 * See idmap.h for the contract. C11; uses GCC/Clang builtins (prefetch, ctz) and SSE2
 * intrinsics where available, with portable fallbacks.
 *
 * Layout
 *   h = mix64(id)                     murmur3 fmix64 (ids are often sequential or clustered)
 *   dir[h >> (64 - gdepth)]           extendible-hashing directory: {slots, cap, seg, nb}
 *   seg: slots[cap], 16 | cap         linear probing, 16-byte slots, max load 3/4
 *   slot: {key = id, val = index + 1} val == 0 marks an empty slot: no id value is reserved
 * Probing starts at the home line, the low 32 bits of h scaled to the segment's lines (a
 * multiply and a shift, so capacities need not be powers of two), and scans a line at a time
 * (4 slots, SIMD compare). A segment holding `depth` hash bits is shared by
 * 2^(gdepth - depth) directory entries. Deletion is backward-shift: no tombstones.
 *
 * Sizes: a reserve gives each segment the capacity (a multiple of 16 slots) for its share
 * plus a margin at load 5/8, so a pre-sized map's bytes per id do not depend on the count
 * (with power-of-two segments they swung 2x with it). Growth under inserts uses powers of
 * two: a full segment doubles while below SEG_MAX_SLOTS (2^17 slots, 2 MiB, one huge page),
 * then splits in two by its next hash bit, in place: the half that stays is re-placed in
 * one streaming pass, the other half goes into one new array with its graded capacity
 * (grade_cap: between 1/2 and 1 times SEG_MAX_SLOTS by its place in the hash space, so
 * segments fill and split at different counts and a grown map's bytes per id stay flat).
 * One growth step moves at most one segment (~98K ids), never the table. Each segment
 * counts its ids whose next split bit is set, so a split knows both halves' sizes without
 * a scan.
 *
 * Failure atomicity: find_or_insert bounds, before touching anything, the new ids per
 * segment, and acquires all memory for the growth this needs; only then does it change the
 * map. A guard (a lower bound of the smallest segment headroom) lets batches that cannot
 * overflow any segment skip this planning.
 *
 * Batches are software pipelined for memory-level parallelism: the hash and home line of
 * id i+PF are computed and prefetched while id i is probed; a probe whose line is full
 * prefetches the next line and is resumed in a later pass over the chunk, so no probe waits
 * on memory that was not prefetched, and the probe step itself has no data-dependent
 * branch. find_or_insert first claims slots for absent ids, then assigns their indices in
 * batch order, so indices come out exactly as a one-at-a-time loop would give them.
 */
#include "idmap_isa.h" /* first: it sets the feature macros both builds need */

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* The batched operations are defined as BATCH_OP(name): the public ct_idmap_<name>, or with
 * ISA dispatch (idmap_isa.h) ct_idmap_base_<name> here and ct_idmap_v3_<name> in idmap_v3.c's
 * build of this file (CT_IDMAP_V3), which the public names choose between (end of file). */
#if defined(CT_IDMAP_V3)
#define BATCH_OP(name) ct_idmap_v3_##name
#elif defined(CT_IDMAP_DISPATCH)
#define BATCH_OP(name) ct_idmap_base_##name
#else
#define BATCH_OP(name) ct_idmap_##name
#endif

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(size_t) == 8 && sizeof(void *) == 8, "idmap.c needs a 64-bit target");
#endif

#ifndef CT_IDMAP_PF
#define CT_IDMAP_PF 32 /* prefetch distance, must be a power of 2 */
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
#define MAX_SLOTS ((size_t)1 << 32) /* per segment (64 GiB); beyond: out-of-memory */

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

typedef struct slab slab_t;

typedef struct seg {
    slot_t *slots;
    slab_t *slab; /* the slab slots were carved from, or NULL (see slots_release) */
    size_t cap; /* a multiple of 16 slots */
    size_t size;
    size_t limit;    /* max ids before growth: limit_for(cap) */
    uint64_t prefix; /* the segment's top `depth` hash bits */
    unsigned depth;
    /* planning scratch, zero outside of a growth plan */
    unsigned flag;
    unsigned k;      /* planned split levels (0: resize in place) */
    size_t pending;  /* upper bound of ids this batch may add */
    size_t first;    /* first piece of its plan */
    size_t hi;       /* ids whose hash bit (63 - depth) is set: the sizes of a split in two */
} seg_t;

typedef struct dirent {
    slot_t *slots;
    uint64_t cap; /* seg->cap */
    seg_t *seg;
    uint64_t nb; /* 63 - seg->depth: the hash bit counted by seg->hi */
} dirent_t;

struct ct_idmap {
    dirent_t *dir;
    unsigned gdepth; /* >= 1; directory has 2^gdepth entries */
    size_t nsegs;
    size_t size;
    int64_t guard; /* lower bound of min over segments of (limit - size) */
    size_t bytes;
    slab_t *arena; /* see ARENA_BYTES; NULL until a growth step needs it */
    /* index allocator */
    int64_t high_water;
    int64_t *free_list; /* stack: reuse is LIFO */
    size_t free_len, free_cap;
};

/* ---------------------------------------------------------------- allocation */

#ifndef CT_IDMAP_V3 /* one hook for both builds */
long ct_idmap_fail_after = -1;
#endif

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

/* Slot arrays, zero-filled. Small ones come from aligned_alloc. The arrays one growth step
 * needs, when they add up to 2 MiB or more, share one mapping, a slab: 2 MiB-aligned and
 * advised for transparent huge pages (random probes into a large table otherwise pay a TLB
 * miss, a page walk, on nearly every access), but rounded to whole 4 KiB pages only, so
 * segments of any size (a pre-sized map's are sized to fit) leave no unused huge-page tails.
 * A slab lives until its last array is freed; an array freed before that gives its whole
 * pages back (MADV_DONTNEED). */
#define HUGE_BYTES ((size_t)2 << 20)
#define PAGE_BYTES ((size_t)4096)
#ifndef CT_IDMAP_NO_HUGE
#if defined(__linux__) && defined(MADV_HUGEPAGE) && defined(MAP_ANONYMOUS) && defined(MADV_DONTNEED)
#define USE_HUGE 1
#endif
#endif

struct slab {
    char *base;
    size_t len;  /* mapped bytes, a multiple of PAGE_BYTES */
    size_t tail; /* bytes past the arrays carved from it (counted in the map's bytes) */
    size_t refs; /* arrays carved from it and not yet freed */
    size_t used; /* an arena's bytes carved so far */
    int open;    /* the map's arena: later growth steps carve from it; mapped while open */
};

/* Growth steps whose new arrays add up to less than 2 MiB but at least ARENA_MIN (a split's
 * half under graded capacities, see "Sizes") carve them from the map's arena, a slab of
 * ARENA_BYTES shared by successive steps, so they are backed by huge pages too. Only the
 * arrays carved are counted in the map's bytes: the rest of the arena is address space until
 * carved (with huge pages, at most the 2 MiB page the last array ends in is resident early). */
#define ARENA_MIN ((size_t)1 << 20)
#define ARENA_BYTES ((size_t)32 << 20)

static slot_t *slots_alloc_small(size_t cap) {
    /* cache-line aligned, so that a probe line is one cache line; cap % 16 == 0 */
    if (fail_now()) return NULL;
    slot_t *p = (slot_t *)aligned_alloc(64, cap * sizeof(slot_t));
    if (p) memset(p, 0, cap * sizeof(slot_t));
    return p;
}

/* A slab for `bytes` of arrays, or NULL: out of memory, or bytes below HUGE_BYTES (or no
 * huge pages on this platform): the arrays are then allocated one by one. *oom tells which. */
static slab_t *slab_new(size_t bytes, int *oom) {
    *oom = 0;
#ifdef USE_HUGE
    if (bytes < HUGE_BYTES) return NULL;
    *oom = 1;
    if (fail_now()) return NULL;
    slab_t *sb = (slab_t *)calloc(1, sizeof(slab_t));
    if (!sb) return NULL;
    const size_t len = (bytes + PAGE_BYTES - 1) & ~(PAGE_BYTES - 1);
    char *p = (char *)mmap(NULL, len + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == (char *)MAP_FAILED) {
        free(sb);
        return NULL;
    }
    const uintptr_t a = ((uintptr_t)p + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1);
    const size_t head = a - (uintptr_t)p, tail = HUGE_BYTES - head;
    if (head) munmap(p, head);
    if (tail) munmap((char *)a + len, tail);
    madvise((void *)a, len, MADV_HUGEPAGE); /* advisory: ignore failure */
    sb->base = (char *)a;
    sb->len = len;
    sb->tail = len - bytes;
    *oom = 0;
    return sb;
#else
    (void)bytes;
    return NULL;
#endif
}

static void slab_unmap(slab_t *sb) {
    if (!sb) return;
#ifdef USE_HUGE
    munmap(sb->base, sb->len);
#endif
    free(sb);
}

/* The map's arena with room for `bytes` (< HUGE_BYTES), mapping a new one if needed (the
 * old one is closed: unmapped now if nothing was carved from it that is still in use, else
 * when its last array goes). NULL: no huge pages here (*oom 0), or out of memory (*oom 1);
 * the map is unchanged then. */
static slab_t *arena_for(slab_t **arena, size_t bytes, int *oom) {
    *oom = 0;
    slab_t *a = *arena;
    if (a && a->len - a->used >= bytes) return a;
    slab_t *fresh = slab_new(ARENA_BYTES, oom);
    if (!fresh) return NULL;
    fresh->tail = 0; /* counted as carved */
    fresh->open = 1;
    if (a) {
        a->open = 0;
        if (a->refs == 0) slab_unmap(a);
    }
    *arena = fresh;
    return fresh;
}

/* Frees an array of cap slots (slab: the slab it was carved from, or NULL). *bytes (the
 * map's count) loses the slab's tail when the slab goes; the caller subtracts the array. */
static void slots_release(slot_t *p, size_t cap, slab_t *sb, size_t *bytes) {
    if (!p) return;
    if (!sb) {
        free(p);
        return;
    }
#ifdef USE_HUGE
    if (--sb->refs == 0 && !sb->open) {
        *bytes -= sb->tail;
        slab_unmap(sb);
        return;
    }
    const uintptr_t lo = ((uintptr_t)p + PAGE_BYTES - 1) & ~(uintptr_t)(PAGE_BYTES - 1);
    const uintptr_t hi = ((uintptr_t)p + cap * sizeof(slot_t)) & ~(uintptr_t)(PAGE_BYTES - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED); /* reads back as zeros */
#else
    (void)cap;
    (void)bytes;
#endif
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

#ifndef CT_IDMAP_LOAD16
#define CT_IDMAP_LOAD16 12 /* max load factor, in 16ths */
#endif
static inline size_t limit_for(size_t cap) { return cap / 16 * CT_IDMAP_LOAD16; }

/* The smallest capacity (a multiple of 16 slots, >= SEG_MIN_SLOTS) whose limit holds n
 * ids; 0 if too big. Reserve sizes segments with it: a pre-sized map holds its ids at close
 * to the maximum load, whatever their number. */
#ifndef CT_IDMAP_RESERVE16
#define CT_IDMAP_RESERVE16 10 /* load reserve sizes segments for, in 16ths (see cap_fit) */
#endif
static size_t cap_fit(size_t n) {
    const size_t units = n / CT_IDMAP_RESERVE16 + (n % CT_IDMAP_RESERVE16 != 0); /* of 16 slots */
    if (units > MAX_SLOTS / 16) return 0;
    return units * 16 < SEG_MIN_SLOTS ? SEG_MIN_SLOTS : units * 16;
}

/* The power of two at or above cap_fit(n); 0 if too big. Growth under inserts uses it, so a
 * segment's capacity at least doubles (up to SEG_MAX_SLOTS) and moves stay amortised. */
static size_t cap_grow(size_t n) {
    const size_t fit = cap_fit(n);
    if (fit == 0) return 0;
    size_t cap = SEG_MIN_SLOTS;
    while (cap < fit) cap <<= 1;
    return cap > MAX_SLOTS ? 0 : cap;
}

/* The graded capacity of a segment split off at hash prefix `prefix` of `depth` bits: the
 * segment starting at fraction x of the hash space gets SEG_MAX_SLOTS * 2^-x slots (x to 6
 * bits, rounded up to 16 slots). Segments split when full, and a segment at x fills when the
 * map reaches a count proportional to 2^(depth - x): graded segments split at counts spread
 * evenly in log scale instead of all together, so a grown map's bytes per id stay near their
 * mean (16 B / (3/4 ln 2), 31 B) instead of swinging from 21 to 43 B with every doubling. */
static size_t grade_cap(uint64_t prefix, unsigned depth) {
    static const uint32_t root[6] = {64830, 64132, 62757, 60097, 55109, 46341}; /* 2^-1/64 .. 2^-1/2, Q16 */
    const unsigned x = depth >= 6 ? (unsigned)(prefix >> (depth - 6)) & 63u : (unsigned)(prefix << (6 - depth)) & 63u;
    uint64_t c = (uint64_t)SEG_MAX_SLOTS << 16;
    for (unsigned b = 0; b < 6; b++)
        if (x >> b & 1) c = (c >> 16) * root[b];
    c >>= 16;
    return (size_t)((c + 15) & ~(uint64_t)15);
}

#define LINE_SLOTS 4u /* 64-byte cache line of 16-byte slots */

/* The first slot of h's home line in a segment of cap slots (16 | cap <= 2^32): the low 32
 * bits of h scaled to the number of lines (the directory uses the high bits). */
static inline uint64_t home_of(uint64_t h, uint64_t cap) {
    return (((h & 0xffffffffu) * cap) >> 34) * LINE_SLOTS; /* (lo * (cap / 4)) >> 32: 4 | cap */
}

/* pos + step, wrapped into [0, cap) (pos < cap, step <= cap) */
static inline uint64_t wrap_add(uint64_t pos, uint64_t step, uint64_t cap) {
    const uint64_t x = pos + step;
    return x >= cap ? x - cap : x;
}

/* slots from `from` forward to `to`, around the end of the segment if needed */
static inline uint64_t ring_dist(uint64_t from, uint64_t to, uint64_t cap) {
    return to >= from ? to - from : to + cap - from;
}

/* first slot at or after `pos` that is empty or holds `key` */
static inline slot_t *probe(slot_t *slots, uint64_t cap, uint64_t pos, int64_t key) {
    for (;;) {
        slot_t *s = &slots[pos];
        if (s->val == 0 || s->key == key) return s;
        pos = wrap_add(pos, 1, cap);
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
    size_t hi;
    size_t cap;
    slot_t *slots;
    slab_t *slab; /* where slots were carved from (NULL: allocated alone) */
    seg_t *seg;   /* new header for pieces > 0 */
} piece_t;

enum { PLAN_BATCH = 0, PLAN_RESERVE = 1 };

/* The largest capacity segment s resizes to in place: SEG_MAX_SLOTS for a reserve, its
 * graded capacity for growth under inserts; beyond it, the segment splits. */
static size_t top_cap(const seg_t *s, int mode) {
    return mode == PLAN_RESERVE ? SEG_MAX_SLOTS : grade_cap(s->prefix, s->depth);
}

/* The split level for a segment that must absorb `req` ids in total: 0 (resize in place)
 * while it stays within top_cap, else enough levels for SEG_MAX_SLOTS pieces.
 * A split that would blow up the directory far beyond the number of segments (hashes
 * skewed into one segment: only adversarial ids do that) resizes in place instead. */
static unsigned choose_k(const ct_idmap *m, const seg_t *s, size_t req, int mode) {
    size_t c = cap_fit(req);
    if ((c != 0 && c <= top_cap(s, mode)) || s->depth >= MAX_DEPTH) return 0;
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

static inline unsigned ctz8(unsigned x);
static inline unsigned line_empties(const slot_t *l);

/* One slot of an in-place split (see split_in_place). Slot j is emptied first; the id then
 * goes to the first empty slot from its home line: in a (cap slots) that is at or before j,
 * and j itself is now empty; half 1 goes to b (capb slots: cap, or a graded capacity), a
 * plain linear-probing insert into an array of its own. An empty slot j is written to an
 * empty slot of its own line in a. Branch-free except for the rare run that leaves its home line. The
 * halves' sizes are known (s->hi); their split-bit counts go to a packed accumulator
 * (32-bit fields; segments have < 2^32 slots): c += next-bit | (next-bit & up) << 32. */
static inline void split_slot(slot_t *a, slot_t *b, uint64_t cap, uint64_t capb, uint64_t bit, unsigned nb,
                              uint64_t j, uint64_t *c) {
    const slot_t e = a[j];
    const uint64_t occ = e.val != 0;
    const uint64_t h = mix64(e.key);
    const uint64_t up = (h & bit) != 0; /* 0 for an empty slot: its key is 0, mix64(0) = 0 */
    slot_t *x = (slot_t *)((uintptr_t)a ^ (((uintptr_t)a ^ (uintptr_t)b) & (0 - (uintptr_t)up)));
    const uint64_t jl = j & ~(uint64_t)(LINE_SLOTS - 1);
    const uint64_t cx = cap ^ ((cap ^ capb) & (0 - up)); /* x's capacity */
    const uint64_t hm = jl ^ ((jl ^ home_of(h, cx)) & (0 - occ)); /* empty slot: j's line */
    a[j].key = 0;
    a[j].val = 0;
    const unsigned em = line_empties(&x[hm]);
    uint64_t pos = hm + ctz8(em);
    if (UNLIKELY(em == 0)) {
        pos = wrap_add(hm, LINE_SLOTS, cx);
        while (x[pos].val != 0) pos = wrap_add(pos, 1, cx);
    }
    x[pos] = e; /* an empty slot j lands in an empty slot of its own line: a no-op */
    const uint64_t nbit = (h >> nb) & 1;
    *c += nbit | (nbit & up) << 32;
}

/* Split s in two by its next hash bit: ids of half 1 move to p[1].slots (p[1].cap slots,
 * filled in about the order of their homes there: a near-streaming write); ids of half 0
 * stay in s->slots and are re-placed in one pass. A pass starts after an empty slot, so no
 * probe run wraps into the part already re-placed; an id only moves backwards within its
 * run. Probe runs never cross an empty slot, so the regions between four empty slots are
 * independent: they are walked interleaved, which breaks the chain of store-to-load
 * dependencies between consecutive slots. Sizes land in p[0/1].need, the halves' split-bit counts in p[0/1].hi. */
static void split_in_place(const seg_t *s, piece_t *p) {
    slot_t *a = s->slots, *b = p[1].slots;
    const uint64_t cap = s->cap, capb = p[1].cap;
    const uint64_t bit = (uint64_t)1 << (63 - s->depth);
    const unsigned nb = 62 - s->depth; /* the halves' counted bit */
#ifndef CT_IDMAP_SPLIT_R
#define CT_IDMAP_SPLIT_R 4
#endif
    enum { R = CT_IDMAP_SPLIT_R };
    uint64_t z[R + 1];
    unsigned nr = 0;
    for (unsigned r = 0; r < R; r++) { /* first empty slot at or after r * cap / R */
        uint64_t q = r * (cap / R);
        if (nr && q <= z[nr - 1]) q = z[nr - 1] + 1;
        while (q < cap && a[q].val != 0) q++;
        if (q < cap) z[nr++] = q;
    }
    z[nr] = z[0] + cap; /* load <= 3/4: z[0] exists */
    uint64_t st[R], len[R], lmin = UINT64_MAX;
    for (unsigned r = 0; r < R; r++) {
        st[r] = len[r] = 0;
        if (r < nr) {
            st[r] = z[r] + 1;
            len[r] = z[r + 1] - z[r] - 1;
        }
        if (len[r] < lmin) lmin = len[r];
    }
    uint64_t c[R];
    for (unsigned r = 0; r < R; r++) c[r] = 0;
    for (uint64_t i = 0; i < lmin; i++)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 4 /* the regions' positions and counts stay in registers: 9% faster splits */
#endif
        for (unsigned r = 0; r < R; r++) split_slot(a, b, cap, capb, bit, nb, wrap_add(st[r], i, cap), &c[r]);
    for (unsigned r = 0; r < R; r++)
        for (uint64_t i = lmin; i < len[r]; i++) split_slot(a, b, cap, capb, bit, nb, wrap_add(st[r], i, cap), &c[r]);
    size_t nbt = 0, hi1 = 0;
    for (unsigned r = 0; r < R; r++) {
        nbt += (size_t)(c[r] & 0xffffffffu);
        hi1 += (size_t)(c[r] >> 32);
    }
    const size_t n1 = s->hi, n = s->size, hi0 = nbt - hi1;
    p[0].slots = a;
    p[0].need = n - n1;
    p[1].need = n1;
    p[0].hi = hi0;
    p[1].hi = hi1;
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
        s->k = choose_k(m, s, req, mode);
        s->first = npieces;
        npieces += (size_t)1 << s->k;
        if (s->depth + s->k > maxd) maxd = s->depth + s->k;
        njobs++;
    }
    if (njobs == 0) return 0;

    int rc = -1;
    dirent_t *newdir = NULL;
    slab_t *slab = NULL;
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
        if (s->k == 1) { /* sizes of the halves are tracked */
            p[0].need = s->size - s->hi;
            p[1].need = s->hi;
        } else {
            for (size_t j = 0; j < s->cap; j++) /* branch-free: empty slots add 0 */
                p[piece_of(mix64(s->slots[j].key), s->depth, s->k)].need += s->slots[j].val != 0;
        }
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
            slot_t *sl = probe(d->slots, d->cap, home_of(h, d->cap), ids[i]);
            if (sl->val == 0) pc[s->first + piece_of(h, s->depth, s->k)].need++;
        }
    }
    for (size_t q = 0; q < npieces; q++) {
        pc[q].cap = mode == PLAN_RESERVE ? cap_fit(pc[q].need) : cap_grow(pc[q].need);
        if (pc[q].cap == 0) goto out;
    }
    /* growth under inserts: a resize in place stops at the graded capacity, and the pieces
     * of a split take theirs when it holds their ids with room for an eighth more */
    for (size_t i = 0; mode == PLAN_BATCH && i < ns; i++) {
        const seg_t *s = segs[i];
        if (!s->flag) continue;
        piece_t *p = pc + s->first;
        if (s->k == 0) {
            const size_t top = top_cap(s, mode), fit = cap_fit(p->need);
            if (p->cap > top) p->cap = top > fit ? top : fit;
            continue;
        }
        for (size_t q = 0; q < ((size_t)1 << s->k); q++) {
            const size_t g = grade_cap(s->prefix << s->k | q, s->depth + s->k);
            if (limit_for(g) >= p[q].need + p[q].need / 8) p[q].cap = g;
        }
    }
    /* a split in two whose halves fit the old capacity is done in place (flag 2): half 0
     * keeps the old array, half 1 gets one new array (a reserve's: of the same size) */
    for (size_t i = 0; i < ns; i++) {
        seg_t *s = segs[i];
        if (!s->flag || s->k != 1) continue;
        piece_t *p = pc + s->first;
        if (cap_fit(p[0].need) <= s->cap && cap_fit(p[1].need) <= s->cap) {
            p[0].cap = s->cap;
            if (mode == PLAN_RESERVE || p[1].cap > s->cap) p[1].cap = s->cap;
            s->flag = 2;
        }
    }

    /* acquire: the new arrays from one slab when they add up to 2 MiB or more */
    if (maxd > m->gdepth) {
        newdir = (dirent_t *)xmalloc(sizeof(dirent_t) << maxd);
        if (!newdir) goto out;
    }
    size_t fresh = 0;
    for (size_t i = 0; i < ns; i++) {
        const seg_t *s = segs[i];
        for (size_t q = s->flag == 2; s->flag && q < ((size_t)1 << s->k); q++)
            fresh += pc[s->first + q].cap * sizeof(slot_t); /* <= 2^36 each: no overflow */
    }
    int oom;
    slab = slab_new(fresh, &oom);
    if (oom) goto out;
    slab_t *arena = NULL; /* or the map's arena (fresh below 2 MiB) */
    if (!slab && fresh >= ARENA_MIN) {
        arena = arena_for(&m->arena, fresh, &oom);
        if (oom) goto out;
    }
    slab_t *from = slab ? slab : arena;
    size_t carved = arena ? arena->used : 0, ncarved = 0;
    for (size_t i = 0; i < ns; i++) {
        seg_t *s = segs[i];
        if (!s->flag) continue;
        for (size_t q = 0; q < ((size_t)1 << s->k); q++) {
            piece_t *p = pc + s->first + q;
            if (q == 0 && s->flag == 2) {
                p->slab = s->slab; /* half 0 keeps the old array */
                continue;
            }
            if (from) {
                p->slots = (slot_t *)(from->base + carved);
                p->slab = from;
                carved += p->cap * sizeof(slot_t);
                ncarved++;
            } else {
                p->slots = slots_alloc_small(p->cap);
                if (!p->slots) goto out;
            }
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
        for (size_t q = 0; q < np; q++) p[q].need = p[q].hi = 0; /* reuse as size */
        if (s->flag == 2) {
            split_in_place(s, p);
        } else { /* rehash into new arrays (doubling, or a split into 2^k pieces) */
            for (size_t j = 0; j < s->cap; j++) {
                const slot_t *o = &s->slots[j];
                if (o->val == 0) continue;
                uint64_t h = mix64(o->key);
                piece_t *t = p + piece_of(h, s->depth, s->k);
                uint64_t pos = home_of(h, t->cap);
                while (t->slots[pos].val != 0) pos = wrap_add(pos, 1, t->cap);
                t->slots[pos] = *o;
                t->need++;
                t->hi += (h >> (63 - (s->depth + s->k))) & 1;
            }
            m->bytes -= s->cap * sizeof(slot_t);
            slots_release(s->slots, s->cap, s->slab, &m->bytes);
        }
        const unsigned nd = s->depth + s->k;
        const uint64_t pre = s->prefix << s->k;
        for (size_t q = 0; q < np; q++) {
            seg_t *t = q ? p[q].seg : s;
            t->slots = p[q].slots;
            t->slab = p[q].slab;
            t->cap = p[q].cap;
            t->size = p[q].need;
            t->hi = p[q].hi;
            t->limit = limit_for(p[q].cap);
            t->depth = nd;
            t->prefix = pre | q;
            t->k = 0;
            t->pending = 0;
            t->first = 0;
            if (q || s->flag != 2) m->bytes += t->cap * sizeof(slot_t);
            if (q) m->bytes += sizeof(seg_t);
            size_t span = (size_t)1 << (m->gdepth - nd);
            size_t base = (size_t)t->prefix << (m->gdepth - nd);
            dirent_t de = {t->slots, (uint64_t)t->cap, t, 63 - (uint64_t)nd};
            for (size_t j = 0; j < span; j++) m->dir[base + j] = de;
        }
        for (size_t q = 1; q < np; q++) p[q].seg->flag = 0;
        s->flag = 0;
        m->nsegs += np - 1;
    }
    if (from) { /* every array carved from it is now a segment's */
        from->refs += ncarved; /* (a half 0 kept in place may already be the arena's) */
        m->bytes += from->tail; /* an arena's: 0 */
        from->used = carved;
    }
    rc = 0;

out:
    if (rc != 0 && pc) {
        for (size_t q = 0; q < npieces; q++) {
            if (!pc[q].slab) xfree(pc[q].slots); /* carved arrays: the slab goes, the arena stays */
            xfree(pc[q].seg);
        }
    }
    if (rc != 0) slab_unmap(slab);
    xfree(newdir);
    xfree(pc);
    return rc;
}

/* ---------------------------------------------------------------- lifecycle */

#ifndef CT_IDMAP_V3 /* (the x86-64-v3 build has the batched operations only) */
ct_idmap *ct_idmap_new(size_t capacity_hint) {
    ct_idmap *m = (ct_idmap *)xcalloc(1, sizeof(ct_idmap));
    if (!m) return NULL;
    seg_t *s = (seg_t *)xcalloc(1, sizeof(seg_t));
    slot_t *sl = slots_alloc_small(SEG_MIN_SLOTS);
    dirent_t *dir = (dirent_t *)xmalloc(2 * sizeof(dirent_t));
    if (!s || !sl || !dir) {
        xfree(s);
        xfree(sl);
        xfree(dir);
        xfree(m);
        return NULL;
    }
    s->slots = sl;
    s->cap = SEG_MIN_SLOTS;
    s->limit = limit_for(SEG_MIN_SLOTS);
    dir[0].slots = dir[1].slots = sl;
    dir[0].cap = dir[1].cap = SEG_MIN_SLOTS;
    dir[0].seg = dir[1].seg = s;
    dir[0].nb = dir[1].nb = 63;
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
        size_t unused = 0;
        slots_release(s->slots, s->cap, s->slab, &unused);
        xfree(s);
    }
    slab_unmap(m->arena); /* nothing carved from it is in use now */
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
#endif /* !CT_IDMAP_V3 */

int BATCH_OP(reserve)(ct_idmap *m, size_t additional) {
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

#ifndef CT_IDMAP_V3
void ct_idmap_clear(ct_idmap *m) {
    size_t n = (size_t)1 << m->gdepth;
    for (size_t j = 0; j < n; j = next_seg(m, j)) {
        seg_t *s = m->dir[j].seg;
        if (s->size) memset(s->slots, 0, s->cap * sizeof(slot_t));
        s->size = 0;
        s->hi = 0;
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
#endif /* !CT_IDMAP_V3 */

/* ---------------------------------------------------------------- batched ops */

#ifndef CT_IDMAP_CHUNK
#define CT_IDMAP_CHUNK 512 /* ids per probe chunk (deferred probes wait on the stack) */
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

/* ---------------------------------------------------------------- self-check (tests) */

#ifndef CT_IDMAP_V3
int ct_idmap_check(const ct_idmap *m) {
    const size_t nd = (size_t)1 << m->gdepth;
    size_t total = 0, nsegs = 0;
    for (size_t j = 0; j < nd;) {
        const seg_t *s = m->dir[j].seg;
        if (s->depth > m->gdepth) return 1;
        const size_t span = (size_t)1 << (m->gdepth - s->depth);
        if (j != (size_t)s->prefix << (m->gdepth - s->depth)) return 2;
        for (size_t q = 0; q < span; q++) {
            const dirent_t *d = &m->dir[j + q];
            if (d->seg != s || d->slots != s->slots || d->cap != s->cap || d->nb != 63 - (uint64_t)s->depth)
                return 3;
        }
        if (s->cap < SEG_MIN_SLOTS || s->cap % 16 != 0 || s->limit != limit_for(s->cap)) return 4;
        if (s->flag || s->pending || s->k) return 5;
        if (s->slab && (s->slab->refs == 0 || (const char *)s->slots < s->slab->base ||
                        (const char *)(s->slots + s->cap) > s->slab->base + s->slab->len ||
                        (s->slab->open && (const char *)(s->slots + s->cap) > s->slab->base + s->slab->used)))
            return 12;
        size_t n = 0, hi = 0;
        const uint64_t cap = s->cap;
        for (uint64_t i = 0; i < s->cap; i++) {
            const slot_t *sl = &s->slots[i];
            if (sl->val == 0) {
                if (sl->key != 0) return 13; /* empty slots are all zero (split_slot relies on it) */
                continue;
            }
            if (sl->val < 0) return 6; /* CLAIMED left behind */
            const uint64_t h = mix64(sl->key);
            if (s->depth && (h >> (64 - s->depth)) != s->prefix) return 7;
            /* no empty slot between the home slot and the id's slot */
            for (uint64_t p = home_of(h, cap); p != i; p = wrap_add(p, 1, cap))
                if (s->slots[p].val == 0) return 8;
            n++;
            hi += (h >> (63 - s->depth)) & 1;
        }
        if (n != s->size || hi != s->hi || n > s->limit) return 9;
        total += n;
        nsegs++;
        j += span;
    }
    if (total != m->size || nsegs != m->nsegs) return 10;
    if (m->free_len > m->free_cap || (int64_t)m->size + (int64_t)m->free_len != m->high_water) return 11;
    return 0;
}

size_t ct_idmap_probe_lines(const ct_idmap *m, size_t *max_lines) {
    size_t total = 0, most = 0;
    for (size_t j = 0; j < ((size_t)1 << m->gdepth); j = next_seg(m, j)) {
        const seg_t *s = m->dir[j].seg;
        for (uint64_t i = 0; i < s->cap; i++) {
            if (s->slots[i].val == 0) continue;
            const uint64_t home = home_of(mix64(s->slots[i].key), s->cap);
            const size_t lines = (size_t)(ring_dist(home, i & ~(uint64_t)(LINE_SLOTS - 1), s->cap) / LINE_SLOTS);
            total += lines;
            if (lines > most) most = lines;
        }
    }
    if (max_lines) *max_lines = most;
    return total;
}

size_t ct_idmap_segments(const ct_idmap *m, unsigned *depth, size_t *max_slots) {
    size_t most = 0;
    for (size_t j = 0; j < ((size_t)1 << m->gdepth); j = next_seg(m, j))
        if (m->dir[j].seg->cap > most) most = m->dir[j].seg->cap;
    if (depth) *depth = m->gdepth;
    if (max_slots) *max_slots = most;
    return m->nsegs;
}

/* ---------------------------------------------------------------- ISA dispatch */

int ct_idmap_baseline_only = 0;

#ifdef CT_IDMAP_DISPATCH
/* __builtin_cpu_supports reads what libgcc found at startup: a load and a test per batch */
static inline int use_v3(void) { return !ct_idmap_baseline_only && __builtin_cpu_supports("x86-64-v3"); }

size_t ct_idmap_find(const ct_idmap *m, const int64_t *ids, size_t n, int64_t *out) {
    return use_v3() ? ct_idmap_v3_find(m, ids, n, out) : ct_idmap_base_find(m, ids, n, out);
}

int64_t ct_idmap_find_or_insert(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out, uint8_t *is_new) {
    return use_v3() ? ct_idmap_v3_find_or_insert(m, ids, n, out, is_new)
                    : ct_idmap_base_find_or_insert(m, ids, n, out, is_new);
}

int64_t ct_idmap_erase(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out) {
    return use_v3() ? ct_idmap_v3_erase(m, ids, n, out) : ct_idmap_base_erase(m, ids, n, out);
}

int ct_idmap_reserve(ct_idmap *m, size_t additional) {
    return use_v3() ? ct_idmap_v3_reserve(m, additional) : ct_idmap_base_reserve(m, additional);
}

const char *ct_idmap_isa(void) { return use_v3() ? "x86-64-v3" : "baseline"; }
#else
const char *ct_idmap_isa(void) { return "baseline"; }
#endif
#endif /* !CT_IDMAP_V3 */
