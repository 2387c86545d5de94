/* idmap.c.h - id map + index allocator for the dynamic hash embedding table.
 * See idmap.h for the contract. C11; uses GCC/Clang builtins (prefetch, ctz) and SSE2
 * intrinsics where available, with portable fallbacks. This file holds the layout (below),
 * the types and the ISA dispatch; the code is in the *.c.h parts it includes, listed after
 * the types (one translation unit, so the compiler sees and inlines all of it).
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
 * plus a margin at load 9/16, so a pre-sized map's bytes per id do not depend on the count
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
#include "isa.h" /* first: it sets the feature macros both builds need */

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* The batched operations are defined as BATCH_OP(name): the public ct_idmap_<name>, or with ISA
 * dispatch (isa.h) ct_idmap_base_<name> here and ct_idmap_v3_<name> in cgotorch/unity_idmap_v3.c's
 * build of this file (CT_IDMAP_V3), which the public names choose between (end of file). */
#if defined(CT_IDMAP_V3)
#define BATCH_OP(name) ct_idmap_v3_##name
#elif defined(CT_IDMAP_DISPATCH)
#define BATCH_OP(name) ct_idmap_base_##name
#else
#define BATCH_OP(name) ct_idmap_##name
#endif

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(size_t) == 8 && sizeof(void *) == 8, "idmap.c.h needs a 64-bit target");
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

/* The implementation, by purpose (each part uses only those before it). */
#include "alloc.c.h"      /* slot arrays, slabs, the allocation-failure test hook */
#include "sizing.c.h"     /* hash, capacities, load limits, line helpers */
#include "grow.c.h"       /* growth plans, doubling, splits */
#include "lifecycle.c.h"  /* new, reserve, clear, export, free */
#include "batch.c.h"      /* find, find_or_insert, erase */
#include "check.c.h"      /* self-check for tests */

/* ---------------------------------------------------------------- ISA dispatch */

#ifndef CT_IDMAP_V3
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
