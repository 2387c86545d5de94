package dist

import "slices"

// A TrainPipeline under admission (SetAdmission with k > 1). The fetch of batch i+1 runs the
// owners' training lookup of its ids before batch i's Step, and may admit an id that batch i
// looked up before its admission (a zero row). A plain loop's owner ignores the gradient of
// such an id at batch i's Step, the id having no row yet; so the pipeline's owner drops it:
// each fetch records, on the owners, the ids it left without a row (fetched.unadmitted), and
// that batch's Step drops their gradients (stepHook). Nothing travels for it, and the Step
// still runs on every owner as the plain loop's does (a shard counts it, also with no id
// left). Batch i+1 then trains on the row its fetch admitted the id with, the initial row that
// the plain loop's lookup would admit it with after the Step: the Step did not change it, so
// the patch leaves it alone. The fetch counts the same occurrences as the plain loop's
// lookups, in the same order, one batch early.

// stepHook is what an owner does besides updating while a TrainPipeline steps its table: it
// drops the gradients of drop's ids (ascending) and records the ids it updates.
type stepHook struct {
	drop    []int64
	updated []int64
}

// filter leaves out of recv (the ids whose gradients an owner received) those of drop, and
// records the others as updated. keep is the rows of the gradients that recv's ids stand for
// (nil: all, in order); filter returns the ids left and their rows (nil: all, in order).
func (h *stepHook) filter(recv, keep []int64) ([]int64, []int64) {
	if len(h.drop) > 0 {
		var ids []int64
		rows := make([]int64, 0, len(recv))
		for i, id := range recv {
			if _, ok := slices.BinarySearch(h.drop, id); !ok {
				ids = append(ids, id)
				rows = append(rows, rowOf(keep, i))
			}
		}
		if len(ids) < len(recv) {
			recv, keep = ids, rows
		}
	}
	h.updated = append(h.updated, recv...)
	return recv, keep
}

// rowOf is the row of the i-th id: keep[i], or i when keep is nil.
func rowOf(keep []int64, i int) int64 {
	if keep == nil {
		return int64(i)
	}
	return keep[i]
}

// markUnadmitted records, for each lookup of fs (one batch's fetch) of a table that admits ids
// late, the ids this owner received that have no row after the whole fetch (ascending): its
// later lookups of the batch may have admitted an id an earlier one kept out. Only a counted
// lookup can be of such a table: a table that counts nothing costs nothing here.
func markUnadmitted(fs []*fetched) error {
	for _, f := range fs {
		t := f.p.Table
		if !f.counted || len(f.routed.ids) == 0 || !t.admitting() {
			continue
		}
		rows, err := t.shard.IndicesIDs(f.routed.ids, false)
		if err != nil {
			return err
		}
		var out []int64
		for i, r := range rows {
			if r < 0 {
				out = append(out, f.routed.ids[i])
			}
		}
		f.unadmitted = uniqueIDs(out, false, 0)
	}
	return nil
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
