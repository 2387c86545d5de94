package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf8"
)

// ReadHeader reads the header at the start of r, which may be at most maxLen bytes of JSON, and
// checks it as the reference implementation does: valid UTF-8; a JSON object mapping each
// tensor name to an object with exactly the fields dtype (a dtype of the format), shape (an
// array of non-negative integers) and data_offsets (an array of exactly two non-negative
// integers), matched case-sensitively, all three required, others ignored; no key twice, in the
// header, an entry or the metadata; the optional MetadataKey mapping to an object of strings (or
// null: no metadata). On top of that, the shape must not overflow, the data offsets must match
// it, and the tensors must cover [0, DataSize()) without holes or overlaps (the data itself is
// not read: the caller checks that there is DataSize() of it). The header is read as it
// arrives: an input that claims a long header and holds a short one costs no more memory than
// what it holds. Every error means a malformed or unreadable header; it wraps the reader's error
// or the JSON decoder's where there is one.
func ReadHeader(r io.Reader, maxLen int64) (*Header, error) {
	return ReadHeaderSized(r, maxLen, -1)
}

// ReadHeaderSized is ReadHeader from an input known to hold size bytes in all (its length
// included; size < 0: unknown): a header length larger than what follows the length is refused
// before any of the header is read, with an error wrapping io.ErrUnexpectedEOF.
func ReadHeaderSized(r io.Reader, maxLen, size int64) (*Header, error) {
	var n [lengthBytes]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, fmt.Errorf("reading the header length: %w", err)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if hlen < 2 || hlen > uint64(max(maxLen, 0)) {
		return nil, fmt.Errorf("header length %d (at most %d)", hlen, maxLen)
	}
	if rest := max(size-lengthBytes, 0); size >= 0 && hlen > uint64(rest) {
		return nil, fmt.Errorf("header length %d, but %d bytes follow the length: %w", hlen, rest, io.ErrUnexpectedEOF)
	}
	js, err := readFull(r, int(hlen))
	if err != nil {
		return nil, fmt.Errorf("reading the %d-byte header: %w", hlen, err)
	}
	h, err := parse(js)
	if err != nil {
		return nil, err
	}
	h.DataStart = lengthBytes + int64(hlen)
	return h, nil
}

// firstChunk is the most readFull allocates before any data arrives.
const firstChunk = 64 << 10

// readFull reads exactly n bytes of r into a buffer that grows (doubling) as the bytes arrive,
// so that a length read from the input is not trusted with an allocation. Fewer than n bytes
// give io.ErrUnexpectedEOF.
func readFull(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, min(n, firstChunk))
	got := 0
	for {
		m, err := io.ReadFull(r, buf[got:])
		got += m
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // some of the header, or at least its length, came before
		}
		if err != nil {
			return nil, err
		}
		if got == n {
			return buf, nil
		}
		more := make([]byte, min(n, 2*len(buf)))
		copy(more, buf)
		buf = more
	}
}

// parse decodes and checks the JSON of a header (see ReadHeader).
func parse(js []byte) (*Header, error) {
	if !utf8.Valid(js) {
		return nil, errors.New("header: not valid UTF-8")
	}
	if !json.Valid(js) {
		// Unmarshal says what and where, as a *json.SyntaxError.
		return nil, fmt.Errorf("header: %w", json.Unmarshal(js, new(any)))
	}
	if err := checkSurrogates(js); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	// The JSON is valid from here on: the decoder's errors are about types.
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := openObject(dec, "header"); err != nil {
		return nil, err
	}
	h := &Header{byName: map[string]int{}}
	seen := map[string]bool{}
	for dec.More() {
		name, err := key(dec, seen)
		if err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
		if name == MetadataKey {
			if h.Meta, err = metadata(dec); err != nil {
				return nil, fmt.Errorf("%s: %w", MetadataKey, err)
			}
			continue
		}
		t, err := tensorEntry(dec)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", name, err)
		}
		t.Name = name
		h.Tensors = append(h.Tensors, t)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("header: %w", err)
	}
	// In data order: empty tensors first among those starting at one offset, then by name (the
	// order of the JSON object is not kept).
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

