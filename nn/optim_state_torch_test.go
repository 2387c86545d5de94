package nn_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

// saveAt is gen_nn.py's SAVE_AT: the step after which torch's optimizer state was written.
const saveAt = 2

func torchOptimizerState(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "optim_state", name+".safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// torch.optim's state after step 3, converted by gen_nn.py from the optimizer's state_dict, loads
// into gorec's optimizer, which then takes steps 4 to 6 as torch took them (the tolerance of
// TestOptimizersMatchPyTorch): the format names what torch names, and a model trained in PyTorch
// resumes here.
func TestOptimizerStateFromPyTorch(t *testing.T) {
	mlp := refCaseNamed(t, "mlp")
	for _, name := range optimizerCases {
		t.Run(name, func(t *testing.T) {
			c, model, opt := optimizerCase(t, mlp, name, nil, "step"+strconv.Itoa(saveAt)+".")
			if err := opt.LoadState(bytes.NewReader(torchOptimizerState(t, name))); err != nil {
				t.Fatal(err)
			}
			trainLikeTorch(t, mlp, c, model, opt, saveAt+1, int(cfgFloat(mlp, "steps", 0)))
		})
	}
}

// What gorec saves after the same three steps is what torch's state holds: the same tensors
// under the same names (within the optimizer tolerance), and the same metadata.
func TestOptimizerStateAsPyTorchNamesIt(t *testing.T) {
	mlp := refCaseNamed(t, "mlp")
	for _, name := range optimizerCases {
		t.Run(name, func(t *testing.T) {
			c, model, opt := optimizerCase(t, mlp, name, mlp, "init.")
			trainLikeTorch(t, mlp, c, model, opt, 0, saveAt+1)
			var buf bytes.Buffer
			if err := opt.SaveState(&buf); err != nil {
				t.Fatal(err)
			}
			ours, ourMeta, err := nn.ReadSafetensors(&buf)
			if err != nil {
				t.Fatal(err)
			}
			theirs, theirMeta, err := nn.ReadSafetensors(bytes.NewReader(torchOptimizerState(t, name)))
			if err != nil {
				t.Fatal(err)
			}
			if !sameKeys(ours, theirs) {
				t.Fatalf("tensors %v, torch's %v", keys(ours), keys(theirs))
			}
			for k, v := range ours {
				closeTensors(t, k, v, theirs[k])
			}
			for _, k := range []string{"format", "version", "optimizer", "options", "param_groups"} {
				if a, b := canonical(t, ourMeta[k]), canonical(t, theirMeta[k]); a != b {
					t.Errorf("metadata %s: %s, torch's %s", k, a, b)
				}
			}
		})
	}
}

// canonical is a metadata value as Go writes JSON (gen_nn.py's json.dumps spaces it and writes
// 0.0 for 0), or the string itself when it is no JSON.
func canonical(t *testing.T, s string) string {
	t.Helper()
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func keys(m map[string]*cgotorch.Tensor) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sameKeys(a, b map[string]*cgotorch.Tensor) bool { return slices.Equal(keys(a), keys(b)) }

// closeTensors checks got against want within the optimizer tolerance.
func closeTensors(t *testing.T, name string, got, want *cgotorch.Tensor) {
	t.Helper()
	if !slices.Equal(got.Shape(), want.Shape()) {
		t.Fatalf("%s: shape %v, torch's %v", name, got.Shape(), want.Shape())
	}
	g, w := values(t, got), values(t, want)
	for i := range g {
		if d := math.Abs(g[i] - w[i]); !(d <= optAbs+optRel*math.Abs(w[i])) {
			t.Errorf("%s[%d]: %v, torch's %v", name, i, g[i], w[i])
			return
		}
	}
}
