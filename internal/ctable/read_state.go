package ctable

// #include "../../cgotorch/cgotorch.h"
import "C"

import (
	"runtime"

	"github.com/gorec/gorec/cgotorch"
)

// ReadState returns the rows of keys and their optimizer states as Export gives them, without
// inserting anything or copying the rest of the table; ids not in the table give zeros and
// false in found (bool [N]). One C call, one shared lock: the rows and states of one moment.
func (t *Table) ReadState(keys *cgotorch.Tensor) (rows *cgotorch.Tensor, states []*cgotorch.Tensor, found *cgotorch.Tensor, err error) {
	const op = "table read state"
	k, err := tensorArg(op, "keys", keys)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := t.acquire(op)
	if err != nil {
		return nil, nil, nil, err
	}
	defer t.mu.RUnlock()
	var s C.ct_table_stats
	if err := toError(op, C.ct_table_stats_get(&s, p)); err != nil {
		return nil, nil, nil, err
	}
	var r, f C.ct_tensor
	var st [2]C.ct_tensor
	err = toError(op, C.ct_table_read_state(&r, &st[0], 2, &f, p, k))
	runtime.KeepAlive(keys)
	runtime.KeepAlive(t)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := 0; i < int(s.num_states); i++ {
		states = append(states, newTensor(st[i]))
	}
	return newTensor(r), states, newTensor(f), nil
}
