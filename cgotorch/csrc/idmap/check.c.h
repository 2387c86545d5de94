/* check.c.h - the id map's self-check and introspection for tests (its invariants, probe
 * lengths and segments).
 * A part of idmap.c.h (included by it, in the order listed there; not a header of its own). */

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

#endif /* !CT_IDMAP_V3 */
