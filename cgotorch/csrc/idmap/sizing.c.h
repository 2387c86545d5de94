/* sizing.c.h - the id map's hash (mix64), segment capacities and load limits, and the probing
 * helpers on a segment's lines (home line, wrap-around, directory entry of a hash).
 * A part of idmap.c.h (included by it, in the order listed there; not a header of its own). */

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
#define CT_IDMAP_RESERVE16 9 /* load reserve sizes segments for, in 16ths (see cap_fit) */
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
