package embedding

import "github.com/gorec/gorec/cgotorch"

// LookupCounted is LookupIDs counting ids[i] counts[i] times in the rows' access frequency
// (Config.TrackAccess: Metadata, eviction by frequency) and in the admission counts
// (SetAdmission), as a lookup of a batch holding ids[i] counts[i] times would; the rows are
// LookupIDs'. It is for a caller that looks up a batch's distinct ids, as a sharded table's
// owner does. counts must hold one count (>= 1) per id: otherwise ErrBadInput, and the table
// does not change.
func (t *Table) LookupCounted(ids, counts []int64) (*cgotorch.Tensor, error) {
	const op = "lookup counted"
	if t == nil {
		return nil, errNilTable
	}
	if len(counts) != len(ids) {
		return nil, badInput(op, t.name, "%d counts for %d ids", len(counts), len(ids))
	}
	k, err := t.idsTensor(op, ids)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	c, err := t.idsTensor(op, counts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r, err := t.t.LookupCounted(k, c)
	return r, wrap(op, t.name, err)
}
