/* isa.h - internal to idmap.c.h and cgotorch/unity_idmap_v3.c: whether the id map's batched
 * operations are built twice, for the baseline the package is compiled for and for x86-64-v3 (AVX2,
 * BMI2, ...), with the public entry points choosing at run time by the CPU (CT_IDMAP_DISPATCH); and
 * the names of the two builds. GCC >= 12 on x86-64 Linux, unless the whole build already targets
 * AVX2 (-march=native on such a CPU: one build is enough) or CT_IDMAP_NO_DISPATCH is defined. */
#ifndef CT_IDMAP_ISA_H
#define CT_IDMAP_ISA_H

/* before any system header, in both builds alike (they must agree on the map's layout) */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* mmap, madvise */
#endif

#include "idmap.h"

#if !defined(CT_IDMAP_NO_DISPATCH) && defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && \
    !defined(__clang__) && __GNUC__ >= 12 && !defined(__AVX2__)
#define CT_IDMAP_DISPATCH 1

size_t ct_idmap_base_find(const ct_idmap *m, const int64_t *ids, size_t n, int64_t *out);
int64_t ct_idmap_base_find_or_insert(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out, uint8_t *is_new);
int64_t ct_idmap_base_erase(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out);
int ct_idmap_base_reserve(ct_idmap *m, size_t additional);

size_t ct_idmap_v3_find(const ct_idmap *m, const int64_t *ids, size_t n, int64_t *out);
int64_t ct_idmap_v3_find_or_insert(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out, uint8_t *is_new);
int64_t ct_idmap_v3_erase(ct_idmap *m, const int64_t *ids, size_t n, int64_t *out);
int ct_idmap_v3_reserve(ct_idmap *m, size_t additional);
#endif

#endif /* CT_IDMAP_ISA_H */
