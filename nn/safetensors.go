package nn

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/gorec/gorec/cgotorch"
)

// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON mapping each tensor name to {"dtype", "shape",
// "data_offsets": [begin, end]} (offsets into the data that follows the header; an optional
// "__metadata__" entry maps strings to strings), then the raw little-endian row-major data. The
// data of the tensors must cover the data section exactly, without overlaps or holes.

// ErrFormat is wrapped by the errors of ReadSafetensors and LoadState for malformed input.
var ErrFormat = errors.New("nn: malformed safetensors data")

// maxHeader bounds the JSON header, as the reference implementation does (100 MB).
const maxHeader = 100_000_000

type stDType struct {
	name string
	dt   cgotorch.DType
	size int
}

var stDTypes = []stDType{
	{"F32", cgotorch.Float32, 4},
	{"F64", cgotorch.Float64, 8},
	{"I64", cgotorch.Int64, 8},
	{"I32", cgotorch.Int32, 4},
	{"BOOL", cgotorch.Bool, 1},
}

func stByName(name string) (stDType, bool) {
	for _, d := range stDTypes {
		if d.name == name {
			return d, true
		}
	}
	return stDType{}, false
}

func stByDType(dt cgotorch.DType) (stDType, bool) {
	for _, d := range stDTypes {
		if d.dt == dt {
			return d, true
		}
	}
	return stDType{}, false
}

type stEntry struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// WriteSafetensors writes tensors (Float32, Float64, Int64, Int32 or Bool, any device) and
// optional metadata to w in the safetensors format (the data in the order given, the header
// padded with spaces to a multiple of 8 bytes). Names must be unique and non-empty and may not
// be "__metadata__".
func WriteSafetensors(w io.Writer, tensors []NamedParameter, metadata map[string]string) error {
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	datas := make([][]byte, len(tensors))
	var offset int64
	for i, nt := range tensors {
		if nt.Name == "" || nt.Name == "__metadata__" {
			return fmt.Errorf("%w: invalid tensor name %q", cgotorch.ErrInvalidArgument, nt.Name)
		}
		if _, dup := header[nt.Name]; dup {
			return fmt.Errorf("%w: duplicate tensor name %q", cgotorch.ErrInvalidArgument, nt.Name)
		}
		if nt.Tensor == nil || nt.Tensor.Closed() {
			return fmt.Errorf("%w: tensor %q is nil or closed", cgotorch.ErrInvalidArgument, nt.Name)
		}
		d, ok := stByDType(nt.Tensor.DType())
		if !ok {
			return fmt.Errorf("%w: tensor %q: dtype %v not supported", cgotorch.ErrInvalidArgument, nt.Name, nt.Tensor.DType())
		}
		data, err := tensorBytes(nt.Tensor, d.dt)
		if err != nil {
			return fmt.Errorf("nn: tensor %q: %w", nt.Name, err)
		}
		shape := nt.Tensor.Shape()
		if shape == nil {
			shape = []int64{}
		}
		header[nt.Name] = stEntry{DType: d.name, Shape: shape, DataOffsets: [2]int64{offset, offset + int64(len(data))}}
		datas[i] = data
		offset += int64(len(data))
	}
	js, err := json.Marshal(header)
	if err != nil {
		return err
	}
	// Pad the header with spaces so that the data starts 8-byte aligned, as the reference
	// writer does.
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	bw := bufio.NewWriter(w)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	bw.Write(n[:])
	bw.Write(js)
	for _, d := range datas {
		bw.Write(d)
	}
	return bw.Flush()
}

// tensorBytes returns t's elements in little-endian order.
func tensorBytes(t *Tensor, dt cgotorch.DType) ([]byte, error) {
	var buf bytes.Buffer
	var err error
	switch dt {
	case cgotorch.Float32:
		var v []float32
		if v, err = cgotorch.ToSlice[float32](t); err == nil {
			err = binary.Write(&buf, binary.LittleEndian, v)
		}
	case cgotorch.Float64:
		var v []float64
		if v, err = cgotorch.ToSlice[float64](t); err == nil {
			err = binary.Write(&buf, binary.LittleEndian, v)
		}
	case cgotorch.Int64:
		var v []int64
		if v, err = cgotorch.ToSlice[int64](t); err == nil {
			err = binary.Write(&buf, binary.LittleEndian, v)
		}
	case cgotorch.Int32:
		var v []int32
		if v, err = cgotorch.ToSlice[int32](t); err == nil {
			err = binary.Write(&buf, binary.LittleEndian, v)
		}
	case cgotorch.Bool:
		var v []bool
		if v, err = cgotorch.ToSlice[bool](t); err == nil {
			err = binary.Write(&buf, binary.LittleEndian, v)
		}
	}
	return buf.Bytes(), err
}

// tensorFromBytes builds a CPU tensor of dtype dt and shape from little-endian data (whose
// length the caller checked).
func tensorFromBytes(data []byte, dt cgotorch.DType, shape []int64) (*Tensor, error) {
	switch dt {
	case cgotorch.Float32:
		v := make([]float32, len(data)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		return cgotorch.FromSlice(v, shape...)
	case cgotorch.Float64:
		v := make([]float64, len(data)/8)
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		return cgotorch.FromSlice(v, shape...)
	case cgotorch.Int64:
		v := make([]int64, len(data)/8)
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
		}
		return cgotorch.FromSlice(v, shape...)
	case cgotorch.Int32:
		v := make([]int32, len(data)/4)
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(data[4*i:]))
		}
		return cgotorch.FromSlice(v, shape...)
	case cgotorch.Bool:
		v := make([]bool, len(data))
		for i, b := range data {
			if b > 1 {
				return nil, fmt.Errorf("%w: bool byte %d", ErrFormat, b)
			}
			v[i] = b == 1
		}
		return cgotorch.FromSlice(v, shape...)
	}
	return nil, fmt.Errorf("%w: dtype %v", ErrFormat, dt)
}

