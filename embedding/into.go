package embedding

// The forms of Lookup and Read that write rows into the caller's slice: one call into C, no
// tensor on either side, nothing allocated; for a serving loop that reuses its buffers.

// LookupInto is LookupIDs writing the rows into dst (len(ids) * Dim floats, row after row;
// another length is ErrBadInput) instead of a new tensor. On error the table is as LookupIDs
// leaves it and what dst holds is unspecified.
func (t *Table) LookupInto(dst []float32, ids []int64) error {
	const op = "lookup into"
	if err := t.checkDst(op, dst, len(ids)); err != nil {
		return err
	}
	return wrap(op, t.name, t.t.LookupInto(dst, ids))
}

// ReadInto is ReadIDs writing the rows into dst (len(ids) * Dim floats) and, when found is not
// nil, whether each id was present into found (len(ids) bools).
func (t *Table) ReadInto(dst []float32, found []bool, ids []int64) error {
	const op = "read into"
	if err := t.checkDst(op, dst, len(ids)); err != nil {
		return err
	}
	if found != nil && len(found) != len(ids) {
		return badInput(op, t.name, "found holds %d bools for %d ids", len(found), len(ids))
	}
	return wrap(op, t.name, t.t.ReadInto(dst, found, ids, t.cfg.ReadDefault.c()))
}

func (t *Table) checkDst(op string, dst []float32, n int) error {
	if len(dst) != n*t.cfg.Dim {
		return badInput(op, t.name, "dst holds %d floats, %d ids of dim %d need %d", len(dst), n, t.cfg.Dim, n*t.cfg.Dim)
	}
	return nil
}
