package embedding

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gorec/gorec/internal/atomicfile"
	"github.com/gorec/gorec/internal/safetensors"
)

// delta_file.go: a Delta as one safetensors file, for shipping to serving or as an incremental
// checkpoint on top of a full one. Tensors: ids I64 [M], rows F32 [M, dim], state<i> F32
// [M, width] per optimizer state, meta I64 [M, 3] (last step, frequency, stamp), deleted I64
// [D], and from version 2 admission.ids I64 [C] and admission.counts I64 [C]; metadata:
// format "gorec-delta", version "2", step, dim, optimizer when the delta names it, and from
// version 2 lineage, base, seq, opt_params (8 numbers, comma-separated, each exact),
// admit_after and counts_replace. A version 2 file is written for every delta with a chain
// (Lineage != 0), version 1 for one without; both are read, version 1 as a delta without a
// chain (see ApplyDelta). Written to a temporary name, fsynced and renamed: a reader sees the
// whole file or none.

const deltaFormat = "gorec-delta"

// deltaRegions are the tensors of a delta file of m rows, d deletions and c admission counts
// (c < 0: a version 1 file, without them).
func deltaRegions(m, d, c, dim int64, widths []int64) []safetensors.Tensor {
	r := []safetensors.Tensor{
		{Name: "ids", DType: safetensors.I64, Shape: []int64{m}},
		{Name: "rows", DType: safetensors.F32, Shape: []int64{m, dim}},
	}
	for i, w := range widths {
		r = append(r, safetensors.Tensor{Name: "state" + strconv.Itoa(i), DType: safetensors.F32, Shape: []int64{m, w}})
	}
	r = append(r,
		safetensors.Tensor{Name: "meta", DType: safetensors.I64, Shape: []int64{m, 3}},
		safetensors.Tensor{Name: "deleted", DType: safetensors.I64, Shape: []int64{d}},
	)
	if c < 0 {
		return r
	}
	return append(r,
		safetensors.Tensor{Name: "admission.ids", DType: safetensors.I64, Shape: []int64{c}},
		safetensors.Tensor{Name: "admission.counts", DType: safetensors.I64, Shape: []int64{c}},
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
	if len(d.CountIDs) != len(d.Counts) {
		return badInput(op, "", "inconsistent delta: %d admission count ids for %d counts", len(d.CountIDs), len(d.Counts))
	}
	c := int64(-1)
	meta := map[string]string{"format": deltaFormat, "version": "1", "step": strconv.FormatInt(d.Step, 10), "dim": strconv.Itoa(dim)}
	if d.Lineage != 0 {
		c = int64(len(d.CountIDs))
		data = append(data, int64Bytes(d.CountIDs), int64Bytes(d.Counts))
		chainMeta(meta, d)
	}
	regions := deltaRegions(m, int64(len(d.Deleted)), c, int64(dim), widths)
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
	v := l.Meta["version"]
	if l.Meta["format"] != deltaFormat || (v != "1" && v != "2") || err1 != nil || err2 != nil || dim <= 0 ||
		!ok1 || !ok2 || len(ids.Shape) != 1 || len(del.Shape) != 1 {
		return nil, 0, corrupt(op, "", "not a gorec delta of version 1 or 2")
	}
	d := &Delta{Step: step}
	c := int64(-1)
	if v == "2" {
		cids, ok := l.Tensor("admission.ids")
		if err := readChainMeta(l.Meta, d); err != nil || !ok || len(cids.Shape) != 1 {
			return nil, 0, corrupt(op, "", "version 2 without its chain: %v", err)
		}
		c = cids.Shape[0]
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
	want := deltaRegions(m, del.Shape[0], c, int64(dim), widths)
	if len(want) != len(l.Tensors) {
		return nil, 0, corrupt(op, "", "%d tensors, want %d", len(l.Tensors), len(want))
	}
	for _, w := range want {
		g, ok := l.Tensor(w.Name)
		if !ok || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) {
			return nil, 0, corrupt(op, "", "tensor %q missing or not %s %v", w.Name, w.DType, w.Shape)
		}
	}
	d.IDs, d.Rows, d.Meta, d.Deleted, d.Optimizer = make([]int64, m), make([]float32, m*int64(dim)), make([]int64, 3*m), make([]int64, del.Shape[0]), opt
	rd := newSTReader(f, l)
	errs := []error{rd.next("ids", int64Bytes(d.IDs)), rd.next("rows", float32Bytes(d.Rows))}
	for i, w := range widths {
		s := make([]float32, m*w)
		d.States = append(d.States, s)
		errs = append(errs, rd.next("state"+strconv.Itoa(i), float32Bytes(s)))
	}
	errs = append(errs, rd.next("meta", int64Bytes(d.Meta)), rd.next("deleted", int64Bytes(d.Deleted)))
	if c >= 0 {
		d.CountIDs, d.Counts = make([]int64, c), make([]int64, c)
		errs = append(errs, rd.next("admission.ids", int64Bytes(d.CountIDs)), rd.next("admission.counts", int64Bytes(d.Counts)))
	}
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

// chainMeta adds the chain and table-wide state of d (which has a chain) to a file's metadata
// and makes it a version 2 file.
func chainMeta(meta map[string]string, d *Delta) {
	meta["version"] = "2"
	meta["lineage"] = strconv.FormatUint(d.Lineage, 10)
	meta["base"] = strconv.FormatInt(d.Base, 10)
	meta["seq"] = strconv.FormatInt(d.Seq, 10)
	p := make([]string, len(d.OptParams))
	for i, v := range d.OptParams {
		p[i] = strconv.FormatFloat(v, 'g', -1, 64) // (the shortest text that reads back exactly)
	}
	meta["opt_params"] = strings.Join(p, ",")
	meta["admit_after"] = strconv.FormatInt(d.AdmitAfter, 10)
	meta["counts_replace"] = strconv.FormatBool(d.CountsReplace)
}

// readChainMeta is chainMeta's inverse.
func readChainMeta(meta map[string]string, d *Delta) error {
	var errs [6]error
	d.Lineage, errs[0] = strconv.ParseUint(meta["lineage"], 10, 64)
	d.Base, errs[1] = strconv.ParseInt(meta["base"], 10, 64)
	d.Seq, errs[2] = strconv.ParseInt(meta["seq"], 10, 64)
	d.AdmitAfter, errs[3] = strconv.ParseInt(meta["admit_after"], 10, 64)
	d.CountsReplace, errs[4] = strconv.ParseBool(meta["counts_replace"])
	p := strings.Split(meta["opt_params"], ",")
	if len(p) != len(d.OptParams) {
		return fmt.Errorf("opt_params has %d values", len(p))
	}
	for i := range p {
		if d.OptParams[i], errs[5] = strconv.ParseFloat(p[i], 64); errs[5] != nil {
			break
		}
	}
	if err := firstErr(errs[:]...); err != nil {
		return err
	}
	if d.Lineage == 0 {
		return errors.New("lineage 0")
	}
	return nil
}
