package embedding

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"sort"
	"unsafe"
)

// stfile.go: safetensors files written and read region by region, so that a table much larger
// than a buffer never has to be in Go memory at once (nn.WriteSafetensors and ReadSafetensors
// take whole tensors; they serve the dense state). The layout is plain safetensors: an 8-byte
// little-endian header length, a JSON header (padded with spaces to a multiple of 8), then the
// tensors' bytes, little-endian, in the order of the header's data_offsets.

// maxHeader bounds the JSON header a reader accepts.
const maxHeader = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stRegion is one tensor of a file.
type stRegion struct {
	Name  string
	DType string // "F32" or "I64"
	Shape []int64
	Begin int64 // data offsets, relative to the end of the header
	End   int64
}

func (r stRegion) numel() int64 {
	n := int64(1)
	for _, d := range r.Shape {
		n *= d
	}
	return n
}

// stLayout is the header of a file: its regions and metadata, and where the data starts.
type stLayout struct {
	Regions   []stRegion
	Meta      map[string]string
	DataStart int64
	byName    map[string]int
}

func (l *stLayout) region(name string) (stRegion, bool) {
	i, ok := l.byName[name]
	if !ok {
		return stRegion{}, false
	}
	return l.Regions[i], true
}

// size is the length of the whole file.
func (l *stLayout) size() int64 {
	end := int64(0)
	for _, r := range l.Regions {
		end = max(end, r.End)
	}
	return l.DataStart + end
}

type stHeaderEntry struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// newLayout places regions one after the other, in the given order, and builds the header.
func newLayout(regions []stRegion, meta map[string]string) (*stLayout, []byte) {
	l := &stLayout{Meta: meta, byName: map[string]int{}}
	off := int64(0)
	hdr := map[string]any{"__metadata__": meta}
	for i, r := range regions {
		r.Begin = off
		r.End = off + r.numel()*dtypeSize(r.DType)
		off = r.End
		l.Regions = append(l.Regions, r)
		l.byName[r.Name] = i
		hdr[r.Name] = stHeaderEntry{DType: r.DType, Shape: r.Shape, DataOffsets: [2]int64{r.Begin, r.End}}
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		panic(err) // strings and integers only
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	buf := make([]byte, 8, 8+len(js))
	binary.LittleEndian.PutUint64(buf, uint64(len(js)))
	buf = append(buf, js...)
	l.DataStart = int64(len(buf))
	return l, buf
}

func dtypeSize(dt string) int64 {
	switch dt {
	case "F32":
		return 4
	case "I64":
		return 8
	}
	return 0
}

// readLayout reads and checks the header of a file of the given size: every tensor F32 or
// I64, shapes non-negative without overflow, offsets matching the shapes, inside the file,
// not overlapping, and covering the data exactly.
func readLayout(r io.ReaderAt, size int64) (*stLayout, error) {
	var b8 [8]byte
	if size < 8 {
		return nil, fmt.Errorf("file of %d bytes is too short for a safetensors header", size)
	}
	if _, err := r.ReadAt(b8[:], 0); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(b8[:])
	if n > maxHeader || int64(n) > size-8 {
		return nil, fmt.Errorf("header length %d does not fit a file of %d bytes", n, size)
	}
	js := make([]byte, n)
	if _, err := r.ReadAt(js, 8); err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("header: %v", err)
	}
	l := &stLayout{DataStart: 8 + int64(n), Meta: map[string]string{}, byName: map[string]int{}}
	dataLen := size - l.DataStart
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &l.Meta); err != nil {
				return nil, fmt.Errorf("header metadata: %v", err)
			}
			continue
		}
		var e stHeaderEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("header entry %q: %v", name, err)
		}
		es := dtypeSize(e.DType)
		if es == 0 {
			return nil, fmt.Errorf("tensor %q: unsupported dtype %q", name, e.DType)
		}
		numel := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && numel > math.MaxInt64/es/d) {
				return nil, fmt.Errorf("tensor %q: bad shape %v", name, e.Shape)
			}
			numel *= d
		}
		b, en := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || en < b || en > dataLen || en-b != numel*es {
			return nil, fmt.Errorf("tensor %q: data offsets [%d, %d] do not match shape %v (%s) in %d data bytes",
				name, b, en, e.Shape, e.DType, dataLen)
		}
		l.Regions = append(l.Regions, stRegion{Name: name, DType: e.DType, Shape: e.Shape, Begin: b, End: en})
	}
	// Ties (empty tensors at the offset where a non-empty one begins) go empty first.
	sort.Slice(l.Regions, func(i, j int) bool {
		a, b := l.Regions[i], l.Regions[j]
		return a.Begin < b.Begin || (a.Begin == b.Begin && a.End < b.End)
	})
	pos := int64(0)
	for i, rg := range l.Regions {
		if rg.Begin != pos {
			return nil, fmt.Errorf("tensor %q: starts at %d, expected %d (gap or overlap)", rg.Name, rg.Begin, pos)
		}
		pos = rg.End
		l.byName[rg.Name] = i
	}
	if pos != dataLen {
		return nil, fmt.Errorf("tensors cover %d bytes, the file holds %d", pos, dataLen)
	}
	return l, nil
}

