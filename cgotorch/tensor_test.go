package cgotorch

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

func TestFromSliceRoundTrip(t *testing.T) {
	f32 := MustFromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if got := f32.Shape(); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("shape %v", got)
	}
	if f32.DType() != Float32 || f32.Dim() != 2 || f32.Numel() != 6 || f32.Device() != CPU {
		t.Fatalf("dtype %v dim %d numel %d device %v", f32.DType(), f32.Dim(), f32.Numel(), f32.Device())
	}
	checkRoundTrip(t, []float32{1.5, -2, 3e30})
	checkRoundTrip(t, []float64{1.5, -2, 3e300})
	checkRoundTrip(t, []int64{0, -1, 1 << 62})
	checkRoundTrip(t, []int32{0, -1, 1 << 30})
	checkRoundTrip(t, []bool{true, false, true})
	checkRoundTrip(t, []uint8{0, 255, 7})
}

// Types defined on an element type are that element type (a type switch had taken them for
// bool, and copied garbage).
type (
	score   float32
	counter int64
	pixel   byte
)

func TestDefinedElementTypes(t *testing.T) {
	for _, c := range []struct {
		got, want DType
	}{{dtypeOf[score](), Float32}, {dtypeOf[counter](), Int64}, {dtypeOf[pixel](), Uint8},
		{dtypeOf[byte](), Uint8}, {dtypeOf[float64](), Float64}, {dtypeOf[int32](), Int32}, {dtypeOf[bool](), Bool}} {
		if c.got != c.want {
			t.Errorf("dtype %v, want %v", c.got, c.want)
		}
	}
	checkRoundTrip(t, []score{1.5, -2})
	checkRoundTrip(t, []counter{1 << 40, -3})
	checkRoundTrip(t, []pixel{200, 1})
}

func checkRoundTrip[T Element](t *testing.T, in []T) {
	t.Helper()
	x, err := FromSlice(in)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.DType() != dtypeOf[T]() {
		t.Fatalf("dtype %v, want %v", x.DType(), dtypeOf[T]())
	}
	out, err := ToSlice[T](x)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("len %d", len(out))
	}
	for i := range in {
		if out[i] != in[i] {
			t.Fatalf("element %d: %v != %v", i, out[i], in[i])
		}
	}
}

func TestEmptyAndNilSlices(t *testing.T) {
	for _, data := range [][]float32{nil, {}} {
		x, err := FromSlice(data)
		if err != nil {
			t.Fatal(err)
		}
		if x.Numel() != 0 || len(x.Shape()) != 1 {
			t.Fatalf("numel %d shape %v", x.Numel(), x.Shape())
		}
		out, err := ToSlice[float32](x)
		if err != nil || len(out) != 0 {
			t.Fatalf("out %v err %v", out, err)
		}
	}
	x, err := FromSlice([]float32(nil), 0, 4)
	if err != nil || x.Numel() != 0 {
		t.Fatalf("[0 4]: %v %v", x, err)
	}
	if _, err := FromSlice([]float32(nil), 2); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil with shape [2]: %v", err)
	}
}

func TestFromSliceErrors(t *testing.T) {
	if _, err := FromSlice([]float32{1, 2, 3}, 2, 2); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short data: %v", err)
	}
	if _, err := FromSlice([]float32{1, 2}, -1, -2); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative shape: %v", err)
	}
	x := MustFromSlice([]float32{1, 2})
	if _, err := ToSlice[int64](x); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "dtype") {
		t.Fatalf("dtype mismatch: %v", err)
	}
	if _, err := x.Item(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("item of 2 elements: %v", err)
	}
}

