package nn_test

// Reference values from PyTorch 1.13: testdata/gen_nn.py (run with Debian's /usr/bin/python3)
// writes testdata/nn.json. Each case has a name, a config and named tensors; the tests rebuild
// the same computation in gorec and compare.

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

type jsonTensor struct {
	DType string    `json:"dtype"`
	Shape []int64   `json:"shape"`
	Data  []float64 `json:"data"`
}

type refCase struct {
	Name    string                `json:"name"`
	Config  map[string]any        `json:"config"`
	Tensors map[string]jsonTensor `json:"tensors"`
}

var (
	refOnce  sync.Once
	refCases map[string]*refCase
	refErr   error
)

func loadRef(t testing.TB) map[string]*refCase {
	t.Helper()
	refOnce.Do(func() {
		raw, err := os.ReadFile("testdata/nn.json")
		if err != nil {
			refErr = err
			return
		}
		var file struct {
			Cases []*refCase `json:"cases"`
		}
		if refErr = json.Unmarshal(raw, &file); refErr != nil {
			return
		}
		refCases = map[string]*refCase{}
		for _, c := range file.Cases {
			refCases[c.Name] = c
		}
	})
	if refErr != nil {
		t.Fatalf("loading testdata/nn.json (regenerate with /usr/bin/python3 nn/testdata/gen_nn.py): %v", refErr)
	}
	return refCases
}

func refCaseNamed(t testing.TB, name string) *refCase {
	t.Helper()
	c, ok := loadRef(t)[name]
	if !ok {
		t.Fatalf("case %q missing from testdata/nn.json", name)
	}
	return c
}

// tensor builds the named tensor of the case.
func (c *refCase) tensor(t testing.TB, name string) *cgotorch.Tensor {
	t.Helper()
	j, ok := c.Tensors[name]
	if !ok {
		t.Fatalf("case %s: no tensor %q", c.Name, name)
	}
	return fromJSON(t, j)
}

func fromJSON(t testing.TB, j jsonTensor) *cgotorch.Tensor {
	t.Helper()
	switch j.DType {
	case "float32":
		v := make([]float32, len(j.Data))
		for i, x := range j.Data {
			v[i] = float32(x)
		}
		return cgotorch.MustFromSlice(v, j.Shape...)
	case "int64":
		v := make([]int64, len(j.Data))
		for i, x := range j.Data {
			v[i] = int64(x)
		}
		return cgotorch.MustFromSlice(v, j.Shape...)
	}
	t.Fatalf("dtype %q", j.DType)
	return nil
}

// values returns t's elements as float64.
func values(t testing.TB, x *cgotorch.Tensor) []float64 {
	t.Helper()
	f, err := x.To(cgotorch.CPU, cgotorch.Float64)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cgotorch.ToSlice[float64](f)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkClose compares got with the case's tensor want: same shape, and every element within
// abs + rel*|want|.
func (c *refCase) checkClose(t testing.TB, what string, got *cgotorch.Tensor, want string, abs, rel float64) {
	t.Helper()
	j, ok := c.Tensors[want]
	if !ok {
		t.Fatalf("case %s: no tensor %q", c.Name, want)
	}
	if got == nil {
		t.Errorf("%s %s: got nil", c.Name, what)
		return
	}
	if s := got.Shape(); !slices.Equal(s, j.Shape) {
		t.Errorf("%s %s: shape %v, want %v", c.Name, what, s, j.Shape)
		return
	}
	v := values(t, got)
	for i := range v {
		if d := math.Abs(v[i] - j.Data[i]); !(d <= abs+rel*math.Abs(j.Data[i])) {
			t.Errorf("%s %s[%d]: %.8g, want %.8g (diff %.3g)", c.Name, what, i, v[i], j.Data[i], d)
			return
		}
	}
}

// setState copies the case's tensors prefix+name into m's state (parameters and buffers).
func (c *refCase) setState(t testing.TB, m nn.Module, prefix string) {
	t.Helper()
	cgotorch.NoGrad(func() {
		for _, p := range nn.StateDict(m) {
			p.Tensor.CopyFrom(c.tensor(t, prefix+p.Name))
		}
	})
}

func cfgFloat(c *refCase, key string, def float64) float64 {
	if v, ok := c.Config[key].(float64); ok {
		return v
	}
	return def
}

func cfgBool(c *refCase, key string) bool {
	v, _ := c.Config[key].(bool)
	return v
}
