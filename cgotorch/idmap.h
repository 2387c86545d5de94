/* idmap.h - id map for the dynamic hash embedding table.
 *
 * Maps a raw int64 id to a contiguous int64 row index and owns the index
 * allocator (indices handed out are always in [0, high_water); indices freed
 * by erase are reused LIFO: the most recently freed index is handed out first).
 *
 * Pure C11. Not thread-safe: the caller serialises all calls on one map.
 *
 * Layout: an extendible-hashing directory selected by the high bits of a
 * 64-bit mix of the id, pointing at independent linear-probing segments of
 * 16-byte slots {id, index + 1} (index + 1 == 0 marks an empty slot, so every
 * int64 is a valid id). Segments double on their own and split in two once
 * they reach 2^17 slots (2 MiB), so a growth step never moves more than one
 * segment's ids (at most ~98K ids). Deletion is backward-shift, no tombstones.
 */
#ifndef CT_IDMAP_H
#define CT_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_idmap ct_idmap;

/* NULL on out-of-memory; hint 0 is fine. A hint is a reserve(hint). */
ct_idmap *ct_idmap_new(size_t capacity_hint);
/* NULL is a no-op. */
void ct_idmap_free(ct_idmap *m);
/* Number of ids stored. */
size_t ct_idmap_size(const ct_idmap *m);
/* Sum over segments of the ids each can hold before it must grow. Because ids
 * land in segments by hash, the first growth may come a little earlier. */
size_t ct_idmap_capacity(const ct_idmap *m);
/* Heap bytes held by map + allocator (slots, directory, segment headers, free list). */
size_t ct_idmap_bytes(const ct_idmap *m);
/* Indices ever handed out (rows the storage must have); indices are in [0, high_water). */
int64_t ct_idmap_high_water(const ct_idmap *m);

/* Batched find: out[i] = row index of ids[i], or -1 if absent. Returns how many were found. */
size_t ct_idmap_find(const ct_idmap *m, const int64_t *ids, size_t n, int64_t *out);

/* Batched find-or-insert. out[i] = index of ids[i]; absent ids get a new index: a freed
 * index if any (LIFO: most recently freed first), else high_water++. Within one batch,
 * new ids get indices in batch order. is_new (may be NULL) gets 1 where this call created
 * the id's index (only the first occurrence of a duplicated id), else 0.
 * Returns the number of ids inserted, or -1 on out-of-memory, in which case the map and
 * the allocator are exactly as before the call (all memory the batch needs is acquired
 * before anything changes); out and is_new are then unspecified. */
int64_t ct_idmap_find_or_insert(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out,
                                uint8_t *is_new);

/* Grow so that `additional` more ids (spread by the hash, as ids are) fit without any
 * allocation: every segment gets room for its expected share plus a margin of 4 standard
 * deviations (+16). It cannot guarantee this for adversarial ids that all hash to one
 * segment; find_or_insert stays failure-atomic regardless.
 * 0, or -1 on out-of-memory (map unchanged). */
int ct_idmap_reserve(ct_idmap *m, size_t additional);

/* Batched erase. out (may be NULL): the index freed for ids[i], or -1 if absent (or already
 * erased earlier in the same batch). Freed indices go to the allocator's free list for
 * reuse (pushed in batch order; reuse is LIFO). Slot memory is not shrunk.
 * Returns the number erased, or -1 on out-of-memory with nothing changed. */
int64_t ct_idmap_erase(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out);

/* Empty the map; high_water back to 0, free list emptied; keeps the slot memory. */
void ct_idmap_clear(ct_idmap *m);

/* Export every (id, index) pair; writes at most cap pairs, returns size. Order unspecified. */
size_t ct_idmap_export(const ct_idmap *m, int64_t *ids, int64_t *idx, size_t cap);

/* Test-only hook: when >= 0, the map's allocations succeed that many more times and then
 * every allocation fails (until reset to -1). Default -1 (never fail). Not thread-safe. */
extern long ct_idmap_fail_after;

/* Test-only: verify the map's internal invariants; 0 when consistent. O(capacity). */
int ct_idmap_check(const ct_idmap *m);

#ifdef __cplusplus
}
#endif

#endif /* CT_IDMAP_H */