func TestFactories(t *testing.T) {
	checks := []struct {
		name string
		t    *Tensor
		want float64
	}{
		{"zeros", Zeros([]int64{2, 2}), 0},
		{"ones", Ones([]int64{3}, WithDType(Float64)), 1},
		{"full", Full([]int64{2}, 7.5), 7.5},
	}
	for _, c := range checks {
		v, err := ToSlice[float64](mustTo(t, c.t, Float64))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range v {
			if x != c.want {
				t.Fatalf("%s: %v", c.name, v)
			}
		}
	}
	a := Arange(0, 5, 1, WithDType(Int64))
	if v, _ := ToSlice[int64](a); len(v) != 5 || v[4] != 4 {
		t.Fatalf("arange %v", v)
	}
	if Ones([]int64{2}, WithDType(Int32)).DType() != Int32 {
		t.Fatal("dtype option ignored")
	}
	if !Zeros([]int64{1}, RequiresGrad()).RequiresGrad() {
		t.Fatal("requires grad option ignored")
	}
	if s := Scalar(2.5); s.Dim() != 0 {
		t.Fatalf("scalar dim %d", s.Dim())
	}
}

func mustTo(t *testing.T, x *Tensor, d DType) *Tensor {
	t.Helper()
	y, err := x.To(CPU, d)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

func TestSeedReproducible(t *testing.T) {
	ManualSeed(42)
	a, _ := ToSlice[float32](Randn([]int64{8}))
	u, _ := ToSlice[float32](Rand([]int64{8}))
	ManualSeed(42)
	b, _ := ToSlice[float32](Randn([]int64{8}))
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("randn not reproducible: %v vs %v", a, b)
		}
		if u[i] < 0 || u[i] >= 1 {
			t.Fatalf("rand out of [0,1): %v", u)
		}
	}
}

func TestFactoryPanicsAreRecoverable(t *testing.T) {
	err := Try(func() { Zeros([]int64{-3}) })
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(e.Msg, "negative") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "Exception raised from") {
		t.Fatalf("message carries a C++ backtrace: %v", err)
	}
	defer func() {
		if r := recover(); r != "not ours" {
			t.Fatalf("Try swallowed a foreign panic: %v", r)
		}
	}()
	_ = Try(func() { panic("not ours") })
}

func TestUseAfterClose(t *testing.T) {
	x := Ones([]int64{2})
	x.Close()
	x.Close() // idempotent
	if !x.Closed() {
		t.Fatal("not closed")
	}
	if err := Try(func() { x.Shape() }); !errors.Is(err, ErrClosed) {
		t.Fatalf("shape after close: %v", err)
	}
	if _, err := ToSlice[float32](x); !errors.Is(err, ErrClosed) {
		t.Fatalf("to slice after close: %v", err)
	}
	if _, err := x.To(CPU, KeepDType); !errors.Is(err, ErrClosed) {
		t.Fatalf("to after close: %v", err)
	}
	var nilT *Tensor
	nilT.Close()
	if err := Try(func() { nilT.Numel() }); !errors.Is(err, ErrClosed) {
		t.Fatalf("nil tensor: %v", err)
	}
	if x.String() != "<closed>" {
		t.Fatalf("string %q", x.String())
	}
}

func TestConcurrentClose(t *testing.T) {
	before := LiveTensors()
	for round := 0; round < 50; round++ {
		x := Ones([]int64{16})
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() { defer wg.Done(); x.Close() }()
		}
		wg.Wait()
	}
	if got := LiveTensors(); got != before {
		t.Fatalf("live tensors %d, want %d", got, before)
	}
}

func TestDevices(t *testing.T) {
	for s, want := range map[string]Device{"cpu": CPU, "cuda": {DeviceCUDA, -1}, "CUDA:1": CUDA(1)} {
		d, err := ParseDevice(s)
		if err != nil || d != want {
			t.Fatalf("%q: %v %v", s, d, err)
		}
	}
	for _, s := range []string{"tpu", "cuda:x", "cuda:-1"} {
		if _, err := ParseDevice(s); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%q: %v", s, err)
		}
	}
	x := Ones([]int64{2})
	if !CUDAAvailable() {
		if _, err := x.To(CUDA(0), KeepDType); !errors.Is(err, ErrDevice) {
			t.Fatalf("to cuda without a GPU: %v", err)
		}
		if err := Try(func() { Zeros([]int64{2}, WithDevice(CUDA(0))) }); err == nil {
			t.Fatal("zeros on cuda without a GPU did not fail")
		}
	}
	if _, err := x.To(Device{Type: 42}, KeepDType); !errors.Is(err, ErrDevice) {
		t.Fatalf("unknown device: %v", err)
	}
}

