package embedding

import (
	"errors"
	"fmt"
)

// errNilTable is what a method called on a nil *Table returns (ErrBadInput) instead of a
// nil-pointer panic; Name, Dim, Config, Len and LR give zero values, Close nil.
var errNilTable = &Error{Op: "table", Kind: ErrBadInput, Err: errors.New("nil *Table")}

// nilIn is ErrBadInput naming the first nil table of tables, or nil when there is none.
func nilIn(op string, tables []*Table) error {
	for i, t := range tables {
		if t == nil {
			return &Error{Op: op, Kind: ErrBadInput, Err: fmt.Errorf("table %d of %d is nil", i, len(tables))}
		}
	}
	return nil
}
