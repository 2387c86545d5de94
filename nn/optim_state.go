package nn

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// The optimizer's state in a safetensors file (Optimizer.SaveState): a tensor per state of each
// parameter, named "<parameter name>.<state>" with torch.optim's state names (momentum_buffer;
// exp_avg, exp_avg_sq, max_exp_avg_sq; sum), and in the metadata the rule (torch.optim's class
// name), its hyperparameters under torch's names (momentum, dampening, nesterov; betas, eps,
// amsgrad; lr_decay, eps, initial_accumulator_value) and the parameter groups (lr,
// weight_decay, and each parameter's name and step count), as JSON: what a script makes of a
// torch optimizer's state_dict (nn/testdata/gen_nn.py does).
const (
	optimFormat  = "gorec-optimizer"
	optimVersion = "1"
)

type savedGroup struct {
	LR          float64      `json:"lr"`
	WeightDecay float64      `json:"weight_decay"`
	Params      []savedParam `json:"params"`
}

type savedParam struct {
	Name string `json:"name"`
	Step int64  `json:"step"`
}

// stateTensors are the parameters' state tensors under their names in a saved state.
func (o *Optimizer) stateTensors() []NamedParameter {
	names := o.rule.stateNames()
	var out []NamedParameter
	for _, g := range o.groups {
		for _, p := range g.Params {
			s := o.state[p.Tensor]
			for i, t := range [3]*Tensor{s.a, s.b, s.c} {
				if t != nil {
					out = append(out, NamedParameter{Name: p.Name + "." + names[i], Tensor: t})
				}
			}
		}
	}
	return out
}

func (o *Optimizer) savedGroups() []savedGroup {
	out := make([]savedGroup, len(o.groups))
	for i, g := range o.groups {
		out[i] = savedGroup{LR: g.LR, WeightDecay: g.WeightDecay}
		for _, p := range g.Params {
			out[i].Params = append(out[i].Params, savedParam{Name: p.Name, Step: o.state[p.Tensor].step})
		}
	}
	return out
}

// metadata is what SaveState writes besides the tensors.
func (o *Optimizer) metadata() (map[string]string, error) {
	hyper, err := json.Marshal(o.rule.hyper())
	if err != nil {
		return nil, err
	}
	groups, err := json.Marshal(o.savedGroups())
	if err != nil {
		return nil, err
	}
	return map[string]string{"format": optimFormat, "version": optimVersion, "optimizer": o.name,
		"options": string(hyper), "param_groups": string(groups)}, nil
}

// SaveState writes the optimizer's state to w in the safetensors format: every parameter's
// state tensors (moment estimates, momentum buffers, accumulators) and step count, and each
// group's learning rate and weight decay, so that LoadState into an optimizer built the same
// way resumes training with the numbers an uninterrupted run gives. The parameters are known by
// their names in the groups, which must be unique (an error wrapping
// cgotorch.ErrInvalidArgument otherwise). The Steppers' state (the embedding tables') is not
// included: checkpoints save the tables (see SaveTrainingCheckpoint).
func (o *Optimizer) SaveState(w io.Writer) error {
	if err := o.uniqueNames("save state"); err != nil {
		return err
	}
	meta, err := o.metadata()
	if err != nil {
		return err
	}
	return WriteSafetensors(w, o.stateTensors(), meta)
}

// LoadState reads a state written by SaveState and copies it into the optimizer: the state
// tensors, the step counts and the groups' learning rates and weight decays (as
// torch.optim's load_state_dict restores its param_groups; set another learning rate after
// loading to change it). It is strict: the rule and its other hyperparameters (betas, momentum,
// ...), the groups and the parameters' names, order and shapes must be those saved, or it
// returns an error wrapping cgotorch.ErrInvalidArgument (ErrFormat for malformed data), and the
// optimizer is left unchanged unless everything fits.
func (o *Optimizer) LoadState(r io.Reader) error {
	st, err := o.readState(r, false)
	if err != nil {
		return err
	}
	defer st.close()
	return st.apply()
}