// tensorEntry decodes the value of a tensor's entry: an object with the fields dtype, shape and
// data_offsets (each once, all required, other fields ignored, as serde's derive does for the
// reference's TensorInfo), whose offsets match its dtype and shape.
func tensorEntry(dec *json.Decoder) (Tensor, error) {
	var t Tensor
	if err := openObject(dec, "tensor entry"); err != nil {
		return t, err
	}
	seen := map[string]bool{}
	var offsets []int64
	for dec.More() {
		field, err := key(dec, seen)
		if err != nil {
			return t, err
		}
		switch field {
		case "dtype":
			tok, err := dec.Token()
			if err != nil {
				return t, err
			}
			s, ok := tok.(string)
			if !ok {
				return t, typeError(dec, tok, "dtype", reflect.TypeFor[string]())
			}
			t.DType = DType(s)
		case "shape":
			if t.Shape, err = naturals(dec, field); err != nil {
				return t, err
			}
		case "data_offsets":
			if offsets, err = naturals(dec, field); err != nil {
				return t, err
			}
			if len(offsets) != 2 {
				return t, fmt.Errorf("data_offsets %v: not 2 offsets", offsets)
			}
		default:
			if err := skipValue(dec); err != nil {
				return t, err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return t, err
	}
	for _, f := range [...]string{"dtype", "shape", "data_offsets"} {
		if !seen[f] {
			return t, fmt.Errorf("missing field %q", f)
		}
	}
	size, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return t, err
	}
	t.Begin, t.End = offsets[0], offsets[1]
	if t.End < t.Begin || t.End-t.Begin != size {
		return t, fmt.Errorf("data offsets %v do not fit %s %v", offsets, t.DType, t.Shape)
	}
	return t, nil
}

// metadata decodes the value of MetadataKey: an object of strings, or null (no metadata).
func metadata(dec *json.Decoder) (map[string]string, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, typeError(dec, tok, "", reflect.TypeFor[map[string]string]())
	}
	meta := map[string]string{}
	seen := map[string]bool{}
	for dec.More() {
		k, err := key(dec, seen)
		if err != nil {
			return nil, err
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			return nil, typeError(dec, tok, k, reflect.TypeFor[string]())
		}
		meta[k] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	return meta, nil
}

// openObject reads the opening brace of an object, or says that what is there is not one.
func openObject(dec *json.Decoder, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%s: %s, not a JSON object", what, describe(tok))
	}
	return nil
}

// key reads the next key of an object and refuses one already in seen (encoding/json keeps
// the last of duplicated keys: a file could then mean two things).
func key(dec *json.Decoder, seen map[string]bool) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	k, ok := tok.(string)
	if !ok { // not reached in valid JSON
		return "", fmt.Errorf("%s where a key should be", describe(tok))
	}
	if seen[k] {
		return "", fmt.Errorf("key %q appears twice", k)
	}
	seen[k] = true
	return k, nil
}

// naturals decodes an array of integers in [0, 2^63) (the reference's usize; exponents and
// fractions, even 1.0, are refused as serde refuses them).
func naturals(dec *json.Decoder, field string) ([]int64, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		return nil, typeError(dec, tok, field, reflect.TypeFor[[]int64]())
	}
	out := []int64{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, typeError(dec, tok, field, reflect.TypeFor[int64]())
		}
		v, err := strconv.ParseInt(num.String(), 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s: %s is not a non-negative integer", field, num)
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return nil, err
	}
	return out, nil
}

// skipValue reads one JSON value, whatever it is.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// typeError is the *json.UnmarshalTypeError for token tok where a value of type want was
// expected (in field, if not "").
func typeError(dec *json.Decoder, tok json.Token, field string, want reflect.Type) error {
	return &json.UnmarshalTypeError{Value: describe(tok), Type: want, Offset: dec.InputOffset(), Field: field}
}

// describe names the kind of a JSON token, as encoding/json's errors do.
func describe(tok json.Token) string {
	switch x := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		return "number " + x.String()
	case string:
		return "string"
	case json.Delim:
		if x == '[' {
			return "array"
		}
		return "object"
	}
	return fmt.Sprintf("%v", tok)
}

// checkSurrogates refuses a \u escape of a UTF-16 surrogate that is not half of a pair: the
// reference's JSON parser refuses it in a string, encoding/json would decode it as U+FFFD
// (another name, and two names could become one). js is valid JSON, where a backslash starts an
// escape inside a string and \u has four hex digits.
func checkSurrogates(js []byte) error {
	for i := 0; i < len(js); i++ {
		if js[i] != '\\' {
			continue
		}
		i++ // the escaped character: skipped by the loop unless it is u
		if js[i] != 'u' {
			continue
		}
		r := hex4(js[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+6 < len(js) && js[i+1] == '\\' && js[i+2] == 'u' {
				if low := hex4(js[i+3 : i+7]); low >= 0xDC00 && low < 0xE000 {
					i += 6
					continue
				}
			}
			return fmt.Errorf("lone surrogate \\u%04x in a string", r)
		case r >= 0xDC00 && r < 0xE000:
			return fmt.Errorf("lone surrogate \\u%04x in a string", r)
		}
	}
	return nil
}

// hex4 is the value of four hex digits.
func hex4(b []byte) rune {
	v, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(v)
}
