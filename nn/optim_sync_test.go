package nn_test

import (
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// syncedMLP is a GradientSyncer over an MLP that records the calls and doubles the gradients
// in SyncGradients (or fails with err).
type syncedMLP struct {
	*nn.Sequential
	calls []string
	err   error
}

func (m *syncedMLP) SyncGradients() error {
	m.calls = append(m.calls, "sync")
	if m.err != nil {
		return m.err
	}
	for _, p := range m.Parameters() {
		p.Tensor.Grad().MulScalarInPlace(2)
	}
	return nil
}

func (m *syncedMLP) ResetGradientSync() { m.calls = append(m.calls, "reset") }

func paramValues(t *testing.T, ps []nn.NamedParameter) [][]float32 {
	var out [][]float32
	for _, p := range ps {
		v, err := cgotorch.ToSlice[float32](p.Tensor.Detach())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// An optimizer made from a GradientSyncer syncs the gradients before updating (the update
// uses the synced gradients), resets after the step and in ZeroGrad, and updates nothing when
// the sync fails.
func TestOptimizerSyncsGradients(t *testing.T) {
	cgotorch.ManualSeed(3)
	m := &syncedMLP{Sequential: newMLP()}
	cgotorch.ManualSeed(3)
	ref := newMLP()
	opt, err := nn.NewSGD(m, nn.SGDOptions{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	refOpt, err := nn.NewSGD(ref, nn.SGDOptions{LR: 0.2}) // twice the gradient, at LR 0.1
	if err != nil {
		t.Fatal(err)
	}
	x := cgotorch.Randn([]int64{5, 4})
	for _, mm := range []nn.Layer{m, ref} {
		mm.Forward(x).Sum().Backward()
	}
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	if err := refOpt.Step(); err != nil {
		t.Fatal(err)
	}
	got, want := paramValues(t, m.Parameters()), paramValues(t, ref.Parameters())
	for i := range got {
		for j := range got[i] {
			if d := got[i][j] - want[i][j]; d > 1e-6 || d < -1e-6 {
				t.Fatalf("parameter %d[%d]: %v, want %v: the step did not use the synced gradient", i, j, got[i][j], want[i][j])
			}
		}
	}
	opt.ZeroGrad()
	if want := []string{"sync", "reset", "reset"}; !slices.Equal(m.calls, want) {
		t.Errorf("calls %v, want %v", m.calls, want)
	}

	m.calls, m.err = nil, errors.New("peer gone")
	m.Forward(x).Sum().Backward()
	before := paramValues(t, m.Parameters())
	if err := opt.Step(); !errors.Is(err, m.err) {
		t.Fatalf("Step: %v, want the sync's error", err)
	}
	if after := paramValues(t, m.Parameters()); !slices.EqualFunc(before, after, slices.Equal) {
		t.Error("a step whose sync failed changed the parameters")
	}
	if want := []string{"sync"}; !slices.Equal(m.calls, want) {
		t.Errorf("calls %v, want %v", m.calls, want)
	}
}

// claimedMLP is a syncedMLP holding the Claim of its parameters.
type claimedMLP struct {
	syncedMLP
	claim *nn.Claim
}

// Parameters claimed by a GradientSyncer are refused by an optimizer made from anything else
// (the model, a ParamList, an added group), and taken by one made from the syncer; the claim
// lapses when the syncer is dropped.
func TestClaimedParameters(t *testing.T) {
	m := newMLP()
	s := &claimedMLP{syncedMLP: syncedMLP{Sequential: m}}
	s.claim = nn.ClaimParameters(s)
	if _, err := nn.NewAdam(m, nn.DefaultAdamOptions()); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("an optimizer from the model: %v, want %v", err, cgotorch.ErrInvalidArgument)
	}
	if _, err := nn.NewSGD(nn.ParamList(m.Parameters()[1:]), nn.SGDOptions{}); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("an optimizer from a ParamList: %v, want %v", err, cgotorch.ErrInvalidArgument)
	}
	opt, err := nn.NewSGD(nn.ParamList(nil), nn.SGDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := opt.AddParamGroup(nn.ParamGroup{Params: m.Parameters()}); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("an added group: %v, want %v", err, cgotorch.ErrInvalidArgument)
	}
	if _, err := nn.NewAdam(s, nn.DefaultAdamOptions()); err != nil {
		t.Errorf("an optimizer from the syncer: %v", err)
	}
	for range 10 {
		runtime.GC()
		if _, err = nn.NewAdam(m, nn.DefaultAdamOptions()); err == nil {
			return
		}
	}
	t.Errorf("the claim outlived its syncer: %v", err)
}
