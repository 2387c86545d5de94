/* idmap.h - id map for the dynamic hash embedding table.
 *
 * Maps a raw int64 id (every value is valid: 0, -1, INT64_MIN, INT64_MAX, ...) to a
 * contiguous int64 row index, and owns the index allocator: indices handed out are always
 * in [0, high_water); indices freed by erase are reused LIFO (the most recently freed index
 * is handed out first), and only when the free list is empty does high_water grow.
 *
 * C11, 64-bit targets. Not thread-safe: the caller serialises all calls on one map
 * (concurrent ct_idmap_find calls without writers are safe: find does not write the map).
 *
 * Design (details in idmap.c.h): 16-byte slots {id, index + 1} in independent linear-probing
 * segments of at most 2^17 slots (2 MiB; transparent huge pages on Linux), selected by the
 * high bits of a 64-bit mix of the id through an extendible-hashing directory. A segment
 * grows on its own (doubling, then splitting in two in place), so a growth step moves at
 * most one segment's ids (~98K), never the table. Max load 3/4. A reserve (or a capacity
 * hint) sizes each segment for its share at load 9/16: about 29 bytes per id whatever the
 * count; a map grown by inserts alone sits between loads 3/8 and 3/4 (21 to 43 bytes per
 * id). Batched calls are software pipelined with prefetching; pass batches of a few
 * thousand ids for best throughput (any n works).
 */
#ifndef CT_IDMAP_H
#define CT_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_idmap ct_idmap;

/* NULL on out-of-memory; hint 0 is fine. A hint > 0 is ct_idmap_reserve(hint). */
ct_idmap *ct_idmap_new(size_t capacity_hint);
/* NULL is a no-op. */
void ct_idmap_free(ct_idmap *m);
/* Number of ids stored. */
size_t ct_idmap_size(const ct_idmap *m);
/* Sum over segments of the ids each can hold before it must grow (3/4 of its slots).
 * Ids spread over segments by hash, so the first growth may come a little earlier. */
size_t ct_idmap_capacity(const ct_idmap *m);
/* Heap bytes held by map + allocator: slot arrays, directory, segment headers, free list. */
size_t ct_idmap_bytes(const ct_idmap *m);
/* Indices ever handed out (rows the storage must have); indices are in [0, high_water).
 * high_water == size + (freed indices waiting for reuse). */
int64_t ct_idmap_high_water(const ct_idmap *m);

/* Batched find: out[i] = row index of ids[i], or -1 if absent. Returns how many were found.
 * Never inserts, never allocates. */
size_t ct_idmap_find(const ct_idmap *m, const int64_t *ids, size_t n, int64_t *out);

/* Batched find-or-insert. out[i] = index of ids[i]; absent ids get a new index: a freed one
 * if any (LIFO), else high_water++. New indices are assigned in batch order (exactly as a
 * one-id-at-a-time loop would), so a fresh map gives 0, 1, 2, ... to the distinct ids in
 * order of first occurrence. is_new (may be NULL) gets 1 where this call created the id's
 * index (only the first occurrence of a duplicated id), else 0.
 * Returns the number of ids inserted, or -1 on out-of-memory, in which case the map and
 * the allocator are exactly as before the call (contents, size, high_water, free list,
 * capacity, bytes): all memory the batch may need is acquired before anything changes.
 * out and is_new are unspecified after -1 (out is used as scratch during the call). */
int64_t ct_idmap_find_or_insert(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out,
                                uint8_t *is_new);

/* Grow so that `additional` more ids, spread by the hash as real ids are, need no
 * allocation: every segment gets room for its expected share plus 4 standard deviations
 * plus 16. This cannot be guaranteed for adversarial ids that all hash into one segment;
 * find_or_insert stays failure-atomic regardless. 0, or -1 on out-of-memory (unchanged). */
int ct_idmap_reserve(ct_idmap *m, size_t additional);

/* Batched erase. out (may be NULL): the index freed for ids[i], or -1 if absent (or already
 * erased earlier in the same batch). Freed indices are pushed on the allocator's free list
 * in batch order (so the last one erased is the first reused). Slot memory is not shrunk.
 * Returns the number erased, or -1 on out-of-memory with nothing changed (the free list is
 * grown for n more entries before anything is erased). */
int64_t ct_idmap_erase(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out);

/* Grow the free list so that erasing n more ids needs no allocation (an erase then cannot
 * fail): 0, or -1 on out-of-memory (unchanged). */