func TestCUDARoundTrip(t *testing.T) {
	if !CUDAAvailable() {
		t.Skip("no CUDA device")
	}
	x := MustFromSlice([]float32{1, 2, 3})
	g, err := x.To(CUDA(0), KeepDType)
	if err != nil {
		t.Fatal(err)
	}
	if g.Device().Type != DeviceCUDA {
		t.Fatalf("device %v", g.Device())
	}
	out, err := ToSlice[float32](g)
	if err != nil || out[2] != 3 {
		t.Fatalf("%v %v", out, err)
	}
}

func TestThreads(t *testing.T) {
	prev := NumThreads()
	defer func() { _ = SetNumThreads(prev) }()
	if err := SetNumThreads(2); err != nil || NumThreads() != 2 {
		t.Fatalf("set 2: %v, now %d", err, NumThreads())
	}
	if err := SetNumThreads(0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("set 0: %v", err)
	}
}

// TestThreadsAcrossOSThreads: the count is process-wide although OpenMP keeps it per OS thread.
// A goroutine locked to its own OS thread reads the count, the test sets another one from its own
// thread, and the locked goroutine must then see (and compute with) the new count. Without the
// per-call sync in the C guard, the locked thread kept the count it first saw.
func TestThreadsAcrossOSThreads(t *testing.T) {
	prev := NumThreads()
	defer func() { _ = SetNumThreads(prev) }()
	if err := SetNumThreads(3); err != nil {
		t.Fatal(err)
	}
	read, seen := make(chan struct{}), make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range read {
			x := Ones([]int64{1 << 16})
			_ = x.Sum() // parallel work on this thread
			seen <- NumThreads()
		}
	}()
	defer close(read)
	for _, want := range []int{3, 2, 4} {
		if err := SetNumThreads(want); err != nil {
			t.Fatal(err)
		}
		read <- struct{}{}
		if got := <-seen; got != want {
			t.Fatalf("set %d, another OS thread sees %d", want, got)
		}
	}
}

func TestStringAndVersion(t *testing.T) {
	s := MustFromSlice([]float32{1, 2}).String()
	if !strings.Contains(s, "CPUFloatType") {
		t.Fatalf("string %q", s)
	}
	if v := TorchVersion(); !strings.Contains(v, ".") {
		t.Fatalf("version %q", v)
	}
}

func TestMain(m *testing.M) {
	fmt.Printf("libtorch %s\n", TorchVersion())
	os.Exit(m.Run())
}

// TestShapeOfManyDims: libtorch has no limit of 64 dimensions (71 here, from Unsqueeze). Shape
// once read the sizes into a fixed 64-element buffer, which the C side overran.
func TestShapeOfManyDims(t *testing.T) {
	x := Ones([]int64{3})
	for i := 0; i < 70; i++ {
		y := x.Unsqueeze(0)
		x.Close()
		x = y
	}
	defer x.Close()
	s := x.Shape()
	if len(s) != 71 || x.Dim() != 71 {
		t.Fatalf("len(Shape()) = %d, Dim() = %d, want 71", len(s), x.Dim())
	}
	for i, v := range s {
		if want := map[bool]int64{true: 3, false: 1}[i == 70]; v != want {
			t.Fatalf("Shape()[%d] = %d, want %d (shape %v)", i, v, want, s)
		}
	}
	if x.Size(-1) != 3 || x.Size(64) != 1 {
		t.Fatalf("Size(-1) = %d, Size(64) = %d", x.Size(-1), x.Size(64))
	}
}