// ReadSafetensors reads a safetensors stream into new CPU tensors keyed by name, and its
// metadata. Malformed input (a truncated stream, bad JSON, an unknown dtype, offsets that do not
// match the shapes or do not tile the data) gives an error wrapping ErrFormat; it never panics.
func ReadSafetensors(r io.Reader) (map[string]*Tensor, map[string]string, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, nil, fmt.Errorf("%w: reading the header length: %v", ErrFormat, err)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if hlen < 2 || hlen > maxHeader {
		return nil, nil, fmt.Errorf("%w: header length %d", ErrFormat, hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, nil, fmt.Errorf("%w: reading the %d-byte header: %v", ErrFormat, hlen, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	var metadata map[string]string
	if m, ok := raw["__metadata__"]; ok {
		if err := json.Unmarshal(m, &metadata); err != nil {
			return nil, nil, fmt.Errorf("%w: __metadata__: %v", ErrFormat, err)
		}
		delete(raw, "__metadata__")
	}
	type item struct {
		name string
		e    stEntry
		d    stDType
	}
	items := make([]item, 0, len(raw))
	for name, msg := range raw {
		var e stEntry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("%w: entry %q: %v", ErrFormat, name, err)
		}
		d, ok := stByName(e.DType)
		if !ok {
			return nil, nil, fmt.Errorf("%w: entry %q: unsupported dtype %q", ErrFormat, name, e.DType)
		}
		numel := int64(1)
		for _, s := range e.Shape {
			if s < 0 || (s > 0 && numel > math.MaxInt64/8/s) {
				return nil, nil, fmt.Errorf("%w: entry %q: bad shape %v", ErrFormat, name, e.Shape)
			}
			numel *= s
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b || end-b != numel*int64(d.size) {
			return nil, nil, fmt.Errorf("%w: entry %q: data offsets %v do not fit %s %v", ErrFormat, name,
				e.DataOffsets, e.DType, e.Shape)
		}
		items = append(items, item{name, e, d})
	}
	// The tensors' data must tile [0, size) exactly.
	sort.Slice(items, func(i, j int) bool {
		if items[i].e.DataOffsets[0] != items[j].e.DataOffsets[0] {
			return items[i].e.DataOffsets[0] < items[j].e.DataOffsets[0]
		}
		return items[i].e.DataOffsets[1] < items[j].e.DataOffsets[1]
	})
	var size int64
	for _, it := range items {
		if it.e.DataOffsets[0] != size {
			return nil, nil, fmt.Errorf("%w: entry %q starts at %d, expected %d (overlap or hole)", ErrFormat,
				it.name, it.e.DataOffsets[0], size)
		}
		size = it.e.DataOffsets[1]
	}
	// Read what is there rather than allocating what the header claims.
	data, err := io.ReadAll(io.LimitReader(r, size))
	if err != nil {
		return nil, nil, fmt.Errorf("nn: reading safetensors data: %w", err)
	}
	if int64(len(data)) != size {
		return nil, nil, fmt.Errorf("%w: data truncated: %d of %d bytes", ErrFormat, len(data), size)
	}
	out := make(map[string]*Tensor, len(items))
	for _, it := range items {
		t, err := tensorFromBytes(data[it.e.DataOffsets[0]:it.e.DataOffsets[1]], it.d.dt, it.e.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("nn: entry %q: %w", it.name, err)
		}
		out[it.name] = t
	}
	return out, metadata, nil
}

// SaveState writes m's StateDict (parameters, then buffers) to w in the safetensors format,
// under the names PyTorch's state_dict uses, so that torch can load it (after reading it with
// safetensors.torch.load or an equivalent parser) with load_state_dict.
func SaveState(w io.Writer, m Module) error {
	return WriteSafetensors(w, StateDict(m), map[string]string{"format": "pt"})
}

// SaveStateFile is SaveState to a file created (or truncated) at path.
func SaveStateFile(path string, m Module) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := SaveState(f, m); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// LoadState reads a safetensors stream and copies its tensors into m's parameters and buffers
// in place (converting the dtype if needed, so optimizers holding them stay valid). It is strict,
// like torch's load_state_dict: a missing key, an unexpected key or a shape mismatch is an error,
// and m is left unchanged unless every tensor fits.
func LoadState(r io.Reader, m Module) error {
	tensors, _, err := ReadSafetensors(r)
	if err != nil {
		return err
	}
	defer func() {
		for _, t := range tensors {
			t.Close()
		}
	}()
	state := StateDict(m)
	known := map[string]bool{}
	var problems []error
	for _, p := range state {
		known[p.Name] = true
		t, ok := tensors[p.Name]
		if !ok {
			problems = append(problems, fmt.Errorf("missing key %q", p.Name))
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
		return fmt.Errorf("%w: loading state: %w", cgotorch.ErrInvalidArgument, errors.Join(problems...))
	}
	return cgotorch.Try(func() {
		cgotorch.NoGrad(func() {
			for _, p := range state {
				p.Tensor.CopyFrom(tensors[p.Name])
			}
		})
	})
}

// LoadStateFile is LoadState from the file at path.
func LoadStateFile(path string, m Module) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return LoadState(bufio.NewReader(f), m)
}
