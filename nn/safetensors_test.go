package nn_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
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
		{Name: "f16", Tensor: must(cgotorch.MustFromSlice([]float32{1, -2.5, 65504, 6e-8}).To(cgotorch.CPU, cgotorch.Float16))},
		{Name: "bf16", Tensor: must(cgotorch.MustFromSlice([]float32{1, -2.5, 3e38}, 3, 1).To(cgotorch.CPU, cgotorch.BFloat16))},
		{Name: "u8", Tensor: cgotorch.MustFromSlice([]uint8{0, 7, 255})},
		{Name: "i8", Tensor: must(cgotorch.MustFromSlice([]int32{-128, 0, 127}).To(cgotorch.CPU, cgotorch.Int8))},
		{Name: "i16", Tensor: must(cgotorch.MustFromSlice([]int32{-32768, 1, 32767}).To(cgotorch.CPU, cgotorch.Int16))},
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
	} {
		if err := nn.WriteSafetensors(&bytes.Buffer{}, bad, nil); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A JSON string holds UTF-8 only: encoding/json wrote "x\xff" and "x\xfe" both as "x\ufffd", and
// reading the file back gave one tensor of two. Such names and metadata are refused.
func TestWriteSafetensorsRefusesNonUTF8(t *testing.T) {
	a := cgotorch.MustFromSlice([]float32{1})
	b := cgotorch.MustFromSlice([]float32{2})
	for name, c := range map[string]struct {
		ts   []nn.NamedParameter
		meta map[string]string
	}{
		"two names":      {[]nn.NamedParameter{{Name: "x\xff", Tensor: a}, {Name: "x\xfe", Tensor: b}}, nil},
		"one name":       {[]nn.NamedParameter{{Name: "caf\xe9.weight", Tensor: a}}, nil},
		"metadata key":   {[]nn.NamedParameter{{Name: "x", Tensor: a}}, map[string]string{"\xff": "v"}},
		"metadata value": {[]nn.NamedParameter{{Name: "x", Tensor: a}}, map[string]string{"format": "p\xfft"}},
	} {
		var buf bytes.Buffer
		if err := nn.WriteSafetensors(&buf, c.ts, c.meta); !errors.Is(err, cgotorch.ErrInvalidArgument) || buf.Len() != 0 {
			t.Errorf("%s: %v, %d bytes written; want ErrInvalidArgument and nothing written", name, err, buf.Len())
		}
	}
	// UTF-8 names of any script are fine and read back as themselves.
	var buf bytes.Buffer
	if err := nn.WriteSafetensors(&buf, []nn.NamedParameter{{Name: "重み.é", Tensor: a}, {Name: "x\u00ff", Tensor: b}}, nil); err != nil {
		t.Fatal(err)
	}
	got, _, err := nn.ReadSafetensors(&buf)
	if err != nil || len(got) != 2 || got["重み.é"] == nil || got["x\u00ff"] == nil {
		t.Fatalf("read back %v, %v", got, err)
	}
}

// Every dtype of the format that cgotorch has a DType for reads into a tensor of that DType
// with the values the bytes hold, and writes back to the same bytes; the others are a clear
// error. The files are as torch's safetensors writes them (safetensors.torch.save_file of a
// half-precision model gives F16).
func TestReadSafetensorsEveryDType(t *testing.T) {
	for _, c := range []struct {
		dtype string
		want  cgotorch.DType
		data  []byte
		vals  []float64
	}{
		{"F16", cgotorch.Float16, []byte{0x00, 0x3c, 0x00, 0xc1, 0xff, 0x7b, 0x01, 0x00, 0x00, 0x7c, 0x00, 0x80},
			[]float64{1, -2.5, 65504, 0x1p-24, math.Inf(1), 0}},
		{"BF16", cgotorch.BFloat16, []byte{0x80, 0x3f, 0x20, 0xc0, 0x7f, 0x7f, 0x80, 0xff},
			[]float64{1, -2.5, 0x1.fep127, math.Inf(-1)}},
		{"I16", cgotorch.Int16, []byte{0x00, 0x80, 0xff, 0xff, 0xff, 0x7f}, []float64{-32768, -1, 32767}},
		{"I8", cgotorch.Int8, []byte{0x80, 0xff, 0x7f, 0x00}, []float64{-128, -1, 127, 0}},
		{"U8", cgotorch.Uint8, []byte{0, 1, 128, 255}, []float64{0, 1, 128, 255}},
	} {
		n := len(c.vals)
		hdr := fmt.Sprintf(`{"x":{"dtype":%q,"shape":[%d],"data_offsets":[0,%d]}}`, c.dtype, n, len(c.data))
		got, _, err := nn.ReadSafetensors(bytes.NewReader(stFile(hdr, c.data)))
		if err != nil {
			t.Errorf("%s: %v", c.dtype, err)
			continue
		}
		x := got["x"]
		if x.DType() != c.want || !slices.Equal(x.Shape(), []int64{int64(n)}) {
			t.Errorf("%s: read %v %v, want %v [%d]", c.dtype, x.DType(), x.Shape(), c.want, n)
			continue
		}
		if v := values(t, x); !slices.Equal(v, c.vals) {
			t.Errorf("%s: values %v, want %v", c.dtype, v, c.vals)
		}
		var buf bytes.Buffer
		if err := nn.WriteSafetensors(&buf, []nn.NamedParameter{{Name: "x", Tensor: x}}, nil); err != nil {
			t.Errorf("%s: writing back: %v", c.dtype, err)
		} else if b := buf.Bytes(); !bytes.Equal(b[len(b)-len(c.data):], c.data) || !bytes.Contains(b, []byte(`"dtype":"`+c.dtype+`"`)) {
			t.Errorf("%s: written back as %q", c.dtype, b)
		}
	}
	for d, size := range map[string]int{"U16": 2, "U32": 4, "U64": 8, "F8_E5M2": 1, "F8_E4M3": 1} {
		hdr := fmt.Sprintf(`{"x":{"dtype":%q,"shape":[],"data_offsets":[0,%d]}}`, d, size)
		_, _, err := nn.ReadSafetensors(bytes.NewReader(stFile(hdr, make([]byte, size))))
		if !errors.Is(err, nn.ErrFormat) || !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "unsupported dtype "+d) {
			t.Errorf("%s: %v; want an unsupported dtype error wrapping ErrFormat and errors.ErrUnsupported", d, err)
		}
	}
}

