package safetensors

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

func TestPlaceLaysOutAndEncodes(t *testing.T) {
	h, enc, err := Place([]Tensor{
		{Name: "b", DType: F32, Shape: []int64{2, 3}},
		{Name: "a", DType: I64, Shape: []int64{0}},
		{Name: "s", DType: Bool},
		{Name: "c", DType: F64, Shape: []int64{1}},
	}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Tensor{
		{Name: "b", DType: F32, Shape: []int64{2, 3}, Begin: 0, End: 24},
		{Name: "a", DType: I64, Shape: []int64{0}, Begin: 24, End: 24},
		{Name: "s", DType: Bool, Shape: []int64{}, Begin: 24, End: 25},
		{Name: "c", DType: F64, Shape: []int64{1}, Begin: 25, End: 33},
	}
	if !reflect.DeepEqual(h.Tensors, want) {
		t.Errorf("tensors %+v, want %+v", h.Tensors, want)
	}
	// Keys sorted (encoding/json), metadata included, padded with spaces to a multiple of 8.
	js := `{"__metadata__":{"k":"v"},"a":{"dtype":"I64","shape":[0],"data_offsets":[24,24]},` +
		`"b":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"c":{"dtype":"F64","shape":[1],"data_offsets":[25,33]},` +
		`"s":{"dtype":"BOOL","shape":[],"data_offsets":[24,25]}}`
	js += strings.Repeat(" ", (8-len(js)%8)%8)
	if got := string(enc[8:]); got != js {
		t.Errorf("header JSON\n%q\nwant\n%q", got, js)
	}
	if n := binary.LittleEndian.Uint64(enc); n != uint64(len(js)) || n%Alignment != 0 {
		t.Errorf("header length %d, want %d (a multiple of %d)", n, len(js), Alignment)
	}
	if h.DataStart != int64(len(enc)) || h.DataSize() != 33 || h.FileSize() != int64(len(enc))+33 {
		t.Errorf("data start %d, data size %d, file size %d", h.DataStart, h.DataSize(), h.FileSize())
	}
	if c, ok := h.Tensor("c"); !ok || c.Begin != 25 {
		t.Errorf("Tensor(c): %+v %v", c, ok)
	}
	if _, ok := h.Tensor("x"); ok {
		t.Error("Tensor(x) found")
	}
}

func TestPlaceLeavesOutEmptyMetadata(t *testing.T) {
	for _, meta := range []map[string]string{nil, {}} {
		h, enc, err := Place([]Tensor{{Name: "x", DType: I32, Shape: []int64{1}}}, meta)
		if err != nil {
			t.Fatal(err)
		}
		if h.Meta != nil || bytes.Contains(enc, []byte(MetadataKey)) {
			t.Errorf("metadata %v: written as %q", meta, enc[8:])
		}
	}
}

func TestPlaceRejects(t *testing.T) {
	x := Tensor{Name: "x", DType: F32, Shape: []int64{2}}
	for name, ts := range map[string][]Tensor{
		"empty name":     {{DType: F32}},
		"metadata name":  {{Name: MetadataKey, DType: F32}},
		"duplicate":      {x, x},
		"unknown dtype":  {{Name: "y", DType: "X9"}},
		"dtype in lower": {{Name: "y", DType: "f32"}},
		"negative shape": {{Name: "y", DType: F32, Shape: []int64{-1}}},
		"overflow":       {{Name: "y", DType: I64, Shape: []int64{1 << 31, 1 << 31, 4}}},
	} {
		if _, _, err := Place(ts, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A JSON string holds UTF-8 only: encoding/json would write the names "x\xff" and "x\xfe" both
// as "x\ufffd", a file with one key twice, and a reader would find one tensor of two. Place
// refuses such names and metadata instead.
func TestPlaceRefusesNonUTF8(t *testing.T) {
	ok := []Tensor{{Name: "x", DType: F32, Shape: []int64{1}}}
	for name, c := range map[string]struct {
		ts   []Tensor
		meta map[string]string
	}{
		"names":          {[]Tensor{{Name: "x\xff", DType: F32, Shape: []int64{1}}, {Name: "x\xfe", DType: F32, Shape: []int64{1}}}, nil},
		"one name":       {[]Tensor{{Name: "caf\xe9", DType: F32, Shape: []int64{1}}}, nil},
		"metadata key":   {ok, map[string]string{"k\xff": "v"}},
		"metadata value": {ok, map[string]string{"k": "\xffv"}},
	} {
		if h, enc, err := Place(c.ts, c.meta); err == nil {
			t.Errorf("%s: accepted: %+v %q", name, h.Tensors, enc)
		}
	}
	// Valid UTF-8 of any script is a name, and reads back as itself.
	h, enc, err := Place([]Tensor{{Name: "café.重み😀", DType: F32, Shape: []int64{1}}}, map[string]string{"ключ": "значение"})
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadHeader(bytes.NewReader(enc), 1<<10)
	if err != nil || !reflect.DeepEqual(back.Tensors, h.Tensors) || back.Meta["ключ"] != "значение" {
		t.Fatalf("read back %+v, %v", back, err)
	}
}

// Every dtype of the reference implementation, by its exact name.
func TestDTypeSize(t *testing.T) {
	for d, want := range map[DType]int64{
		Bool: 1, U8: 1, I8: 1, F8E5M2: 1, F8E4M3: 1, I16: 2, U16: 2, F16: 2, BF16: 2,
		I32: 4, U32: 4, F32: 4, F64: 8, I64: 8, U64: 8,
		"f32": 0, "F8_E5M2FNUZ": 0, "X9": 0, "": 0,
	} {
		if got := d.Size(); got != want {
			t.Errorf("%q.Size() = %d, want %d", d, got, want)
		}
	}
}