// uniqueNames refuses parameter names that are not unique: they name the state's tensors.
func (o *Optimizer) uniqueNames(op string) error {
	seen := map[string]bool{}
	for _, g := range o.groups {
		for _, p := range g.Params {
			if seen[p.Name] {
				return invalid("%s: %s: parameter name %q is not unique", o.name, op, p.Name)
			}
			seen[p.Name] = true
		}
	}
	return nil
}

// readState reads and checks a saved state as LoadState does, changing nothing; its apply
// copies it in. The caller closes the result. whole is readSafetensors'.
func (o *Optimizer) readState(r io.Reader, whole bool) (*checkedState, error) {
	if err := o.uniqueNames("loading state"); err != nil {
		return nil, err
	}
	tensors, meta, err := readSafetensors(r, whole)
	if err != nil {
		return nil, err
	}
	groups, err := o.checkMetadata(meta)
	if err != nil {
		for _, t := range tensors {
			t.Close()
		}
		return nil, err
	}
	st, err := checkState(o.stateTensors(), tensors, fmt.Sprintf("%s: loading state", o.name))
	if err != nil {
		return nil, err
	}
	st.after = func() {
		for i, g := range o.groups {
			g.LR, g.WeightDecay = groups[i].LR, groups[i].WeightDecay
			for j, p := range g.Params {
				o.state[p.Tensor].step = groups[i].Params[j].Step
			}
		}
	}
	return st, nil
}

// checkMetadata checks a saved state's metadata against the optimizer and returns its groups.
func (o *Optimizer) checkMetadata(meta map[string]string) ([]savedGroup, error) {
	bad := func(format string, args ...any) ([]savedGroup, error) {
		return nil, invalid("%s: loading state: %s", o.name, fmt.Sprintf(format, args...))
	}
	if meta["format"] != optimFormat || meta["version"] != optimVersion {
		return bad("not an optimizer state of this version (format %q, version %q)", meta["format"], meta["version"])
	}
	if meta["optimizer"] != o.name {
		return bad("saved by %s", meta["optimizer"])
	}
	// Compared as JSON values, whatever wrote them (Go, or a script from torch's state_dict).
	want, err := json.Marshal(o.rule.hyper())
	if err != nil {
		return nil, err
	}
	var saved map[string]any
	if err := json.Unmarshal([]byte(meta["options"]), &saved); err != nil {
		return nil, fmt.Errorf("%w: %s: options: %w", ErrFormat, o.name, err)
	}
	if got, err := json.Marshal(saved); err != nil || string(got) != string(want) {
		return bad("saved with options %s, this optimizer has %s", meta["options"], want)
	}
	var groups []savedGroup
	if err := json.Unmarshal([]byte(meta["param_groups"]), &groups); err != nil {
		return nil, fmt.Errorf("%w: %s: param_groups: %w", ErrFormat, o.name, err)
	}
	if len(groups) != len(o.groups) {
		return bad("%d parameter groups saved, %d here", len(groups), len(o.groups))
	}
	for i, g := range o.groups {
		saved := make([]string, len(groups[i].Params))
		for j, p := range groups[i].Params {
			saved[j] = p.Name
			if p.Step < 0 {
				return bad("parameter %q has step %d", p.Name, p.Step)
			}
		}
		here := make([]string, len(g.Params))
		for j, p := range g.Params {
			here[j] = p.Name
		}
		if !slices.Equal(saved, here) {
			return bad("group %d holds parameters %q, saved %q", i, here, saved)
		}
		if !(groups[i].LR >= 0) || !(groups[i].WeightDecay >= 0) {
			return bad("group %d has learning rate %v and weight decay %v", i, groups[i].LR, groups[i].WeightDecay)
		}
	}
	return groups, nil
}