// Every half-precision bit pattern reads as its value and writes back to itself (a NaN stays
// a NaN: torch's conversions may change its payload).
func TestF16RoundTripsEveryValue(t *testing.T) {
	data := make([]byte, 2<<16)
	for i := range 1 << 16 {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(i))
	}
	hdr := fmt.Sprintf(`{"h":{"dtype":"F16","shape":[%d],"data_offsets":[0,%d]}}`, 1<<16, len(data))
	got, _, err := nn.ReadSafetensors(bytes.NewReader(stFile(hdr, data)))
	if err != nil {
		t.Fatal(err)
	}
	vals := values(t, got["h"])
	var buf bytes.Buffer
	if err := nn.WriteSafetensors(&buf, []nn.NamedParameter{{Name: "h", Tensor: got["h"]}}, nil); err != nil {
		t.Fatal(err)
	}
	back := buf.Bytes()[buf.Len()-len(data):]
	for i := range 1 << 16 {
		h, b := uint16(i), binary.LittleEndian.Uint16(back[2*i:])
		exp, mant := h>>10&0x1f, float64(h&0x3ff)
		want := math.Ldexp(1+mant/1024, int(exp)-15)
		switch exp {
		case 0:
			want = math.Ldexp(mant, -24)
		case 0x1f:
			want = math.Inf(1)
			if mant != 0 {
				want = math.NaN()
			}
		}
		if h&0x8000 != 0 {
			want = -want
		}
		nan := math.IsNaN(want)
		if v := vals[i]; v != want && !(nan && math.IsNaN(v)) || math.Signbit(v) != math.Signbit(want) && !nan {
			t.Fatalf("%#04x read as %v, want %v", h, v, want)
		}
		if b != h && !(nan && b&0x7c00 == 0x7c00 && b&0x3ff != 0) {
			t.Fatalf("%#04x written back as %#04x", h, b)
		}
	}
}