// stWriter writes the regions of a layout piece by piece, in order within each region, and
// checksums each region.
type stWriter struct {
	f       *os.File
	l       *stLayout
	written []int64
	crc     []uint32
}

func newSTWriter(f *os.File, l *stLayout, header []byte) (*stWriter, error) {
	if _, err := f.WriteAt(header, 0); err != nil {
		return nil, err
	}
	return &stWriter{f: f, l: l, written: make([]int64, len(l.Regions)), crc: make([]uint32, len(l.Regions))}, nil
}

// write appends b to region i.
func (w *stWriter) write(i int, b []byte) error {
	r := w.l.Regions[i]
	if r.Begin+w.written[i]+int64(len(b)) > r.End {
		return fmt.Errorf("region %q overflows", r.Name)
	}
	if len(b) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(b, w.l.DataStart+r.Begin+w.written[i]); err != nil {
		return err
	}
	w.crc[i] = crc32.Update(w.crc[i], castagnoli, b)
	w.written[i] += int64(len(b))
	return nil
}

// checksums returns each region's CRC-32C once every region is complete.
func (w *stWriter) checksums() (map[string]uint32, error) {
	m := map[string]uint32{}
	for i, r := range w.l.Regions {
		if w.written[i] != r.End-r.Begin {
			return nil, fmt.Errorf("region %q: %d of %d bytes written", r.Name, w.written[i], r.End-r.Begin)
		}
		m[r.Name] = w.crc[i]
	}
	return m, nil
}

// stReader reads regions piece by piece, in order, checksumming them.
type stReader struct {
	f    io.ReaderAt
	l    *stLayout
	read map[string]int64
	crc  map[string]uint32
}

func newSTReader(f io.ReaderAt, l *stLayout) *stReader {
	return &stReader{f: f, l: l, read: map[string]int64{}, crc: map[string]uint32{}}
}

// next fills b from the region's next bytes.
func (r *stReader) next(name string, b []byte) error {
	rg, ok := r.l.region(name)
	if !ok {
		return fmt.Errorf("no tensor %q", name)
	}
	pos := r.read[name]
	if rg.Begin+pos+int64(len(b)) > rg.End {
		return fmt.Errorf("tensor %q: read past its end", name)
	}
	if len(b) == 0 {
		return nil
	}
	if _, err := r.f.ReadAt(b, r.l.DataStart+rg.Begin+pos); err != nil {
		return fmt.Errorf("tensor %q: %v", name, err)
	}
	r.crc[name] = crc32.Update(r.crc[name], castagnoli, b)
	r.read[name] = pos + int64(len(b))
	return nil
}

// verify checks that every region was read whole and matches its checksum.
func (r *stReader) verify(want map[string]uint32) error {
	for _, rg := range r.l.Regions {
		if r.read[rg.Name] != rg.End-rg.Begin {
			return fmt.Errorf("tensor %q: %d of %d bytes read", rg.Name, r.read[rg.Name], rg.End-rg.Begin)
		}
		w, ok := want[rg.Name]
		if !ok {
			return fmt.Errorf("tensor %q has no checksum in the manifest", rg.Name)
		}
		if r.crc[rg.Name] != w {
			return fmt.Errorf("tensor %q: checksum %08x, the manifest says %08x", rg.Name, r.crc[rg.Name], w)
		}
	}
	if len(want) != len(r.l.Regions) {
		return fmt.Errorf("the manifest has %d checksums for %d tensors", len(want), len(r.l.Regions))
	}
	return nil
}

// Byte views of numeric slices (little-endian hosts: amd64, arm64).
func int64Bytes(v []int64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*8)
}

func float32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
}
