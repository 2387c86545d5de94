package nn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/atomicfile"
	"github.com/gorec/gorec/internal/safetensors"
)

// The safetensors layout (header, dtype names, alignment) is in internal/safetensors; this file
// moves whole tensors through it, in memory, to an io.Writer and from an io.Reader.

// ErrFormat is wrapped by the errors of ReadSafetensors and LoadState for malformed input, and
// for a valid file holding a dtype gorec has no tensor type for (U16, U32, U64, F8_E5M2,
// F8_E4M3), whose error wraps errors.ErrUnsupported too.
var ErrFormat = errors.New("nn: malformed safetensors data")

// maxHeader bounds the JSON header, as the reference implementation does (100 MB).
const maxHeader = 100_000_000

// stDTypes are the dtypes WriteSafetensors and ReadSafetensors convert: every dtype of the
// format that cgotorch has a DType for.
var stDTypes = []struct {
	name safetensors.DType
	dt   cgotorch.DType
}{
	{safetensors.F32, cgotorch.Float32},
	{safetensors.F64, cgotorch.Float64},
	{safetensors.F16, cgotorch.Float16},
	{safetensors.BF16, cgotorch.BFloat16},
	{safetensors.I64, cgotorch.Int64},
	{safetensors.I32, cgotorch.Int32},
	{safetensors.I16, cgotorch.Int16},
	{safetensors.I8, cgotorch.Int8},
	{safetensors.U8, cgotorch.Uint8},
	{safetensors.Bool, cgotorch.Bool},
}

func stByName(name safetensors.DType) (cgotorch.DType, bool) {
	for _, d := range stDTypes {
		if d.name == name {
			return d.dt, true
		}
	}
	return 0, false
}

func stByDType(dt cgotorch.DType) (safetensors.DType, bool) {
	for _, d := range stDTypes {
		if d.dt == dt {
			return d.name, true
		}
	}
	return "", false
}

// WriteSafetensors writes tensors (Float32, Float64, Float16, BFloat16, Int64, Int32, Int16,
// Int8, Uint8 or Bool, any device: dtypes F32, F64, F16, BF16, I64, I32, I16, I8, U8, BOOL) and
// optional metadata to w in the safetensors format (the data in the order given, the header
// padded with spaces to a multiple of 8 bytes). Names must be unique, non-empty and valid UTF-8
// and may not be "__metadata__"; metadata keys and values must be valid UTF-8 (JSON strings
// cannot hold other bytes). Otherwise the error wraps cgotorch.ErrInvalidArgument.
func WriteSafetensors(w io.Writer, tensors []NamedParameter, metadata map[string]string) error {
	entries := make([]safetensors.Tensor, len(tensors))
	for i, nt := range tensors {
		if nt.Tensor == nil || nt.Tensor.Closed() {
			return fmt.Errorf("%w: tensor %q is nil or closed", cgotorch.ErrInvalidArgument, nt.Name)
		}
		dt, ok := stByDType(nt.Tensor.DType())
		if !ok {
			return fmt.Errorf("%w: tensor %q: dtype %v not supported", cgotorch.ErrInvalidArgument, nt.Name, nt.Tensor.DType())
		}
		entries[i] = safetensors.Tensor{Name: nt.Name, DType: dt, Shape: nt.Tensor.Shape()}
	}
	h, header, err := safetensors.Place(entries, metadata)
	if err != nil {
		return fmt.Errorf("%w: %w", cgotorch.ErrInvalidArgument, err)
	}
	// Every tensor is read before anything is written.
	datas := make([][]byte, len(tensors))
	for i, nt := range tensors {
		if datas[i], err = tensorBytes(nt.Tensor, nt.Tensor.DType()); err != nil {
			return fmt.Errorf("nn: tensor %q: %w", nt.Name, err)
		}
		if e := h.Tensors[i]; int64(len(datas[i])) != e.End-e.Begin {
			return fmt.Errorf("nn: tensor %q: %d bytes for %s %v", nt.Name, len(datas[i]), e.DType, e.Shape)
		}
	}
	bw := bufio.NewWriter(w)
	bw.Write(header)
	for _, d := range datas {
		bw.Write(d)
	}
	return bw.Flush()
}

// tensorBytes is t's data (dtype dt, t's own) as the format stores it, little-endian.
func tensorBytes(t *Tensor, dt cgotorch.DType) ([]byte, error) {
	b, err := cgotorch.ToBytes(t, dt)
	if err != nil {
		return nil, err
	}
	return littleEndian(b, dt.Size()), nil
}

