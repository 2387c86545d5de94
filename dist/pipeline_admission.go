package dist

import "slices"

// A TrainPipeline under admission (SetAdmission with k > 1). The fetch of batch i+1 runs the
// owners' training lookups of its ids before batch i's Step, and may admit an id that batch i
// looked up before its admission (a zero row). A plain loop's owner ignores batch i's gradient
// of it, the id having no row at that Step; the pipeline's never receives it: each lookup's
// fetch tells the ranks which of its ids it kept out (sharded_kept_out.go), and a rank keeps
// those out of its cache, so that their lookups give zero rows and no gradient. Batch i+1 then
// trains on the row its fetch admitted the id with, the initial row that the plain loop's
// lookup would admit it with after the Step: the Step did not change it, so the patch leaves
// it alone, and it leaves out the ids a lookup of batch i+1 kept out (fetched.unadmitted),
// which stay out of the cache. The fetch counts the same occurrences as the plain loop's
// lookups, in the same order, one batch early.

// stepHook is what an owner does besides updating while a TrainPipeline steps its table: it
// records the ids it updates.
type stepHook struct {
	updated []int64
}

// record records recv (the ids whose gradients an owner steps) as updated.
func (h *stepHook) record(recv []int64) {
	h.updated = append(h.updated, recv...)
}

// without returns the ids of a (ascending) not in b (ascending).
func without(a, b []int64) []int64 {
	if len(b) == 0 {
		return a
	}
	var out []int64
	for _, id := range a {
		if _, ok := slices.BinarySearch(b, id); !ok {
			out = append(out, id)
		}
	}
	return out
}