// A valid F16 state of a Linear (1.0, 2.0, 3.0 in IEEE half) loads into a Float32 Linear,
// converted; so does a BF16 one. It was refused as malformed (ErrFormat).
func TestLoadHalfPrecisionState(t *testing.T) {
	for dtype, data := range map[string][]byte{
		"F16":  {0x00, 0x3c, 0x00, 0x40, 0x00, 0x42},
		"BF16": {0x80, 0x3f, 0x00, 0x40, 0x40, 0x40},
	} {
		m := nn.NewLinear(2, 1, true)
		// bias [1] (2 bytes), weight [1,2] (4 bytes), header padded to 8, as torch writes it.
		hdr := `{"__metadata__":{"format":"pt"},"bias":{"dtype":"` + dtype + `","shape":[1],"data_offsets":[0,2]},` +
			`"weight":{"dtype":"` + dtype + `","shape":[1,2],"data_offsets":[2,6]}}`
		hdr += strings.Repeat(" ", (8-len(hdr)%8)%8)
		if err := nn.LoadState(bytes.NewReader(stFile(hdr, data)), m); err != nil {
			t.Errorf("%s: valid state refused (ErrFormat: %v): %v", dtype, errors.Is(err, nn.ErrFormat), err)
			continue
		}
		if m.Weight.DType() != cgotorch.Float32 || m.Bias.DType() != cgotorch.Float32 {
			t.Errorf("%s: parameters became %v, %v", dtype, m.Weight.DType(), m.Bias.DType())
		}
		if w, b := values(t, m.Weight), values(t, m.Bias); !slices.Equal(w, []float64{2, 3}) || !slices.Equal(b, []float64{1}) {
			t.Errorf("%s: weight %v, bias %v; want [2 3], [1]", dtype, w, b)
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
		"empty":               nil,
		"short length":        {1, 2, 3},
		"huge header":         {0, 0, 0, 0, 0, 1, 0, 0},
		"header past end":     stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, nil)[:20],
		"bad json":            stFile(`{"a":{"dtype":`, nil),
		"json array":          stFile(`[1, 2]`, nil),
		"entry not object":    stFile(`{"a":3}`, nil),
		"field in upper case": stFile(`{"a":{"DTYPE":"F32","shape":[1],"data_offsets":[0,4]}}`, eight[:4]),
		"three offsets":       stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, eight[:4]),
		"missing shape":       stFile(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, eight[:4]),
		"duplicate field":     stFile(`{"a":{"dtype":"I32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, eight[:4]),
		"duplicate name":      stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, eight[:4]),
		"non-UTF-8 name":      stFile("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", eight[:4]),
		"null header":         stFile(`null`, nil),
		"unknown dtype":       stFile(`{"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}}`, eight[:4]),
		"offsets vs shape":    stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, eight),
		"negative offset":     stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, eight),
		"negative dimension":  stFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, eight),
		"huge shape":          stFile(`{"a":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, eight),
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

// An 8-byte file whose header length claims 99,999,999 bytes: LoadStateFile allocated the
// claimed 100 MB before finding the file empty. The length is checked against the file's size
// before anything is read.
func TestLoadStateFileDoesNotTrustTheHeaderLength(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lie.safetensors")
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], 99_999_999)
	for _, content := range [][]byte{n[:], append(n[:], `{"a":{}}`...)} {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := nn.LoadStateFile(path, nn.NewLinear(1, 1, true))
		runtime.ReadMemStats(&after)
		if !errors.Is(err, nn.ErrFormat) || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "bytes follow the length") {
			t.Errorf("%d-byte file: %v; want ErrFormat and io.ErrUnexpectedEOF, the length refused against the file's size", len(content), err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
			t.Errorf("%d-byte file: allocated %d bytes before failing: %v", len(content), got, err)
		}
	}
	// From a stream, whose size is unknown, the header is read as it arrives: little memory too.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := nn.ReadSafetensors(bytes.NewReader(n[:]))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, nn.ErrFormat) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("stream: %v; want ErrFormat and io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("stream: an 8-byte input allocated %d bytes before failing: %v", got, err)
	}
}

func FuzzReadSafetensors(f *testing.F) {
	f.Add(validFile(f))
	f.Add(stFile(`{"a":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"__metadata__":{"x":"y"}}`, make([]byte, 8)))
	f.Add(stFile(`{"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 0}))
	f.Add(stFile(`{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4],"x":[1]},"b":{"dtype":"I8","shape":[1],"data_offsets":[4,5]}}`, []byte{0, 0x7e, 1, 0x80, 0xff}))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, _, err := nn.ReadSafetensors(bytes.NewReader(data))
		if err == nil {
			for _, x := range ts {
				x.Close()
			}
		}
	})
}
