package embedding

// The forms of Lookup and Read that write rows into the caller's slice: one call into C, no
// tensor on either side, nothing allocated; for a serving loop that reuses its buffers. The C
// side checks the slices' lengths before it touches them.

// LookupInto is LookupIDs writing the rows into dst (len(ids) * Dim floats, row after row;
// another length is ErrBadInput) instead of a new tensor. On error the table is as LookupIDs
// leaves it and what dst holds is unspecified.
func (t *Table) LookupInto(dst []float32, ids []int64) error {
	if t == nil {
		return errNilTable
	}
	return wrap("lookup into", t.name, t.t.LookupInto(dst, ids))
}

// ReadInto is ReadIDs writing the rows into dst (len(ids) * Dim floats) and, when found is not
// nil, whether each id was present into found (len(ids) bools).
func (t *Table) ReadInto(dst []float32, found []bool, ids []int64) error {
	if t == nil {
		return errNilTable
	}
	return wrap("read into", t.name, t.t.ReadInto(dst, found, ids, t.conf().ReadDefault.c()))
}