// TestToSliceTooLarge: ToSlice returns ErrInvalidArgument for a tensor whose elements cannot
// be copied into Go memory: a byte count that overflows int, or more bytes than the machine
// has. Expanded views of that many elements cost libtorch nothing; ToSlice once panicked in make
// (2^47 elements) or died of a fatal out-of-memory error (2^36 float32, 256 GiB). Nothing is
// allocated here.
func TestToSliceTooLarge(t *testing.T) {
	one := Ones([]int64{1})
	for _, n := range []int64{1 << 62, 1 << 47, 1 << 36} {
		bytes := uint64(n) * 4 // wraps to 0 for 2^62: the int overflow case
		if n < 1<<62 && (physicalMemory() == 0 || bytes <= physicalMemory()) {
			t.Logf("%d elements: the machine has %d bytes, not checked", n, physicalMemory())
			continue
		}
		x := one.Expand(n)
		var err error
		if perr := Try(func() { _, err = ToSlice[float32](x) }); perr != nil {
			t.Fatalf("%d elements: panic %v", n, perr)
		}
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%d elements: err = %v, want ErrInvalidArgument", n, err)
		}
		x.Close()
	}
}

// TestToSharesStorageWhenNothingChanges pins To's documented aliasing: as libtorch's (and
// PyTorch's) Tensor.to, it returns a handle to the same storage when t already has the device
// and dtype asked for (nn.To relies on it: moving a model where it is costs nothing), and a copy
// otherwise (another dtype, or the device "cpu:0", which is not a CPU tensor's device CPU).
func TestToSharesStorageWhenNothingChanges(t *testing.T) {
	x := MustFromSlice([]float32{1, 2})
	for _, dt := range []DType{KeepDType, Float32} {
		y, err := x.To(CPU, dt)
		if err != nil {
			t.Fatal(err)
		}
		y.Fill(7)
		if got, _ := ToSlice[float32](x); got[0] != 7 {
			t.Errorf("To(CPU, %v) of a CPU float32 tensor copied it: x = %v", dt, got)
		}
		y.Close()
		x.Fill(1)
	}
	for _, c := range []struct {
		d  Device
		dt DType
	}{{CPU, Float64}, {Device{Type: DeviceCPU, Index: 0}, KeepDType}} { // cpu:0 copies, as in PyTorch
		y, err := x.To(c.d, c.dt)
		if err != nil {
			t.Fatal(err)
		}
		y.Fill(7)
		if got, _ := ToSlice[float32](x); got[0] != 1 {
			t.Errorf("writing the result of To(%v, %v) changed the source: x = %v", c.d, c.dt, got)
		}
	}
	x.Clone().Fill(5)
	if got, _ := ToSlice[float32](x); got[0] != 1 {
		t.Errorf("writing a clone changed the source: x = %v", got)
	}
}

// TestFromSliceShapeOverflow: a shape whose element count overflows int64 is ErrInvalidArgument.
// 3 * 6148914691236517206 wraps to 2, the length of the data, which once slipped through to
// libtorch (ErrTorch). A zero dimension makes any shape empty, as in libtorch.
func TestFromSliceShapeOverflow(t *testing.T) {
	for _, shape := range [][]int64{{3, 6148914691236517206}, {1 << 32, 1 << 32}, {math.MaxInt64, 2, 1}} {
		if _, err := FromSlice([]float32{1, 2}, shape...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("shape %v: %v, want ErrInvalidArgument", shape, err)
		}
	}
	x, err := FromSlice([]float32{}, math.MaxInt64, 2, 0)
	if err != nil {
		t.Fatalf("empty shape with a huge dimension: %v", err)
	}
	if x.Numel() != 0 {
		t.Fatalf("numel %d", x.Numel())
	}
}

