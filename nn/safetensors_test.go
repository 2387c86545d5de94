package nn_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

var update = flag.Bool("update", false, "rewrite testdata/gorec_state.safetensors (then rerun gen_nn.py)")

// interopModel is the architecture of gen_nn.py's interop_model.
func interopModel() *nn.Sequential {
	return nn.NewSequential(nn.NewLinear(4, 3, true), nn.NewBatchNorm1d(3), &nn.ReLU{}, nn.NewLinear(3, 2, true))
}

// goldenModel is interopModel with state computed in Go from a formula (so that its file is
// the same on every machine): running variances positive, num_batches_tracked 7.
func goldenModel(t testing.TB) *nn.Sequential {
	m := interopModel()
	cgotorch.NoGrad(func() {
		for i, p := range nn.StateDict(m) {
			if p.Tensor.DType() == cgotorch.Int64 {
				p.Tensor.Fill(7)
				continue
			}
			v := make([]float32, p.Tensor.Numel())
			for k := range v {
				x := float32(k)*0.37 + float32(i)*0.11
				v[k] = x - float32(int(x)) + 0.25 // in [0.25, 1.25)
				if !strings.HasSuffix(p.Name, "running_var") {
					v[k] -= 0.75
				}
			}
			p.Tensor.CopyFrom(cgotorch.MustFromSlice(v, p.Tensor.Shape()...))
		}
	})
	return m
}

func stateValues(t testing.TB, m nn.Module) map[string][]float64 {
	out := map[string][]float64{}
	for _, p := range nn.StateDict(m) {
		out[p.Name] = values(t, p.Tensor)
	}
	return out
}

func sameState(t *testing.T, a, b nn.Module) {
	t.Helper()
	va, vb := stateValues(t, a), stateValues(t, b)
	for name, x := range va {
		y := vb[name]
		if len(x) != len(y) {
			t.Fatalf("%s: %d vs %d elements", name, len(x), len(y))
		}
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s[%d]: %v vs %v", name, i, x[i], y[i])
			}
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	a := interopModel()
	a.Forward(cgotorch.Randn([]int64{8, 4})) // move the running statistics
	var buf bytes.Buffer
	if err := nn.SaveState(&buf, a); err != nil {
		t.Fatal(err)
	}
	b := interopModel()
	if err := nn.LoadState(bytes.NewReader(buf.Bytes()), b); err != nil {
		t.Fatal(err)
	}
	sameState(t, a, b)
	a.Train(false)
	b.Train(false)
	x := cgotorch.Randn([]int64{5, 4})
	ya, yb := values(t, a.Forward(x)), values(t, b.Forward(x))
	for i := range ya {
		if ya[i] != yb[i] {
			t.Fatalf("outputs differ after load: %v vs %v", ya, yb)
		}
	}
	// The loaded tensors are the module's own, still leaves requiring grad.
	if !b.At(0).(*nn.Linear).Weight.RequiresGrad() {
		t.Error("loading lost requires_grad")
	}
	// And through files.
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := nn.SaveStateFile(path, a); err != nil {
		t.Fatal(err)
	}
	c := interopModel()
	if err := nn.LoadStateFile(path, c); err != nil {
		t.Fatal(err)
	}
	sameState(t, a, c)
	if err := nn.LoadStateFile(filepath.Join(t.TempDir(), "missing"), c); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// A save that fails leaves the file it would have replaced as it was, and no temporary file.
func TestSaveStateFileFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	a := interopModel()
	if err := nn.SaveStateFile(path, a); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	broken := interopModel()
	broken.At(0).(*nn.Linear).Weight.Close()
	if err := nn.SaveStateFile(path, broken); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("saving a closed parameter: %v; want ErrInvalidArgument", err)
	}
	after, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the failed save changed the file (%d -> %d bytes, %v)", len(before), len(after), err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("directory holds %d entries after a failed save; want 1", len(es))
	}
	c := interopModel()
	if err := nn.LoadStateFile(path, c); err != nil {
		t.Fatal(err)
	}
	sameState(t, a, c)
}

