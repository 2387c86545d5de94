package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// ReadHeader reads the header at the start of r, which may be at most maxLen bytes of JSON, and
// checks it: every entry a known dtype, a shape without negative dimensions or overflow, data
// offsets matching the shape, no fields beyond dtype, shape and data_offsets, string metadata,
// and the tensors covering [0, DataSize()) without holes or overlaps (the data itself is not
// read: the caller checks that there is DataSize() of it). Every error means a malformed or
// unreadable header; it wraps the reader's error or the JSON decoder's where there is one.
func ReadHeader(r io.Reader, maxLen int64) (*Header, error) {
	var n [lengthBytes]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, fmt.Errorf("reading the header length: %w", err)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if hlen < 2 || hlen > uint64(max(maxLen, 0)) {
		return nil, fmt.Errorf("header length %d (at most %d)", hlen, maxLen)
	}
	js := make([]byte, hlen)
	if _, err := io.ReadFull(r, js); err != nil {
		return nil, fmt.Errorf("reading the %d-byte header: %w", hlen, err)
	}
	h, err := parse(js)
	if err != nil {
		return nil, err
	}
	h.DataStart = lengthBytes + int64(hlen)
	return h, nil
}

// parse decodes and checks the JSON of a header.
func parse(js []byte) (*Header, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	h := &Header{Tensors: make([]Tensor, 0, len(raw)), byName: make(map[string]int, len(raw))}
	for name, msg := range raw {
		if name == MetadataKey {
			if err := json.Unmarshal(msg, &h.Meta); err != nil {
				return nil, fmt.Errorf("%s: %w", MetadataKey, err)
			}
			continue
		}
		var e entry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("entry %q: %w", name, err)
		}
		size, err := byteSize(e.DType, e.Shape)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", name, err)
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b || end-b != size {
			return nil, fmt.Errorf("entry %q: data offsets %v do not fit %s %v", name, e.DataOffsets, e.DType, e.Shape)
		}
		h.Tensors = append(h.Tensors, Tensor{Name: name, DType: e.DType, Shape: e.Shape, Begin: b, End: end})
	}
	// In data order: empty tensors first among those starting at one offset, then by name (the
	// JSON object's order is lost in the map).
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Name < b.Name
	})
	var pos int64
	for i, t := range h.Tensors {
		if t.Begin != pos {
			return nil, fmt.Errorf("entry %q starts at %d, expected %d (overlap or hole)", t.Name, t.Begin, pos)
		}
		pos = t.End
		h.byName[t.Name] = i
	}
	return h, nil
}