// TestCPUDeviceIndex: a CPU device has index -1 (or 0, as in PyTorch). ParseDevice("cpu:1")
// once succeeded, and To then failed with libtorch's internal assert (ErrTorch); a Device
// literal with such an index gives ErrDevice.
func TestCPUDeviceIndex(t *testing.T) {
	if d, err := ParseDevice("cpu:0"); err != nil || d != (Device{Type: DeviceCPU, Index: 0}) {
		t.Fatalf("cpu:0: %v %v", d, err)
	}
	for _, s := range []string{"cpu:1", "cpu:7"} {
		if d, err := ParseDevice(s); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: %v %v, want ErrInvalidArgument", s, d, err)
		}
	}
	x := Ones([]int64{1})
	if y, err := x.To(Device{Type: DeviceCPU, Index: 0}, KeepDType); err != nil || y.Device().Type != DeviceCPU {
		t.Fatalf("to cpu:0: %v", err)
	}
	for _, d := range []Device{{Type: DeviceCPU, Index: 3}, {Type: DeviceCPU, Index: -2}, {Type: DeviceCUDA, Index: -2}, {Type: DeviceCUDA, Index: 1 << 32}} {
		if _, err := x.To(d, KeepDType); !errors.Is(err, ErrDevice) {
			t.Errorf("To(%#v): %v, want ErrDevice", d, err)
		}
		err := Try(func() { Zeros([]int64{1}, WithDevice(d)) })
		var e *Error
		if !errors.As(err, &e) || strings.Contains(e.Msg, "INTERNAL ASSERT") {
			t.Errorf("Zeros on %#v: %v, want a *Error from the argument check", d, err)
		}
	}
}

// TestSetNumThreadsOutOfRange: counts that do not fit libtorch's int32 are refused, not
// truncated (1<<32 + 1 once set 1).
func TestSetNumThreadsOutOfRange(t *testing.T) {
	prev := NumThreads()
	defer func() { _ = SetNumThreads(prev) }()
	for _, n := range []int{1<<32 + 1, math.MaxInt32 + 1, math.MinInt64} {
		if err := SetNumThreads(n); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SetNumThreads(%d): %v, want ErrInvalidArgument", n, err)
		}
		if got := NumThreads(); got != prev {
			t.Errorf("SetNumThreads(%d) changed the count to %d", n, got)
		}
	}
}

// FromBytes and ToBytes move elements of dtypes with no Go type as the host's bytes: half
// values (1, -2, 0.5, +Inf) in, the same values out as float32, and the same bytes back.
func TestBytesOfHalfTensors(t *testing.T) {
	in := []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0x00, 0x7c} // little-endian halves
	x, err := FromBytes(in, Float16, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.DType() != Float16 || fmt.Sprint(x.Shape()) != "[2 2]" {
		t.Fatalf("dtype %v shape %v", x.DType(), x.Shape())
	}
	y, err := x.To(CPU, Float32)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := ToSlice[float32](y); fmt.Sprint(v) != "[1 -2 0.5 +Inf]" {
		t.Fatalf("values %v", v)
	}
	out, err := ToBytes(x, Float16)
	if err != nil || string(out) != string(in) {
		t.Fatalf("bytes back %v (%v), want %v", out, err, in)
	}
	if _, err := ToBytes(y, Float16); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("float32 tensor as Float16 bytes: %v", err)
	}
	if _, err := FromBytes(in[:7], Float16, 2, 2); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("7 bytes for 4 halves: %v", err)
	}
	if _, err := ToBytes(y, DType(99)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("unknown dtype: %v", err)
	}
}

// A Bool tensor may hold bytes other than 0 and 1 (FromBytes, a safetensors file: PyTorch's
// frombuffer keeps them too), but the Go bools ToSlice returns are valid ones: a Go bool whose
// byte is 2 is true yet unequal to true. Nonzero bytes read as true, as libtorch reads them.
func TestToSliceOfBoolBytesGivesValidBools(t *testing.T) {
	x, err := FromBytes([]byte{2, 0, 1, 255}, Bool, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	v, err := ToSlice[bool](x)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true, true}; !slices.Equal(v, want) {
		t.Fatalf("ToSlice of bytes 2, 0, 1, 255: %v, want %v", v, want)
	}
	if b := *(*byte)(unsafe.Pointer(&v[3])); b != 1 {
		t.Fatalf("the bool read from byte 255 holds byte %d", b)
	}
}
