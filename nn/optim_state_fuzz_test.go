package nn_test

import (
	"bytes"
	"testing"
)

// Optimizer.LoadState on any bytes: never a panic, and a refused state leaves the optimizer's
// state (tensors, steps, groups) as it was. The seeds are torch's states of gen_nn.py.
func FuzzOptimizerLoadState(f *testing.F) {
	for _, name := range []string{"adam_wd_amsgrad", "adam", "sgd_groups"} {
		f.Add(torchOptimizerState(f, name))
	}
	c := refCaseNamed(f, "opt_adam_wd_amsgrad")
	model := newMLP()
	opt := optimizerFor(f, c, model)
	f.Fuzz(func(t *testing.T, data []byte) {
		var before bytes.Buffer
		if err := opt.SaveState(&before); err != nil {
			t.Fatal(err)
		}
		if err := opt.LoadState(bytes.NewReader(data)); err == nil {
			return
		}
		var after bytes.Buffer
		if err := opt.SaveState(&after); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before.Bytes(), after.Bytes()) {
			t.Fatalf("a refused state changed the optimizer")
		}
	})
}
