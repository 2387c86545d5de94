// Package kernelfloor holds the hardware floor of an SVD++ step's implicit term: the kernels
// such a step cannot avoid, in plain C (AVX-512 and AVX2 through target attributes, and a
// portable form, chosen at run time), run on contiguous data prepared beforehand, with no table,
// hash map, autograd or tensor around them. nn's BenchmarkMovieLensSVDppHardwareFloor times the
// MF step plus these kernels for the same batches, to show how close to plain MF an SVD++ step
// could come on a machine (issue #34's target: within 3x), apart from what gorec's kernels add.
//
// The kernels, for one batch of per-user bags whose distinct ids are remapped to rows
// 0..U-1 of a contiguous [U, dim] array (a Batch):
//   - pooling forward: each bag's weighted sum of its rows, in position order (Batch.Forward);
//   - pooling backward: each row's gradient, the sum over its occurrences (listed per row
//     beforehand, in position order) of its bag's gradient times its weight (Batch.Backward);
//   - the SparseAdam step of the U rows, with torch.optim.SparseAdam's operations in its order:
//     one square root and one division per element (SparseAdam).
//
// Each product is rounded before it is added (no fused multiply-add), as SparseAdam computes
// them (torch's pooling fuses them, as gorec's kernels do: one instruction fewer an element, in
// kernels bound by loading rows, not by their arithmetic), so that every form gives the same
// bits as the package's tests' plain Go computation. With threads > 1 a kernel splits its rows
// into that many ranges of about equal work, each run on its own goroutine. Not part of gorec's
// API: a benchmark's yardstick.
package kernelfloor
