/* lifecycle.c.h - creating, sizing (reserve), clearing, exporting and freeing an id map.
 * A part of idmap.c.h (included by it, in the order listed there; not a header of its own). */

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

int ct_idmap_reserve_free(ct_idmap *m, size_t n) { return free_reserve(m, n); }

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

size_t ct_idmap_export_marked(const ct_idmap *m, const uint8_t *mark, size_t hw, int64_t *ids, int64_t *idx,
                              size_t cap) {
    if (mark && hw == 0) return 0; /* nothing can be marked (and mark[0] is not there to read) */
    size_t n = (size_t)1 << m->gdepth, w = 0;
    for (size_t j = 0; j < n && w < cap; j = next_seg(m, j)) {
        const seg_t *s = m->dir[j].seg;
        for (size_t i = 0; i < s->cap && w < cap; i++) {
            const uint64_t x = (uint64_t)s->slots[i].val - 1; /* an empty slot: UINT64_MAX */
            /* marked: one test (& reads a mark for empty slots too), taken rarely, not a branch
             * on the (random) empty slots */
            const int take = mark ? (x < hw) & (mark[x < hw ? x : 0] != 0) : x != UINT64_MAX;
            if (!take) continue;
            ids[w] = s->slots[i].key;
            idx[w] = (int64_t)x;
            w++;
        }
    }
    return w;
}

size_t ct_idmap_export(const ct_idmap *m, int64_t *ids, int64_t *idx, size_t cap) {
    ct_idmap_export_marked(m, NULL, 0, ids, idx, cap);
    return m->size;
}

/* Indices below the high water mark are each either an id's or on the free list
 * (ct_idmap_check verifies size + free_len == high_water). */
size_t ct_idmap_live(const ct_idmap *m, uint8_t *live, size_t hw) {
    if (hw == 0) return 0; /* live may be NULL */
    const size_t top = (size_t)m->high_water < hw ? (size_t)m->high_water : hw;
    size_t n = top;
    memset(live, 1, top);
    memset(live + top, 0, hw - top);
    for (size_t i = 0; i < m->free_len; i++) {
        const uint64_t x = (uint64_t)m->free_list[i];
        if (x < top) {
            live[x] = 0;
            n--;
        }
    }
    return n;
}

size_t ct_idmap_pack_moves(const ct_idmap *m) {
    size_t holes = 0;
    for (size_t i = 0; i < m->free_len; i++) holes += (uint64_t)m->free_list[i] < (uint64_t)m->size;
    return holes;
}

int64_t ct_idmap_pack(ct_idmap *m, int64_t *from, int64_t *to, size_t cap, int apply) {
    const uint64_t size = m->size;
    const size_t moves = ct_idmap_pack_moves(m);
    if (moves > cap) return -1;
    size_t n = (size_t)1 << m->gdepth, w = 0, f = 0;
    for (size_t j = 0; j < n && w < moves; j = next_seg(m, j)) {
        seg_t *s = m->dir[j].seg;
        for (size_t i = 0; i < s->cap && w < moves; i++) {
            const uint64_t v = (uint64_t)s->slots[i].val; /* index + 1; an empty slot: 0 */
            if (v <= size) continue; /* (one test for both: no branch on the empty slots) */
            const uint64_t x = v - 1;
            while ((uint64_t)m->free_list[f] >= size) f++; /* (a hole is left for each such id) */
            from[w] = (int64_t)x;
            to[w] = m->free_list[f++];
            if (apply) s->slots[i].val = to[w] + 1;
            w++;
        }
    }
    if (apply) {
        m->high_water = (int64_t)size;
        m->free_len = 0;
        m->bytes -= m->free_cap * sizeof(int64_t); /* the free list is empty: its memory goes */
        xfree(m->free_list);
        m->free_list = NULL;
        m->free_cap = 0;
    }
    return (int64_t)w;
}

size_t ct_idmap_export_by_index(const ct_idmap *m, int64_t *id_at, uint8_t *live, size_t hw) {
    size_t n = (size_t)1 << m->gdepth, w = 0;
    for (size_t j = 0; j < n; j = next_seg(m, j)) {
        const seg_t *s = m->dir[j].seg;
        for (size_t i = 0; i < s->cap; i++) {
            const uint64_t x = (uint64_t)s->slots[i].val - 1; /* an empty slot: UINT64_MAX */
            if (x >= hw) continue;
            id_at[x] = s->slots[i].key;
            live[x] = 1;
            w++;
        }
    }
    return w;
}
#endif /* !CT_IDMAP_V3 */