int ct_idmap_reserve_free(ct_idmap *m, size_t n);

/* Empty the map: size 0, high_water 0, free list empty. Keeps the slot memory. */
void ct_idmap_clear(ct_idmap *m);

/* Export every (id, index) pair: writes at most cap pairs, returns size. Order unspecified. */
size_t ct_idmap_export(const ct_idmap *m, int64_t *ids, int64_t *idx, size_t cap);

/* Export by index, without the (id, index) arrays of ct_idmap_export: for every id with an
 * index below hw, id_at[index] = id and live[index] = 1. Other entries of id_at[0, hw) and
 * live[0, hw) are left as they were (a caller zeroes live first). With hw at least
 * ct_idmap_high_water, every id is written; walking live in index order then gives the ids
 * in index order from 9 bytes per index. Returns the number of ids written. */
size_t ct_idmap_export_by_index(const ct_idmap *m, int64_t *id_at, uint8_t *live, size_t hw);

/* Export the (id, index) pairs whose index i is below hw with mark[i] != 0 (mark NULL: every
 * pair, whatever hw): writes at most cap pairs, returns how many it wrote. Order unspecified.
 * Reads one mark per slot (mark[index], or mark[0] for an empty slot or an index at or above
 * hw): a selection of rows costs a pass over the map and writes only the pairs selected. */
size_t ct_idmap_export_marked(const ct_idmap *m, const uint8_t *mark, size_t hw, int64_t *ids, int64_t *idx,
                              size_t cap);

/* live[i] = 1 for each index i < hw that an id holds, else 0 (free, or at or above the high
 * water mark), from the allocator's free list: no pass over the map. Returns how many are 1. */
size_t ct_idmap_live(const ct_idmap *m, uint8_t *live, size_t hw);

/* Packs the indices into [0, size): each id whose index is at or above size takes a free
 * index below size (there are as many of those as of these: ct_idmap_pack_moves), then the
 * free list is emptied (and its memory freed) and high_water becomes size. from[k] and to[k] get the k-th move's old
 * and new index (ids met in the map's slot order, free indices taken in the free list's
 * order). apply 0: nothing changes, and the moves reported are exactly those a call with
 * apply 1 makes while the map stays as it is. Allocates nothing. Returns the number of moves,
 * or -1 (nothing done) when that exceeds cap. O(capacity): a pass over the slots that stops
 * at the last move. */
int64_t ct_idmap_pack(ct_idmap *m, int64_t *from, int64_t *to, size_t cap, int apply);
/* The number of moves ct_idmap_pack makes: the free indices below size. O(free list). */
size_t ct_idmap_pack_moves(const ct_idmap *m);

/* Test-only hook: when >= 0, the map's allocations succeed that many more times, then every
 * allocation fails until it is set back to -1 (the default). Not thread-safe. */
extern long ct_idmap_fail_after;

/* Which build of the batched operations runs: "x86-64-v3" (chosen at run time on CPUs that
 * have it, when built with GCC >= 12 for x86-64 Linux) or "baseline" (what the compiler
 * targets). Both give the same results. */
const char *ct_idmap_isa(void);

/* Test-only hook: nonzero makes every call use the baseline build. Not thread-safe. */
extern int ct_idmap_baseline_only;

/* Test-only: verify the map's internal invariants; 0 when consistent. O(capacity). */
int ct_idmap_check(const ct_idmap *m);

/* Test-only: how far ids sit from their home lines. Returns the sum over stored ids of the
 * lines a find scans past the home line (0 for an id in its home line); *max_lines (if not
 * NULL) gets the most for one id. Low for any set of distinct ids unless the hash is weak
 * (or the ids were built against it). O(capacity). */
size_t ct_idmap_probe_lines(const ct_idmap *m, size_t *max_lines);

/* Test-only: the shape of the directory. Returns the number of segments; *depth (if not
 * NULL) gets the directory's depth (it has 2^depth entries) and *max_slots (if not NULL) the
 * largest segment's slots. With a hash that spreads the ids, no segment holds more than
 * 2^17 slots (a build's CT_IDMAP_SEG_MAX_LOG) and 2^depth stays within a small multiple of
 * the segments; skewed high hash bits deepen the directory or swell one segment. */
size_t ct_idmap_segments(const ct_idmap *m, unsigned *depth, size_t *max_slots);

#ifdef __cplusplus
}
#endif

#endif /* CT_IDMAP_H */
