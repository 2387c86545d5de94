package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// file assembles a header length and JSON.
func file(js string) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	return append(n[:], js...)
}

func TestReadHeaderReadsWhatPlaceWrites(t *testing.T) {
	in := []Tensor{
		{Name: "rows", DType: F32, Shape: []int64{0, 4}},
		{Name: "ids", DType: I64, Shape: []int64{0}},
		{Name: "deleted", DType: I64, Shape: []int64{3}},
		{Name: "flags", DType: Bool, Shape: []int64{5}},
		{Name: "x", DType: F64},
	}
	placed, enc, err := Place(in, map[string]string{"format": "test", "step": "3"})
	if err != nil {
		t.Fatal(err)
	}
	// The empty tensors share offset 0 with "deleted": whatever the map order, they read back
	// first, by name.
	want := &Header{Tensors: []Tensor{placed.Tensors[1], placed.Tensors[0], placed.Tensors[2], placed.Tensors[3], placed.Tensors[4]},
		Meta: placed.Meta, DataStart: placed.DataStart, byName: map[string]int{"ids": 0, "rows": 1, "deleted": 2, "flags": 3, "x": 4}}
	for range 20 {
		h, err := ReadHeader(bytes.NewReader(enc), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(h, want) {
			t.Fatalf("read %+v\nwant %+v", h, want)
		}
	}
}

func TestReadHeaderMetadata(t *testing.T) {
	js := `{"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`
	h, err := ReadHeader(bytes.NewReader(file(js)), 100)
	if err != nil || h.Meta != nil || h.DataStart != int64(8+len(js)) || h.DataSize() != 4 {
		t.Fatalf("%+v, %v", h, err)
	}
	h, err = ReadHeader(bytes.NewReader(file(`{"__metadata__":{"a":"b"}}`)), 100)
	if err != nil || !reflect.DeepEqual(h.Meta, map[string]string{"a": "b"}) || len(h.Tensors) != 0 || h.DataSize() != 0 {
		t.Fatalf("%+v, %v", h, err)
	}
}

func TestReadHeaderRejectsMalformedInput(t *testing.T) {
	one := `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	cases := map[string][]byte{
		"empty":              nil,
		"short length":       {1, 2, 3},
		"length 1":           file(`{`),
		"length over limit":  file(one + strings.Repeat(" ", 200)),
		"header past end":    file(one)[:20],
		"bad json":           file(`{"a":{"dtype":`),
		"json array":         file(`[1, 2]`),
		"entry not object":   file(`{"a":3}`),
		"unknown field":      file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`),
		"unknown dtype":      file(`{"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}}`),
		"offsets vs shape":   file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`),
		"negative offset":    file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`),
		"end before begin":   file(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`),
		"negative dimension": file(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`),
		"huge shape":         file(`{"a":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`),
		"hole":               file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`),
		"not from 0":         file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`),
		"overlap":            file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`),
		"bad metadata":       file(`{"__metadata__":{"k":1}}`),
	}
	for name, data := range cases {
		if h, err := ReadHeader(bytes.NewReader(data), 200); err == nil {
			t.Errorf("%s: accepted: %+v", name, h)
		}
	}
}

// Errors keep their cause: the reader's error, the JSON decoder's.
func TestReadHeaderWrapsTheCause(t *testing.T) {
	if _, err := ReadHeader(bytes.NewReader([]byte{1, 2, 3}), 100); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short length: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := ReadHeader(bytes.NewReader(nil), 100); !errors.Is(err, io.EOF) {
		t.Errorf("empty: %v, want io.EOF", err)
	}
	if _, err := ReadHeader(bytes.NewReader(file(`{"a":1}`)[:12]), 100); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("header past end: %v, want io.ErrUnexpectedEOF", err)
	}
	var syn *json.SyntaxError
	if _, err := ReadHeader(bytes.NewReader(file(`{"a":{"dtype":`)), 100); !errors.As(err, &syn) {
		t.Errorf("bad json: %v, want a *json.SyntaxError", err)
	}
	var typ *json.UnmarshalTypeError
	if _, err := ReadHeader(bytes.NewReader(file(`{"__metadata__":{"k":1}}`)), 100); !errors.As(err, &typ) {
		t.Errorf("bad metadata: %v, want a *json.UnmarshalTypeError", err)
	}
	boom := errors.New("boom")
	if _, err := ReadHeader(io.MultiReader(bytes.NewReader(file(`{}`)[:9]), iotestErr{boom}), 100); !errors.Is(err, boom) {
		t.Errorf("failing reader: %v, want its error", err)
	}
}

type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

// FuzzReadHeader: any bytes give an error or a header whose tensors tile its data section and
// which Place encodes back to a header that reads the same (unless a tensor is named "", which
// a file may do but gorec does not write).
func FuzzReadHeader(f *testing.F) {
	_, enc, _ := Place([]Tensor{{Name: "a", DType: I64, Shape: []int64{0}}, {Name: "b", DType: F32, Shape: []int64{2}}},
		map[string]string{"k": "v"})
	f.Add(enc)
	f.Add(file(`{"a":{"dtype":"BOOL","shape":[],"data_offsets":[0,1]}}`))
	f.Add(file(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ReadHeader(bytes.NewReader(data), 1<<16)
		if err != nil {
			return
		}
		var pos int64
		for _, x := range h.Tensors {
			if x.Begin != pos || x.End-x.Begin != mustSize(t, x) {
				t.Fatalf("tensor %+v at %d", x, pos)
			}
			pos = x.End
		}
		if _, ok := h.Tensor(""); ok {
			return
		}
		again, enc, err := Place(h.Tensors, h.Meta)
		if err != nil {
			t.Fatalf("Place of a read header: %v", err)
		}
		back, err := ReadHeader(bytes.NewReader(enc), 1<<20)
		if err != nil || !reflect.DeepEqual(back.Tensors, again.Tensors) || back.DataSize() != h.DataSize() {
			t.Fatalf("re-encoded header reads %+v, %v", back, err)
		}
	})
}

func mustSize(t *testing.T, x Tensor) int64 {
	n, err := byteSize(x.DType, x.Shape)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
