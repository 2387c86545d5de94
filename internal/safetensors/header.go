package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"
)

const (
	// MetadataKey is the header entry that holds the metadata, not a tensor.
	MetadataKey = "__metadata__"
	// Alignment: the header is padded with spaces so that the data starts at a multiple of it.
	Alignment = 8
	// lengthBytes is the size of the header length that starts a file.
	lengthBytes = 8
)

// Tensor is one tensor of a file and where its bytes lie in the data section.
type Tensor struct {
	Name  string
	DType DType
	Shape []int64
	Begin int64 // data offsets: relative to the start of the data section
	End   int64
}

// Header is the header of a file: its tensors in the order of their data, its metadata (nil
// when it has none) and the file offset where the data section starts.
type Header struct {
	Tensors   []Tensor
	Meta      map[string]string
	DataStart int64
	byName    map[string]int
}

// Tensor returns the tensor called name.
func (h *Header) Tensor(name string) (Tensor, bool) {
	i, ok := h.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return h.Tensors[i], true
}

// DataSize is the length of the data section.
func (h *Header) DataSize() int64 {
	if len(h.Tensors) == 0 {
		return 0
	}
	return h.Tensors[len(h.Tensors)-1].End
}

// FileSize is the length of the whole file.
func (h *Header) FileSize() int64 { return h.DataStart + h.DataSize() }

// entry is a tensor as Place writes it in the JSON header.
type entry struct {
	DType       DType    `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// byteSize is the number of bytes of a tensor of dtype d and the given shape, checked: a dtype
// of the format, no negative dimension, no overflow.
func byteSize(d DType, shape []int64) (int64, error) {
	es := d.Size()
	if es == 0 {
		return 0, fmt.Errorf("unknown dtype %q", d)
	}
	numel := int64(1)
	for _, s := range shape {
		if s < 0 || (s > 0 && numel > math.MaxInt64/es/s) {
			return 0, fmt.Errorf("bad shape %v", shape)
		}
		numel *= s
	}
	return numel * es, nil
}

// Place lays tensors out back to back in the order given (their Begin and End are set from
// dtype and shape) and returns the header and its encoding: the header length, then the JSON
// (metadata left out when empty) padded with spaces to a multiple of Alignment. Names must be
// non-empty, valid UTF-8, unique and not MetadataKey; metadata keys and values valid UTF-8 (a
// JSON string cannot hold other bytes: encoding/json would replace them with U+FFFD, renaming
// the tensor, and two names could become one); dtypes of the format; dimensions non-negative.
func Place(tensors []Tensor, meta map[string]string) (*Header, []byte, error) {
	h := &Header{Tensors: make([]Tensor, 0, len(tensors)), byName: make(map[string]int, len(tensors))}
	js := map[string]any{}
	for k, v := range meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, nil, fmt.Errorf("metadata %q: %q: not valid UTF-8", k, v)
		}
	}
	if len(meta) > 0 {
		h.Meta = meta
		js[MetadataKey] = meta
	}
	var off int64
	for i, t := range tensors {
		if t.Name == "" || t.Name == MetadataKey {
			return nil, nil, fmt.Errorf("invalid tensor name %q", t.Name)
		}
		if !utf8.ValidString(t.Name) {
			return nil, nil, fmt.Errorf("tensor name %q: not valid UTF-8", t.Name)
		}
		if _, dup := h.byName[t.Name]; dup {
			return nil, nil, fmt.Errorf("duplicate tensor name %q", t.Name)
		}
		n, err := byteSize(t.DType, t.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if t.Shape == nil {
			t.Shape = []int64{} // a scalar: "shape": [], not null
		}
		t.Begin, t.End = off, off+n
		off = t.End
		h.Tensors = append(h.Tensors, t)
		h.byName[t.Name] = i
		js[t.Name] = entry{DType: t.DType, Shape: t.Shape, DataOffsets: [2]int64{t.Begin, t.End}}
	}
	b, err := json.Marshal(js)
	if err != nil {
		return nil, nil, err
	}
	for len(b)%Alignment != 0 {
		b = append(b, ' ')
	}
	enc := make([]byte, lengthBytes, lengthBytes+len(b))
	binary.LittleEndian.PutUint64(enc, uint64(len(b)))
	enc = append(enc, b...)
	h.DataStart = int64(len(enc))
	return h, enc, nil
}
