/* grow.c.h - the id map's growth: planning a batch's growth before anything changes, doubling
 * segments, and splitting full ones in place by their next hash bit.
 * A part of idmap.c.h (included by it, in the order listed there; not a header of its own). */

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
