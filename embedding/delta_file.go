package embedding

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/gorec/gorec/internal/atomicfile"
	"github.com/gorec/gorec/internal/safetensors"
)

// delta_file.go: a Delta as one safetensors file, for shipping to serving or as an incremental
// checkpoint on top of a full one. Tensors: ids I64 [M], rows F32 [M, dim], state<i> F32
// [M, width] per optimizer state, meta I64 [M, 3] (last step, frequency, stamp), deleted I64
// [D]; metadata: format "gorec-delta", version "1", step, dim, and optimizer when the delta
// names it (files of an older gorec have none). Written to a temporary name,
// fsynced and renamed: a reader sees the whole file or none.

const deltaFormat = "gorec-delta"

func deltaRegions(m, d, dim int64, widths []int64) []safetensors.Tensor {
	r := []safetensors.Tensor{
		{Name: "ids", DType: safetensors.I64, Shape: []int64{m}},
		{Name: "rows", DType: safetensors.F32, Shape: []int64{m, dim}},
	}
	for i, w := range widths {
		r = append(r, safetensors.Tensor{Name: "state" + strconv.Itoa(i), DType: safetensors.F32, Shape: []int64{m, w}})
	}
	return append(r,
		safetensors.Tensor{Name: "meta", DType: safetensors.I64, Shape: []int64{m, 3}},
		safetensors.Tensor{Name: "deleted", DType: safetensors.I64, Shape: []int64{d}},
	)
}

// WriteDelta writes d (a delta of a table of dim columns) to path atomically.
func WriteDelta(path string, d *Delta, dim int) error {
	const op = "write delta"
	if d == nil {
		return badInput(op, "", "nil delta")
	}
	m := int64(len(d.IDs))
	if dim <= 0 || int64(len(d.Rows)) != m*int64(dim) || int64(len(d.Meta)) != 3*m {
		return badInput(op, "", "inconsistent delta: %d ids, %d row values, %d meta values for dim %d", m, len(d.Rows), len(d.Meta), dim)
	}
	var widths []int64
	for _, s := range d.States {
		if m == 0 || int64(len(s))%m != 0 {
			if m == 0 && len(s) == 0 {
				widths = append(widths, int64(dim))
				continue
			}
			return badInput(op, "", "a state of %d values for %d ids", len(s), m)
		}
		widths = append(widths, int64(len(s))/m)
	}
	data := [][]byte{int64Bytes(d.IDs), float32Bytes(d.Rows)}
	for _, s := range d.States {
		data = append(data, float32Bytes(s))
	}
	data = append(data, int64Bytes(d.Meta), int64Bytes(d.Deleted))
	regions := deltaRegions(m, int64(len(d.Deleted)), int64(dim), widths)
	meta := map[string]string{"format": deltaFormat, "version": "1", "step": strconv.FormatInt(d.Step, 10), "dim": strconv.Itoa(dim)}
	if d.Optimizer != "" {
		if _, ok := kindOf(optNames, d.Optimizer); !ok {
			return badInput(op, "", "unknown optimizer %q", d.Optimizer)
		}
		meta["optimizer"] = d.Optimizer
	}
	for i, r := range regions {
		meta["crc32c."+r.Name] = strconv.FormatUint(uint64(crc32.Checksum(data[i], castagnoli)), 10)
	}
	l, hdr, err := safetensors.Place(regions, meta)
	if err != nil {
		return &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	// The checksums are in the header, so they were taken above; the regions lie back to back
	// in the order of data, so a sequential write is the layout.
	err = atomicfile.Replace(path, func(out io.Writer) error {
		if _, err := out.Write(hdr); err != nil {
			return err
		}
		for i, b := range data {
			if r := l.Tensors[i]; int64(len(b)) != r.End-r.Begin {
				return fmt.Errorf("region %q: %d bytes for %d", r.Name, len(b), r.End-r.Begin)
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	return nil
}

// ReadDelta reads a file of WriteDelta, checking its header (ErrCorrupt), and returns the
// delta and its dim.
func ReadDelta(path string) (*Delta, int, error) {
	const op = "read delta"
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fileError(op, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	l, err := readLayout(f, fi.Size())
	if err != nil {
		return nil, 0, corrupt(op, "", "%w", err)
	}
	dim, err1 := strconv.Atoi(l.Meta["dim"])
	step, err2 := strconv.ParseInt(l.Meta["step"], 10, 64)
	ids, ok1 := l.Tensor("ids")
	del, ok2 := l.Tensor("deleted")
	if l.Meta["format"] != deltaFormat || l.Meta["version"] != "1" || err1 != nil || err2 != nil || dim <= 0 ||
		!ok1 || !ok2 || len(ids.Shape) != 1 || len(del.Shape) != 1 {
		return nil, 0, corrupt(op, "", "not a gorec delta of version 1")
	}
	opt, named := l.Meta["optimizer"]
	if _, ok := kindOf(optNames, opt); named && !ok {
		return nil, 0, corrupt(op, "", "unknown optimizer %q", opt)
	}
	m := ids.Shape[0]
	var widths []int64
	for i := 0; ; i++ {
		r, ok := l.Tensor("state" + strconv.Itoa(i))
		if !ok || len(r.Shape) != 2 {
			break
		}
		widths = append(widths, r.Shape[1])
	}
	want := deltaRegions(m, del.Shape[0], int64(dim), widths)
	if len(want) != len(l.Tensors) {
		return nil, 0, corrupt(op, "", "%d tensors, want %d", len(l.Tensors), len(want))
	}
	for _, w := range want {
		g, ok := l.Tensor(w.Name)
		if !ok || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) {
			return nil, 0, corrupt(op, "", "tensor %q missing or not %s %v", w.Name, w.DType, w.Shape)
		}
	}
	d := &Delta{IDs: make([]int64, m), Rows: make([]float32, m*int64(dim)), Meta: make([]int64, 3*m), Deleted: make([]int64, del.Shape[0]), Step: step, Optimizer: opt}
	rd := newSTReader(f, l)
	errs := []error{rd.next("ids", int64Bytes(d.IDs)), rd.next("rows", float32Bytes(d.Rows))}
	for i, w := range widths {
		s := make([]float32, m*w)
		d.States = append(d.States, s)
		errs = append(errs, rd.next("state"+strconv.Itoa(i), float32Bytes(s)))
	}
	errs = append(errs, rd.next("meta", int64Bytes(d.Meta)), rd.next("deleted", int64Bytes(d.Deleted)))
	sums := map[string]uint32{}
	for _, r := range l.Tensors {
		v, err := strconv.ParseUint(l.Meta["crc32c."+r.Name], 10, 32)
		if err != nil {
			return nil, 0, corrupt(op, "", "tensor %q has no checksum", r.Name)
		}
		sums[r.Name] = uint32(v)
	}
	if err := firstErr(append(errs, rd.verify(sums))...); err != nil {
		return nil, 0, corrupt(op, "", "%w", err)
	}
	return d, dim, nil
}
