package embedding

import (
	"errors"

	"github.com/gorec/gorec/cgotorch"
)

// Check verifies the table's invariants and returns nil, or an error naming the first one
// broken (ErrInternal: the table is not what its operations leave; ErrClosed when closed):
//   - ids <-> row indices: the id map's own invariants, every index below the storage's capacity,
//     size + free list = the indices handed out;
//   - rows <-> storage: every block and chunk of rows present, the per-row metadata and momentum
//     stamps covering them;
//   - metadata: no row's last step or momentum stamp beyond the step counter;
//   - admission: counts only for ids without a row, each >= 1, none with admission off;
//   - deltas: no deletion or count log before the first mark;
//   - configuration and optimizer states: flags and states as the table was built, parameters
//     valid, rows and states finite, Adagrad's sums, Adam's second moments and FTRL's n >= 0.
//
// It reads every row under the table's shared lock (lookups of present ids go on, writers wait):
// a pass over the table, for a job that runs for months to run now and then, for tests, and run
// by every checkpoint load (a table that fails it does not load: ErrCorrupt).
func (t *Table) Check() error {
	const op = "check"
	err := t.t.Check()
	if errors.Is(err, cgotorch.ErrInvalidArgument) {
		return &Error{Op: op, Table: t.name, Kind: ErrInternal, Err: err}
	}
	return wrap(op, t.name, err)
}
