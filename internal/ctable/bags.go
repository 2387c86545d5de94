package ctable

// #include "../../cgotorch/cgotorch.h"
import "C"

import (
	"runtime"
	"slices"

	"github.com/gorec/gorec/cgotorch"
)

// BagBounds says how ForwardBags' bounds delimit the bags.
type BagBounds int32

// The forms of bag bounds (cgotorch/cgotorch.h, ct_bags_bounds).
const (
	// BagOffsets are torch's offsets [S*B]: bag i is ids[offsets[i]:offsets[i+1]], the last one
	// runs to N.
	BagOffsets BagBounds = C.CT_BAGS_OFFSETS
	// BagOffsetsIncludeLast are offsets [S*B+1] whose last one is N (include_last_offset).
	BagOffsetsIncludeLast BagBounds = C.CT_BAGS_OFFSETS_INCLUDE_LAST
	// BagLengths are the bags' lengths [S*B], adding up to N.
	BagLengths BagBounds = C.CT_BAGS_LENGTHS
)

// BagFeature is one feature of ForwardBags: the bags of input segment Segment, pooled by Mode
// (BagSum or BagMean) from Table with Opts, ids not in the table read as Default.
type BagFeature struct {
	Table   *Table
	Mode    BagMode
	Opts    ForwardOptions
	Default ReadDefault
	Segment int
}

// ForwardBags looks up and pools the bags of every feature in one call: ids int64 [N] hold
// segments segment after segment, bounds (int64, kind says which form) delimit segments * B bags;
// weights (float32 [N], without gradient; sum only) may be nil. It returns float32
// [B, sum of the features' dims], feature i's columns after feature i-1's, with the gradients
// of each feature's rows reaching its table as with ForwardBag.
func ForwardBags(features []BagFeature, segments int, ids, bounds, weights *cgotorch.Tensor, kind BagBounds) (*cgotorch.Tensor, error) {
	const op = "table bags forward"
	k, err := tensorArg(op, "ids", ids)
	if err != nil {
		return nil, err
	}
	var bd, w C.ct_tensor
	if bounds != nil {
		if bd, err = tensorArg(op, "bounds", bounds); err != nil {
			return nil, err
		}
	}
	if weights != nil {
		if w, err = tensorArg(op, "weights", weights); err != nil {
			return nil, err
		}
	}
	tables := make([]*Table, len(features))
	for i, f := range features {
		tables[i] = f.Table
	}
	hs, release, err := acquireAll(op, tables)
	if err != nil {
		return nil, err
	}
	defer release()
	n := len(features)
	opts := make([]C.ct_table_forward_options, n+1) // (+1: never an empty array to index)
	modes := make([]C.int32_t, n+1)
	segs := make([]C.int32_t, n+1)
	for i, f := range features {
		opts[i] = f.Opts.c(f.Default)
		modes[i] = C.int32_t(f.Mode)
		segs[i] = C.int32_t(f.Segment)
	}
	hs = append(hs, nil)
	var out C.ct_tensor
	err = toError(op, C.ct_table_bags_forward(&out, C.int32_t(n), &hs[0], &opts[0], &modes[0], &segs[0],
		C.int32_t(segments), k, bd, C.int32_t(kind), w))
	runtime.KeepAlive(ids)
	runtime.KeepAlive(bounds)
	runtime.KeepAlive(weights)
	runtime.KeepAlive(tables)
	if err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// StepAll is Step of several tables in one call: every table steps (stepped[i] as Step's
// stepped), and the first failure is returned (that table keeps its pending gradients).
func StepAll(tables []*Table) (stepped []bool, err error) {
	const op = "table step all"
	hs, release, err := acquireAll(op, tables)
	if err != nil {
		return nil, err
	}
	defer release()
	s := make([]C.int32_t, len(tables)+1)
	hs = append(hs, nil)
	err = toError(op, C.ct_table_step_all(&s[0], C.int32_t(len(tables)), &hs[0]))
	runtime.KeepAlive(tables)
	stepped = make([]bool, len(tables))
	for i := range stepped {
		stepped[i] = s[i] != 0
	}
	return stepped, err
}

// ZeroGradAll is ZeroGrad of several tables in one call.
func ZeroGradAll(tables []*Table) error {
	const op = "table zero grad all"
	hs, release, err := acquireAll(op, tables)
	if err != nil {
		return err
	}
	defer release()
	hs = append(hs, nil)
	err = toError(op, C.ct_table_zero_grad_all(C.int32_t(len(tables)), &hs[0]))
	runtime.KeepAlive(tables)
	return err
}

// acquireAll acquires every table (each distinct one once: a second shared lock of one table
// could wait behind a Close queued in between) and returns their handles in the order of tables
// and the release of them all.
func acquireAll(op string, tables []*Table) ([]C.ct_table, func(), error) {
	hs := make([]C.ct_table, len(tables), len(tables)+1)
	var held []*Table
	release := func() {
		for _, t := range held {
			t.mu.RUnlock()
		}
	}
	for i, t := range tables {
		if j := slices.Index(tables[:i], t); j >= 0 && t != nil {
			hs[i] = hs[j]
			continue
		}
		p, err := t.acquire(op)
		if err != nil {
			release()
			return nil, nil, err
		}
		held = append(held, t)
		hs[i] = p
	}
	return hs, release, nil
}
