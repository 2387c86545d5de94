package embedding

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"unsafe"

	"github.com/gorec/gorec/internal/safetensors"
)

// stfile.go: safetensors files written and read region by region, so that a table much larger
// than a buffer never has to be in Go memory at once (nn.WriteSafetensors and ReadSafetensors
// take whole tensors; they serve the dense state). The header (layout, JSON, dtype names,
// alignment, checks) is internal/safetensors: safetensors.Place lays the regions out and
// encodes it, readLayout reads it.

// maxHeader bounds the JSON header a reader accepts.
const maxHeader = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readLayout reads and checks the header of a file of the given size (safetensors.ReadHeader),
// and that its tensors cover the rest of the file exactly.
func readLayout(r io.ReaderAt, size int64) (*safetensors.Header, error) {
	l, err := safetensors.ReadHeader(io.NewSectionReader(r, 0, size), maxHeader)
	if err != nil {
		return nil, err
	}
	if l.FileSize() != size {
		return nil, fmt.Errorf("tensors cover %d bytes, the file holds %d", l.DataSize(), size-l.DataStart)
	}
	return l, nil
}

// stWriter writes the regions of a layout piece by piece, in order within each region, and
// checksums each region.
type stWriter struct {
	f       *os.File
	l       *safetensors.Header
	written []int64
	crc     []uint32
}

func newSTWriter(f *os.File, l *safetensors.Header, header []byte) (*stWriter, error) {
	if _, err := f.WriteAt(header, 0); err != nil {
		return nil, err
	}
	return &stWriter{f: f, l: l, written: make([]int64, len(l.Tensors)), crc: make([]uint32, len(l.Tensors))}, nil
}

// write appends b to region i.
func (w *stWriter) write(i int, b []byte) error {
	r := w.l.Tensors[i]
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
	for i, r := range w.l.Tensors {
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
	l    *safetensors.Header
	read map[string]int64
	crc  map[string]uint32
}

func newSTReader(f io.ReaderAt, l *safetensors.Header) *stReader {
	return &stReader{f: f, l: l, read: map[string]int64{}, crc: map[string]uint32{}}
}

// next fills b from the region's next bytes.
func (r *stReader) next(name string, b []byte) error {
	rg, ok := r.l.Tensor(name)
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
		return fmt.Errorf("tensor %q: %w", name, err)
	}
	r.crc[name] = crc32.Update(r.crc[name], castagnoli, b)
	r.read[name] = pos + int64(len(b))
	return nil
}

// verify checks that every region was read whole and matches its checksum.
func (r *stReader) verify(want map[string]uint32) error {
	for _, rg := range r.l.Tensors {
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
	if len(want) != len(r.l.Tensors) {
		return fmt.Errorf("the manifest has %d checksums for %d tensors", len(want), len(r.l.Tensors))
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