func TestWriteSafetensorsDTypesAndMetadata(t *testing.T) {
	in := []nn.NamedParameter{
		{Name: "f32", Tensor: cgotorch.MustFromSlice([]float32{1.5, -2}, 2, 1)},
		{Name: "f64", Tensor: cgotorch.MustFromSlice([]float64{3.25})},
		{Name: "i64", Tensor: cgotorch.Scalar[int64](-9)},
		{Name: "i32", Tensor: cgotorch.MustFromSlice([]int32{4, 5, 6})},
		{Name: "b", Tensor: cgotorch.MustFromSlice([]bool{true, false})},
		{Name: "empty", Tensor: cgotorch.Zeros([]int64{0, 3})},
	}
	var buf bytes.Buffer
	if err := nn.WriteSafetensors(&buf, in, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint64(buf.Bytes()); n%8 != 0 {
		t.Errorf("header length %d not 8-aligned", n)
	}
	out, meta, err := nn.ReadSafetensors(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if meta["k"] != "v" || len(out) != len(in) {
		t.Fatalf("metadata %v, %d tensors", meta, len(out))
	}
	for _, p := range in {
		got := out[p.Name]
		if got.DType() != p.Tensor.DType() || !slices.Equal(got.Shape(), p.Tensor.Shape()) {
			t.Errorf("%s: %v %v, want %v %v", p.Name, got.DType(), got.Shape(), p.Tensor.DType(), p.Tensor.Shape())
			continue
		}
		if eq, _ := got.Eq(p.Tensor).All().Item(); got.Numel() > 0 && eq != 1 {
			t.Errorf("%s: %v, want %v", p.Name, got, p.Tensor)
		}
	}
	for name, bad := range map[string][]nn.NamedParameter{
		"duplicate": {in[0], in[0]},
		"metadata":  {{Name: "__metadata__", Tensor: in[0].Tensor}},
		"empty":     {{Name: "", Tensor: in[0].Tensor}},
		"nil":       {{Name: "x"}},
		"f16":       {{Name: "x", Tensor: cgotorch.Ones([]int64{2}, cgotorch.WithDType(cgotorch.Float16))}},
	} {
		if err := nn.WriteSafetensors(&bytes.Buffer{}, bad, nil); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The state written by PyTorch (gen_nn.py, with struct + json) loads into the same architecture
// and gives torch's outputs.
func TestLoadTorchWrittenState(t *testing.T) {
	c := refCaseNamed(t, "torch_state")
	m := interopModel()
	if err := nn.LoadStateFile("testdata/torch_state.safetensors", m); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.At(1).(*nn.BatchNorm1d).NumBatchesTracked.Item(); v != 3 {
		t.Errorf("num_batches_tracked %v, want 3", v)
	}
	m.Train(false)
	c.checkClose(t, "eval output", m.Forward(c.tensor(t, "x")), "y_eval", layerAbs, layerRel)
}

// gorec's file is fixed (testdata/gorec_state.safetensors, byte for byte); gen_nn.py parses it
// with its own reader, loads it into torch with load_state_dict(strict=True) and records the
// outputs, which must be gorec's.
func TestGoldenStateReadByTorch(t *testing.T) {
	m := goldenModel(t)
	var buf bytes.Buffer
	if err := nn.SaveState(&buf, m); err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/gorec_state.safetensors"
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote", golden, "- now run /usr/bin/python3 nn/testdata/gen_nn.py")
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("SaveState output differs from %s (rerun with -update if the format changed on purpose)", golden)
	}
	c := refCaseNamed(t, "gorec_state")
	c.checkClose(t, "num_batches_tracked", m.At(1).(*nn.BatchNorm1d).NumBatchesTracked, "num_batches_tracked", 0, 0)
	m.Train(false)
	c.checkClose(t, "eval output", m.Forward(c.tensor(t, "x")), "y_eval", layerAbs, layerRel)
}

// stFile assembles a safetensors file from a header and data.
func stFile(header string, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	return append(append(n[:], header...), data...)
}

func validFile(t testing.TB) []byte {
	var buf bytes.Buffer
	if err := nn.SaveState(&buf, interopModel()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadSafetensorsRejectsMalformedInput(t *testing.T) {
	eight := make([]byte, 8)
	cases := map[string][]byte{
		"empty":              nil,
		"short length":       {1, 2, 3},
		"huge header":        {0, 0, 0, 0, 0, 1, 0, 0},
		"header past end":    stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, nil)[:20],
		"bad json":           stFile(`{"a":{"dtype":`, nil),
		"json array":         stFile(`[1, 2]`, nil),
		"entry not object":   stFile(`{"a":3}`, nil),
		"unknown field":      stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, eight[:4]),
		"unknown dtype":      stFile(`{"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}}`, eight[:4]),
		"offsets vs shape":   stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, eight),
		"negative offset":    stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, eight),
		"negative dimension": stFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, eight),
		"huge shape":         stFile(`{"a":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, eight),
		"hole": stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},`+
			`"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)),
		"overlap": stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},`+
			`"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight),
		"bad metadata":   stFile(`{"__metadata__":{"k":1}}`, nil),
		"bool byte":      stFile(`{"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 2}),
		"truncated data": stFile(`{"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}}`, eight),
	}
	for name, data := range cases {
		if _, _, err := nn.ReadSafetensors(bytes.NewReader(data)); !errors.Is(err, nn.ErrFormat) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Every proper prefix of a valid file is an error.
	valid := validFile(t)
	for n := 0; n < len(valid); n++ {
		if _, _, err := nn.ReadSafetensors(bytes.NewReader(valid[:n])); err == nil {
			t.Fatalf("prefix of %d of %d bytes accepted", n, len(valid))
		}
	}
	if _, _, err := nn.ReadSafetensors(bytes.NewReader(valid)); err != nil {
		t.Fatal(err)
	}
}

func TestLoadStateMismatches(t *testing.T) {
	full := interopModel()
	write := func(ps []nn.NamedParameter) []byte {
		var buf bytes.Buffer
		if err := nn.WriteSafetensors(&buf, ps, nil); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	state := nn.StateDict(full)
	missing := write(state[1:])
	extra := write(append(state, nn.NamedParameter{Name: "9.weight", Tensor: cgotorch.Ones([]int64{1})}))
	wrongShape := append([]nn.NamedParameter{{Name: "0.weight", Tensor: cgotorch.Ones([]int64{4, 3})}}, state[1:]...)
	intForFloat := append([]nn.NamedParameter{{Name: "0.weight", Tensor: cgotorch.Ones([]int64{3, 4}, cgotorch.WithDType(cgotorch.Int64))}}, state[1:]...)
	for name, c := range map[string]struct {
		data []byte
		msg  string
	}{
		"missing":       {missing, `missing key "0.weight"`},
		"unexpected":    {extra, `unexpected key "9.weight"`},
		"shape":         {write(wrongShape), `"0.weight" has shape [4 3]`},
		"int for float": {write(intForFloat), `"0.weight" is int64`},
	} {
		m := interopModel()
		before := stateValues(t, m)
		err := nn.LoadState(bytes.NewReader(c.data), m)
		if !errors.Is(err, cgotorch.ErrInvalidArgument) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v", name, err)
		}
		after := stateValues(t, m)
		for k, v := range before {
			for i := range v {
				if after[k][i] != v[i] {
					t.Fatalf("%s: failed load changed %s", name, k)
				}
			}
		}
	}
	// A Float64 file loads into Float32 parameters (converted, as torch's copy_ does).
	var f64 []nn.NamedParameter
	for _, p := range state {
		x := p.Tensor
		if x.DType() == cgotorch.Float32 {
			x, _ = x.To(cgotorch.CPU, cgotorch.Float64)
		}
		f64 = append(f64, nn.NamedParameter{Name: p.Name, Tensor: x})
	}
	m := interopModel()
	if err := nn.LoadState(bytes.NewReader(write(f64)), m); err != nil {
		t.Fatal(err)
	}
	sameState(t, full, m)
}

// A nil or closed destination is an error, not a panic: it wraps cgotorch.ErrClosed (and
// ErrInvalidArgument, as the other mismatches), the module's other tensors keep their values,
// and the tensors read from the file are closed at once.
func TestLoadStateClosedDestination(t *testing.T) {
	var buf bytes.Buffer
	if err := nn.SaveState(&buf, nn.NewLinear(3, 2, true)); err != nil {
		t.Fatal(err)
	}
	dst := nn.NewLinear(3, 2, true)
	before := values(t, dst.Weight)
	dst.Bias.Close()
	base := cgotorch.LiveTensors()
	var err error
	if perr := cgotorch.Try(func() { err = nn.LoadState(bytes.NewReader(buf.Bytes()), dst) }); perr != nil {
		t.Fatalf("LoadState panicked: %v", perr)
	}
	if !errors.Is(err, cgotorch.ErrClosed) || !errors.Is(err, cgotorch.ErrInvalidArgument) || !strings.Contains(err.Error(), `"bias"`) {
		t.Errorf("%v; want an error about \"bias\" wrapping ErrClosed and ErrInvalidArgument", err)
	}
	if n := cgotorch.LiveTensors(); n > base { // (a finalizer may free an older test's tensor meanwhile)
		t.Errorf("%d live tensors after the failed load, %d before", n, base)
	}
	if !slices.Equal(values(t, dst.Weight), before) {
		t.Errorf("the failed load changed the weight")
	}
}

// LoadStateFile refuses a file with bytes after the data section, as the safetensors reference
// implementation does (MetadataIncompleteBuffer: the length must be 8 + header + data), and
// leaves the module unchanged. LoadState from a stream reads up to the end of the data and
// leaves what follows to the caller.
func TestLoadStateFileRefusesTrailingBytes(t *testing.T) {
	src := goldenModel(t)
	path := filepath.Join(t.TempDir(), "s.safetensors")
	if err := nn.SaveStateFile(path, src); err != nil {
		t.Fatal(err)
	}
	valid, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const tail = "garbage after the data"
	if err := os.WriteFile(path, append(slices.Clip(valid), tail...), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := interopModel()
	before := stateValues(t, dst)
	if err := nn.LoadStateFile(path, dst); !errors.Is(err, nn.ErrFormat) {
		t.Errorf("trailing bytes: %v; want an error wrapping ErrFormat", err)
	}
	for k, v := range stateValues(t, dst) {
		if !slices.Equal(v, before[k]) {
			t.Errorf("the failed load changed %s", k)
		}
	}

	r := bytes.NewReader(append(slices.Clip(valid), tail...))
	if err := nn.LoadState(r, dst); err != nil {
		t.Fatalf("LoadState from a stream: %v", err)
	}
	sameState(t, src, dst)
	if rest, _ := io.ReadAll(r); string(rest) != tail {
		t.Errorf("LoadState left %q unread, want %q", rest, tail)
	}

	if err := os.WriteFile(path, valid, 0o644); err != nil {
		t.Fatal(err)
	}
	dst = interopModel()
	if err := nn.LoadStateFile(path, dst); err != nil {
		t.Fatalf("the file without trailing bytes: %v", err)
	}
	sameState(t, src, dst)
}

func FuzzReadSafetensors(f *testing.F) {
	f.Add(validFile(f))
	f.Add(stFile(`{"a":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"__metadata__":{"x":"y"}}`, make([]byte, 8)))
	f.Add(stFile(`{"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 0}))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, _, err := nn.ReadSafetensors(bytes.NewReader(data))
		if err == nil {
			for _, x := range ts {
				x.Close()
			}
		}
	})
}