// tensorFromBytes builds a CPU tensor of dtype dt and shape from little-endian data (whose
// length the caller checked).
func tensorFromBytes(data []byte, dt cgotorch.DType, shape []int64) (*Tensor, error) {
	if dt == cgotorch.Bool {
		for _, b := range data {
			if b > 1 {
				return nil, fmt.Errorf("%w: bool byte %d", ErrFormat, b)
			}
		}
	}
	if bigEndianHost {
		data = littleEndian(slices.Clone(data), dt.Size())
	}
	return cgotorch.FromBytes(data, dt, shape...)
}

// bigEndianHost: cgotorch's bytes are the host's, the format's little-endian.
var bigEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) != 1

// littleEndian turns b, elements of size bytes in the host's order, into little-endian ones in
// place (nothing to do on a little-endian host), and returns it.
func littleEndian(b []byte, size int) []byte {
	for i := 0; bigEndianHost && i+size <= len(b); i += size {
		slices.Reverse(b[i : i+size])
	}
	return b
}

// ReadSafetensors reads a safetensors stream into new CPU tensors keyed by name, and its
// metadata. Every dtype of the format that cgotorch has a DType for reads into a tensor of that
// DType (F32, F64, F16, BF16, I64, I32, I16, I8, U8, BOOL: Float32, ..., Uint8, Bool); the
// others (U16, U32, U64, F8_E5M2, F8_E4M3) give an error wrapping ErrFormat and
// errors.ErrUnsupported. The header is checked as the reference implementation checks it
// (internal/safetensors.ReadHeader: valid UTF-8, exact field names, each field once, two data
// offsets, no key twice; unknown fields of an entry are ignored). Malformed input (a truncated
// stream, bad JSON, a header the reference refuses, an unknown dtype, offsets that do not match
// the shapes or do not tile the data) gives an error wrapping ErrFormat (and the cause: the
// reader's or the JSON decoder's error); it never panics. Memory grows with what the stream
// holds, not with what its header claims. It reads r up to the end of the data section and no
// further: what follows is the caller's.
func ReadSafetensors(r io.Reader) (map[string]*Tensor, map[string]string, error) {
	return readSafetensors(r, false)
}

// sizedReader is a whole file of a known size: readSafetensors refuses a header length larger
// than the file before reading the header.
type sizedReader struct {
	io.Reader
	size int64
}

// readSafetensors is ReadSafetensors; with whole, r holds one whole file, and bytes after the
// data section are an error wrapping ErrFormat, as the reference implementation refuses a
// buffer whose length is not 8 + header + data (MetadataIncompleteBuffer). A sizedReader's
// size bounds the header as the reference bounds it by the buffer's length.
func readSafetensors(r io.Reader, whole bool) (map[string]*Tensor, map[string]string, error) {
	size := int64(-1)
	if s, ok := r.(sizedReader); ok {
		size = s.size
	}
	h, err := safetensors.ReadHeaderSized(r, maxHeader, size)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	dataSize := h.DataSize()
	// Read what is there rather than allocating what the header claims.
	data, err := io.ReadAll(io.LimitReader(r, dataSize))
	if err != nil {
		return nil, nil, fmt.Errorf("nn: reading safetensors data: %w", err)
	}
	if int64(len(data)) != dataSize {
		return nil, nil, fmt.Errorf("%w: data truncated: %d of %d bytes: %w", ErrFormat, len(data), dataSize, io.ErrUnexpectedEOF)
	}
	if whole {
		if n, err := io.Copy(io.Discard, io.LimitReader(r, 1)); err != nil {
			return nil, nil, fmt.Errorf("nn: reading safetensors data: %w", err)
		} else if n > 0 {
			return nil, nil, fmt.Errorf("%w: bytes after the %d bytes of data the header describes", ErrFormat, dataSize)
		}
	}
	out := make(map[string]*Tensor, len(h.Tensors))
	fail := func(err error) (map[string]*Tensor, map[string]string, error) {
		for _, t := range out { // the tensors built before the bad entry
			t.Close()
		}
		return nil, nil, err
	}
	for _, e := range h.Tensors {
		dt, ok := stByName(e.DType)
		if !ok { // a dtype of the format (ReadHeader checked), without a cgotorch DType
			return fail(fmt.Errorf("%w: entry %q: unsupported dtype %s: %w", ErrFormat, e.Name, e.DType, errors.ErrUnsupported))
		}
		t, err := tensorFromBytes(data[e.Begin:e.End], dt, e.Shape)
		if err != nil {
			return fail(fmt.Errorf("nn: entry %q: %w", e.Name, err))
		}
		out[e.Name] = t
	}
	return out, h.Meta, nil
}

// SaveState writes m's StateDict (parameters, then buffers) to w in the safetensors format,
// under the names PyTorch's state_dict uses, so that torch can load it (after reading it with
// safetensors.torch.load or an equivalent parser) with load_state_dict.
func SaveState(w io.Writer, m Module) error {
	return WriteSafetensors(w, StateDict(m), map[string]string{"format": "pt"})
}

