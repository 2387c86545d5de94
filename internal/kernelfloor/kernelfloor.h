/* kernelfloor.h: the floor kernels of an SVD++ step's implicit term (see doc.go). Plain C. */
#ifndef GOREC_KERNELFLOOR_H
#define GOREC_KERNELFLOOR_H

#include <stdint.h>

/* Instruction sets of the kernels (kf_supported says which run here). */
enum { KF_PORTABLE = 0, KF_AVX2 = 1, KF_AVX512 = 2 };

/* Whether isa's kernels run on this CPU. */
int kf_supported(int isa);

/* For each r in [r0, r1): out[r] = the sum over q in [start[r], start[r + 1]), in order, of
 * w[q] * src[idx[q]] (rows of dim floats; each product rounded, then added: no fused
 * multiply-add). Pooling forward (r: a bag, src: its rows) and backward (r: a row, src: the
 * bags' gradients) are both this. */
void kf_weighted_sum(int isa, float *out, const float *src, int64_t dim, const int32_t *start, const int32_t *idx,
                     const float *w, int64_t r0, int64_t r1);

/* SparseAdam (torch.optim.SparseAdam's operations, in its order) on floats [i0, i1) of p, with
 * moments m, v and gradient g: a1 = 1 - beta1, a2 = 1 - beta2, nss = -step size. */
void kf_sparse_adam(int isa, float *p, float *m, float *v, const float *g, int64_t i0, int64_t i1, float a1, float a2,
                    float eps, float nss);

#endif
