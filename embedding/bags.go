package embedding

import (
	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/ctable"
)

// BagBounds says how ForwardBags' bounds delimit the bags.
type BagBounds = ctable.BagBounds

// The forms of bag bounds.
const (
	// Offsets are PyTorch's offsets [S*B]: bag i is ids[offsets[i]:offsets[i+1]], the last one
	// runs to N.
	Offsets = ctable.BagOffsets
	// OffsetsIncludeLast are offsets [S*B+1] whose last one is N (include_last_offset).
	OffsetsIncludeLast = ctable.BagOffsetsIncludeLast
	// Lengths are the bags' lengths [S*B] (a KeyedJaggedTensor's), adding up to N.
	Lengths = ctable.BagLengths
)

// BagFeature is one feature of ForwardBags: the bags of input segment Segment, pooled by Mode
// (Sum or Mean) from Table with Options.
type BagFeature struct {
	Table   *Table
	Mode    BagMode
	Options ForwardOptions
	Segment int
}

// ForwardBags looks up and pools the bags of several features, each from its table, in one call
// (table-batched embedding bags, as FBGEMM's): ids int64 [N] hold segments of bags one after the
// other, bounds (int64, in the form kind says) delimit segments * B bags, B bags a segment;
// weights (per-sample weights, float32 [N], without gradient; Sum only) may be nil. It returns
// float32 [B, sum of the tables' dims], feature i's columns after feature i-1's. A table may
// serve several features. Each feature's numbers are ForwardBag's for its segment (sum and mean
// bags of CPU ids take this path there too), and so are its gradients.
//
// Every input is checked before any table changes (ErrBadInput); the lookups then run feature
// after feature, so a table closed meanwhile (ErrClosed) can leave the ids of the features
// before it inserted.
func ForwardBags(features []BagFeature, segments int, ids, bounds, weights *cgotorch.Tensor, kind BagBounds) (*cgotorch.Tensor, error) {
	const op = "forward bags"
	fs := make([]ctable.BagFeature, len(features))
	for i, f := range features {
		if f.Table == nil {
			return nil, errNilTable
		}
		if err := f.Table.checkForward(op, f.Options); err != nil {
			return nil, err
		}
		m, ok := f.Mode.c()
		if !ok || f.Mode == Max {
			return nil, badInput(op, f.Table.name, "bag mode %v: ForwardBags pools by Sum or Mean", f.Mode)
		}
		fs[i] = ctable.BagFeature{Table: f.Table.t, Mode: m, Opts: ctable.ForwardOptions(f.Options),
			Default: f.Table.conf().ReadDefault.c(), Segment: f.Segment}
	}
	r, err := ctable.ForwardBags(fs, segments, ids, bounds, weights, kind)
	return r, wrap(op, bagsName(features), err)
}

// StepAll is Step of several tables in one call (each table once, whatever its number of
// features): every table steps, and the first failure is returned (that table keeps its pending
// gradients, as Step does).
func StepAll(tables []*Table) error {
	ts, err := handles(tables)
	if err != nil {
		return err
	}
	_, err = ctable.StepAll(ts)
	return wrap("step all", "", err)
}

// ZeroGradAll is ZeroGrad of several tables in one call.
func ZeroGradAll(tables []*Table) error {
	ts, err := handles(tables)
	if err != nil {
		return err
	}
	return wrap("zero grad all", "", ctable.ZeroGradAll(ts))
}

func handles(tables []*Table) ([]*ctable.Table, error) {
	ts := make([]*ctable.Table, len(tables))
	for i, t := range tables {
		if t == nil {
			return nil, errNilTable
		}
		ts[i] = t.t
	}
	return ts, nil
}

// bagsName names the table of a one-feature call in its errors.
func bagsName(features []BagFeature) string {
	if len(features) == 1 {
		return features[0].Table.name
	}
	return ""
}