// SaveStateFile is SaveState to the file at path, replaced atomically: the state is written to
// a temporary file in the same directory, synced and renamed over path, so on any error (or a
// crash) path keeps what it held before.
func SaveStateFile(path string, m Module) error {
	return atomicfile.Replace(path, func(w io.Writer) error { return SaveState(w, m) })
}

// LoadState reads a safetensors stream (as ReadSafetensors does) and copies its tensors into m's
// parameters and buffers in place, converting the dtype if needed (an F16 or BF16 file loads
// into Float32 parameters, an F64 one too), so optimizers holding them stay valid. It is strict,
// like torch's load_state_dict: a missing key, an unexpected key or a shape mismatch is an error
// wrapping cgotorch.ErrInvalidArgument (a nil or closed parameter or buffer of m wraps
// cgotorch.ErrClosed too), and m is left unchanged unless every tensor fits. It reads r as
// ReadSafetensors does, up to the end of the data section.
func LoadState(r io.Reader, m Module) error {
	return loadState(r, m, false)
}

// loadState is LoadState; whole is readSafetensors'.
func loadState(r io.Reader, m Module, whole bool) error {
	st, err := readState(r, m, whole)
	if err != nil {
		return err
	}
	defer st.close()
	return st.apply()
}

// checkedState is a state read and checked against a module's (readState), not yet copied in.
type checkedState struct {
	state   []NamedParameter // the destinations, by the names the tensors have in the file
	tensors map[string]*cgotorch.Tensor
	after   func() // run by apply once the tensors are copied (nil: nothing)
}

// readState reads a safetensors stream and checks it against m's parameters and buffers as
// LoadState does, changing nothing; the caller closes the result. whole is readSafetensors'.
func readState(r io.Reader, m Module, whole bool) (*checkedState, error) {
	tensors, _, err := readSafetensors(r, whole)
	if err != nil {
		return nil, err
	}
	return checkState(StateDict(m), tensors, "loading state")
}

// checkState pairs the destinations in state with the tensors read, by name, strictly: every
// destination has a tensor of its shape and kind (float or not), and every tensor a
// destination. On a mismatch it closes the tensors and returns an error wrapping
// cgotorch.ErrInvalidArgument and each problem (a nil or closed destination: cgotorch.ErrClosed).
func checkState(state []NamedParameter, tensors map[string]*cgotorch.Tensor, what string) (*checkedState, error) {
	st := &checkedState{state: state, tensors: tensors}
	known := map[string]bool{}
	var problems []error
	for _, p := range st.state {
		known[p.Name] = true
		t, ok := tensors[p.Name]
		if !ok {
			problems = append(problems, fmt.Errorf("missing key %q", p.Name))
			continue
		}
		if p.Tensor == nil || p.Tensor.Closed() {
			problems = append(problems, fmt.Errorf("%q is nil or closed in the module: %w", p.Name, cgotorch.ErrClosed))
			continue
		}
		if got, want := t.Shape(), p.Tensor.Shape(); !slices.Equal(got, want) {
			problems = append(problems, fmt.Errorf("%q has shape %v in the file, %v in the module", p.Name, got, want))
		}
		if t.DType().IsFloat() != p.Tensor.DType().IsFloat() {
			problems = append(problems, fmt.Errorf("%q is %v in the file, %v in the module", p.Name, t.DType(), p.Tensor.DType()))
		}
	}
	var unexpected []string
	for name := range tensors {
		if !known[name] {
			unexpected = append(unexpected, name)
		}
	}
	sort.Strings(unexpected)
	for _, name := range unexpected {
		problems = append(problems, fmt.Errorf("unexpected key %q", name))
	}
	if len(problems) > 0 {
		st.close()
		return nil, fmt.Errorf("%w: %s: %w", cgotorch.ErrInvalidArgument, what, errors.Join(problems...))
	}
	return st, nil
}

// apply copies the checked tensors into their destinations, then runs after.
func (st *checkedState) apply() error {
	err := cgotorch.Try(func() {
		cgotorch.NoGrad(func() {
			for _, p := range st.state {
				p.Tensor.CopyFrom(st.tensors[p.Name])
			}
		})
	})
	if err == nil && st.after != nil {
		st.after()
	}
	return err
}

func (st *checkedState) close() {
	for _, t := range st.tensors {
		t.Close()
	}
}

// LoadStateFile is LoadState from the file at path, which must hold the safetensors data and
// nothing else: bytes after the data section are an error wrapping ErrFormat, as the reference
// implementation refuses them, and so is a header length larger than the file (refused before
// the header is read).
func LoadStateFile(path string, m Module) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		r = sizedReader{r, fi.Size()}
	}
	return loadState(r, m, true)
}
