package embedding

// SetLR sets the learning rate of the table's optimizer (FTRL's Alpha) from the next step on,
// as assigning the lr of a torch param_group does: a schedule (warm-up, decay) calls it between
// steps. The rest of the optimizer's configuration stays; Config and checkpoints carry the new
// rate. It must be finite and >= 0 (FTRL: > 0), else ErrBadInput; a table without an optimizer
// is ErrBadInput too.
//
// With SGD momentum, rows absent from a step still move (see SGD), lazily, at the rate of the
// step that catches them up; so SetLR first brings every row behind the step up to date at the
// old rate: a pass over the table under its exclusive lock, and those rows go into the next
// Delta (nothing happens when the rate does not change). The other optimizers change nothing
// but the rate.
func (t *Table) SetLR(lr float64) error {
	if t == nil {
		return errNilTable
	}
	if err := t.t.SetLR(lr); err != nil {
		return wrap("set lr", t.name, err)
	}
	t.refresh()
	return nil
}

// LR is the learning rate of the table's optimizer (FTRL's Alpha; 0 without an optimizer).
func (t *Table) LR() float64 {
	if t == nil {
		return 0
	}
	switch o := t.Config().Optimizer.(type) {
	case SGD:
		return o.LR
	case Adagrad:
		return o.LR
	case RowWiseAdagrad:
		return o.LR
	case SparseAdam:
		return o.LR
	case AdamW:
		return o.LR
	case FTRL:
		return o.Alpha
	}
	return 0
}
