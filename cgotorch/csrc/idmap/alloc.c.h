/* alloc.c.h - the id map's memory: the test hook that fails allocations, and segment slot arrays
 * (small ones from malloc, big ones carved from 2 MiB-aligned slabs advised for huge pages).
 * A part of idmap.c.h (included by it, in the order listed there; not a header of its own). */

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

/* Grows the allocator's free list so that n more freed indices fit: 0, or -1 on out-of-memory
 * (unchanged). Erase calls it before it erases anything; ct_idmap_reserve_free ahead of it. */
static int free_reserve(ct_idmap *m, size_t n) {
    if (m->free_cap - m->free_len >= n) return 0;
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
    return 0;
}
