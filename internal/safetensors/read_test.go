package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
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

// What the reference implementation refuses (safetensors/src/tensor.rs: str::from_utf8 on the
// header, then serde's derive on HashMetadata and TensorInfo {dtype, shape: Vec<usize>,
// data_offsets: (usize, usize)}: exact field names, all three required, none twice, integers
// only) is refused, and so are keys given twice anywhere (encoding/json keeps the last one:
// such a file means two things).
func TestReadHeaderIsStrictAsTheReference(t *testing.T) {
	cases := map[string]string{
		"field names in other case": `{"a":{"DTYPE":"F32","Shape":[1],"DATA_OFFSETS":[0,4]}}`,
		"one field in other case":   `{"a":{"dtype":"F32","shape":[1],"Data_Offsets":[0,4]}}`,
		"dtype in lower case":       `{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`,
		"three data offsets":        `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,99]}}`,
		"one data offset":           `{"a":{"dtype":"F32","shape":[0],"data_offsets":[0]}}`,
		"no data offset":            `{"a":{"dtype":"F32","shape":[0],"data_offsets":[]}}`,
		"null data_offsets":         `{"a":{"dtype":"F32","shape":[0],"data_offsets":null}}`,
		"data_offsets an object":    `{"a":{"dtype":"F32","shape":[0],"data_offsets":{"0":0,"1":0}}}`,
		"missing data_offsets":      `{"a":{"dtype":"F32","shape":[0]}}`,
		"missing shape":             `{"a":{"dtype":"F32","data_offsets":[0,4]}}`,
		"null shape":                `{"a":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`,
		"shape a number":            `{"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}}`,
		"shape of strings":          `{"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}`,
		"shape of floats":           `{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}`,
		"shape with an exponent":    `{"a":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}}`,
		"nested shape":              `{"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}}`,
		"offset a float":            `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}}`,
		"missing dtype":             `{"a":{"shape":[1],"data_offsets":[0,4]}}`,
		"null dtype":                `{"a":{"dtype":null,"shape":[1],"data_offsets":[0,4]}}`,
		"dtype a number":            `{"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`,
		"entry null":                `{"a":null}`,
		"entry an array":            `{"a":["F32",[1],[0,4]]}`,
		"duplicate dtype field":     `{"a":{"dtype":"I64","dtype":"F32","shape":[1],"data_offsets":[0,4]}}`,
		"duplicate shape field":     `{"a":{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,4]}}`,
		"duplicate tensor name":     `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`,
		"duplicate metadata":        `{"__metadata__":{"k":"v"},"__metadata__":{"k":"w"}}`,
		"duplicate metadata key":    `{"__metadata__":{"k":"v","k":"w"}}`,
		"metadata value null":       `{"__metadata__":{"k":null}}`,
		"metadata an array":         `{"__metadata__":["k","v"]}`,
		"invalid UTF-8 in a name":   "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		"invalid UTF-8 in metadata": "{\"__metadata__\":{\"k\":\"\xc3\"}}",
		"invalid UTF-8 in padding":  `{"__metadata__":{"k":"v"}}` + "\xff",
		"lone high surrogate":       `{"a\ud800":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`,
		"lone low surrogate":        `{"__metadata__":{"k":"\udc00"}}`,
		"reversed surrogates":       `{"__metadata__":{"k":"\udc00\ud800"}}`,
		"header is JSON null":       `null`,
		"header is a string":        `"{}"`,
		"header is a number":        `12`,
		"two objects":               `{} {}`,
	}
	for name, js := range cases {
		if h, err := ReadHeader(bytes.NewReader(file(js)), 200); err == nil {
			t.Errorf("%s: accepted: %+v, metadata %v", name, h.Tensors, h.Meta)
		}
	}
}

// What the reference implementation reads, gorec reads: unknown fields of an entry are ignored
// (serde's derive without deny_unknown_fields), every dtype of the format is valid, null
// metadata is none, escapes decode (a surrogate pair included).
func TestReadHeaderAcceptsWhatTheReferenceAccepts(t *testing.T) {
	for name, c := range map[string]struct {
		js   string
		want Tensor
	}{
		"extra field":  {`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}}`, Tensor{Name: "a", DType: F32, Shape: []int64{1}, End: 4}},
		"extra object": {`{"a":{"x":{"dtype":"X9","y":[{}]},"dtype":"F32","shape":[1],"data_offsets":[0,4],"z":null}}`, Tensor{Name: "a", DType: F32, Shape: []int64{1}, End: 4}},
		"field order":  {` { "a" : { "data_offsets" : [ 0 , 4 ] , "shape" : [ 2 ] , "dtype" : "F16" } } `, Tensor{Name: "a", DType: F16, Shape: []int64{2}, End: 4}},
		"BOOL":         {`{"a":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: Bool, Shape: []int64{4}, End: 4}},
		"U8":           {`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: U8, Shape: []int64{4}, End: 4}},
		"I8":           {`{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: I8, Shape: []int64{4}, End: 4}},
		"F8_E5M2":      {`{"a":{"dtype":"F8_E5M2","shape":[4],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: F8E5M2, Shape: []int64{4}, End: 4}},
		"F8_E4M3":      {`{"a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: F8E4M3, Shape: []int64{4}, End: 4}},
		"I16":          {`{"a":{"dtype":"I16","shape":[2],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: I16, Shape: []int64{2}, End: 4}},
		"U16":          {`{"a":{"dtype":"U16","shape":[2],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: U16, Shape: []int64{2}, End: 4}},
		"F16":          {`{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: F16, Shape: []int64{2}, End: 4}},
		"BF16":         {`{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: BF16, Shape: []int64{2}, End: 4}},
		"I32":          {`{"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: I32, Shape: []int64{1}, End: 4}},
		"U32":          {`{"a":{"dtype":"U32","shape":[1],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: U32, Shape: []int64{1}, End: 4}},
		"F32":          {`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, Tensor{Name: "a", DType: F32, Shape: []int64{1}, End: 4}},
		"F64":          {`{"a":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, Tensor{Name: "a", DType: F64, Shape: []int64{}, End: 8}},
		"I64":          {`{"a":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}`, Tensor{Name: "a", DType: I64, Shape: []int64{}, End: 8}},
		"U64":          {`{"a":{"dtype":"U64","shape":[],"data_offsets":[0,8]}}`, Tensor{Name: "a", DType: U64, Shape: []int64{}, End: 8}},
		"escapes":      {`{"\u0061\ud83d\ude00\n":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"__metadata__":null}`, Tensor{Name: "a😀\n", DType: U8, Shape: []int64{4}, End: 4}},
	} {
		h, err := ReadHeader(bytes.NewReader(file(c.js)), 200)
		if err != nil {
			t.Errorf("%s: refused: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(h.Tensors, []Tensor{c.want}) || h.Meta != nil {
			t.Errorf("%s: read %+v, metadata %v; want %+v", name, h.Tensors, h.Meta, c.want)
		}
	}
}

// The header is read as it arrives: 8 bytes claiming a header of almost the limit (nn's is the
// reference's 100,000,000) allocate little before the error, which wraps io.ErrUnexpectedEOF.
// Where the input's size is known, such a length is refused before reading.
func TestReadHeaderDoesNotTrustTheLength(t *testing.T) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], 99_999_999)
	for name, read := range map[string]func() (*Header, error){
		"stream": func() (*Header, error) { return ReadHeader(bytes.NewReader(n[:]), 100_000_000) },
		"stream with a byte": func() (*Header, error) {
			return ReadHeader(bytes.NewReader(append(n[:], '{')), 100_000_000)
		},
		"sized": func() (*Header, error) {
			return ReadHeaderSized(bytes.NewReader(n[:]), 100_000_000, 8)
		},
		"sized, size lying": func() (*Header, error) {
			return ReadHeaderSized(bytes.NewReader(n[:]), 100_000_000, 1000)
		},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := read()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v; want io.ErrUnexpectedEOF", name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
			t.Errorf("%s: an 8-byte input allocated %d bytes (error %v)", name, got, err)
		}
	}
	// The size is checked before the header is read: nothing of it is consumed.
	r := bytes.NewReader(append(n[:], "{}"...))
	if _, err := ReadHeaderSized(r, 100_000_000, 10); err == nil || r.Len() != 2 {
		t.Errorf("%v, %d bytes left unread", err, r.Len())
	}
	// A header longer than the first chunk, arriving a few bytes at a time, reads whole.
	js := `{"__metadata__":{"k":"` + strings.Repeat("v", 3*firstChunk) + `"}}`
	h, err := ReadHeaderSized(iotest.OneByteReader(bytes.NewReader(file(js))), 1<<20, int64(8+len(js)))
	if err != nil || len(h.Meta["k"]) != 3*firstChunk || h.DataStart != int64(8+len(js)) {
		t.Fatalf("long header: %v", err)
	}
	if _, err := ReadHeaderSized(bytes.NewReader(file(js)), 1<<20, int64(8+len(js)-1)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("size one short: %v", err)
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
	f.Add(file(`{"a\ud83d\ude00":{"x":[{"y":null}],"dtype":"F16","shape":[2],"data_offsets":[0,4]},"__metadata__":null}`))
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
