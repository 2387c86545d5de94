package embedding

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/atomicfile"
	"github.com/gorec/gorec/internal/ctable"
	"github.com/gorec/gorec/internal/safetensors"
)

// checkpoint_table.go: one table as one safetensors file, streamed in chunks of rows.
//
// Tensors, in file order: ids I64 [M], rows F32 [M, dim], state.<name> F32 [M, width] per
// optimizer state, last_step I64 [M], frequency I64 [M], stamp I64 [M], admission.ids I64 [C],
// admission.counts I64 [C]. Metadata: format "gorec-table", version "1", step.

// tableRegions lists the tensors of a table file with M rows and C admission counts.
func tableRegions(m, c, dim int64, states []string, widths []int64) []safetensors.Tensor {
	r := []safetensors.Tensor{
		{Name: "ids", DType: safetensors.I64, Shape: []int64{m}},
		{Name: "rows", DType: safetensors.F32, Shape: []int64{m, dim}},
	}
	for i, s := range states {
		r = append(r, safetensors.Tensor{Name: "state." + s, DType: safetensors.F32, Shape: []int64{m, widths[i]}})
	}
	return append(r,
		safetensors.Tensor{Name: "last_step", DType: safetensors.I64, Shape: []int64{m}},
		safetensors.Tensor{Name: "frequency", DType: safetensors.I64, Shape: []int64{m}},
		safetensors.Tensor{Name: "stamp", DType: safetensors.I64, Shape: []int64{m}},
		safetensors.Tensor{Name: "admission.ids", DType: safetensors.I64, Shape: []int64{c}},
		safetensors.Tensor{Name: "admission.counts", DType: safetensors.I64, Shape: []int64{c}},
	)
}

// rowFloats is the floats of a row of dim floats with states of the given widths.
func rowFloats(dim int64, widths []int64) int64 {
	for _, w := range widths {
		dim += w
	}
	return dim
}

// chunkRows is how many rows of dim floats and the given states fit a streaming buffer (with
// the id and three metadata int64 each).
func chunkRows(dim int64, widths []int64) int64 {
	return max(1, chunkBytes/(4*rowFloats(dim, widths)+4*8))
}

// tableStates names the optimizer states table t (configured as cc) has, and their widths: as
// many as the table says (SGD has one only with momentum).
func tableStates(t *ctable.Table, cc ctable.Config) ([]string, []int64, error) {
	st, err := t.Stats()
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, st.NumStates)
	for i := range names {
		names[i] = ctable.StateName(cc.Optimizer, i)
	}
	return names, ctable.StateWidths(cc.Optimizer, cc.Dim, st.NumStates), nil
}

// writeTableFile streams a consistent snapshot of t into a new file at path, fsynced (staged:
// copied into memory under t's lock first, written after).
func writeTableFile(ctx context.Context, path string, t *Table, staged bool) (tableEntry, error) {
	const op = "save"
	cc, err := t.t.Config()
	if err != nil {
		return tableEntry{}, wrap(op, t.name, err)
	}
	admit, _, err := t.t.Admission()
	if err != nil {
		return tableEntry{}, wrap(op, t.name, err)
	}
	states, widths, err := tableStates(t.t, cc)
	if err != nil {
		return tableEntry{}, wrap(op, t.name, err)
	}
	e := tableEntry{
		Name: t.name, Dim: cc.Dim, BlockRows: cc.BlockRows, Layout: layoutNames[cc.Layout],
		Initializer: initNames[cc.Init], InitParams: cc.InitParams, Optimizer: optNames[cc.Optimizer],
		OptParams: cc.OptParams, Seed: cc.Seed, ReadDefault: readNames[t.conf().ReadDefault],
		TrackAccess: cc.TrackAccess, AdmitAfter: admit, States: append([]string{}, states...),
	}
	perChunk := chunkRows(cc.Dim, widths)
	// Each chunk checks ctx first (the stream stops with the error a sink returns).
	checked := func(sink func(*ctable.Chunk) error) func(*ctable.Chunk) error {
		return func(c *ctable.Chunk) error {
			if err := stopped(ctx, op, t.name); err != nil {
				return err
			}
			return sink(c)
		}
	}
	stream := func(sink func(*ctable.Chunk) error) error { return t.t.Save(perChunk, checked(sink)) }
	if staged {
		s := newStager(int64(t.Len()), rowFloats(cc.Dim, widths))
		if err := t.t.Save(perChunk, checked(s.add)); err != nil {
			var ee *Error
			if errors.As(err, &ee) { // stopped by ctx
				return tableEntry{}, err
			}
			return tableEntry{}, wrap(op, t.name, err)
		}
		stream = func(sink func(*ctable.Chunk) error) error { return s.replay(checked(sink)) }
	}
	var w *stWriter
	err = atomicfile.WriteSynced(path, func(out io.Writer) error {
		f := out.(*os.File)
		return stream(func(c *ctable.Chunk) error {
			if w == nil {
				e.Rows, e.Counts, e.Step = c.TotalRows, c.TotalCounts, c.Step
				if c.Chain.Seq > 0 { // (at mark 0 the lineage does not matter: see ApplyDelta)
					e.DeltaLineage, e.DeltaSeq = c.Chain.Lineage, c.Chain.Seq
				}
				meta := map[string]string{"format": tableFormat, "version": tableVersion, "step": strconv.FormatInt(c.Step, 10)}
				l, hdr, err := safetensors.Place(tableRegions(c.TotalRows, c.TotalCounts, cc.Dim, states, widths), meta)
				if err != nil {
					return err
				}
				if w, err = newSTWriter(f, l, hdr); err != nil {
					return err
				}
				e.Size = l.FileSize()
			}
			if c.Kind == ctable.ChunkCounts {
				return firstErr(w.write(len(w.l.Tensors)-2, int64Bytes(c.IDs)), w.write(len(w.l.Tensors)-1, int64Bytes(c.Counts)))
			}
			errs := []error{w.write(0, int64Bytes(c.IDs)), w.write(1, float32Bytes(c.Rows))}
			for i := range states {
				errs = append(errs, w.write(2+i, float32Bytes(c.States[i])))
			}
			k := 2 + len(states)
			errs = append(errs, w.write(k, int64Bytes(c.LastStep)), w.write(k+1, int64Bytes(c.Frequency)), w.write(k+2, int64Bytes(c.Stamp)))
			return firstErr(errs...)
		})
	})
	if err != nil {
		var ee *Error
		if errors.As(err, &ee) { // stopped by ctx
			return tableEntry{}, err
		}
		var ce *cgotorch.Error
		if errors.As(err, &ce) {
			return tableEntry{}, wrap(op, t.name, err)
		}
		return tableEntry{}, &Error{Op: op, Table: t.name, Kind: ErrInternal, Err: err}
	}
	if e.Checksums, err = w.checksums(); err != nil {
		return tableEntry{}, &Error{Op: op, Table: t.name, Kind: ErrInternal, Err: err}
	}
	return e, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// loadTableFile reads the file of entry e into the empty table dst, chunk by chunk, checking
// the header against the entry, every chunk (the C side checks rows and metadata too) and the
// checksums. dst is left partly filled on error: the caller drops it.
func loadTableFile(ctx context.Context, path string, e tableEntry, dst *ctable.Table) error {
	f, err := os.Open(path)
	if err != nil {
		return corrupt("load", e.Name, "%w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return corrupt("load", e.Name, "%w", err)
	}
	if fi.Size() != e.Size {
		return corrupt("load", e.Name, "file has %d bytes, the manifest says %d", fi.Size(), e.Size)
	}
	return readTable(ctx, f, fi.Size(), e, dst)
}

// readTable is loadTableFile on any reader of the given size (the fuzz target calls it).
func readTable(ctx context.Context, f io.ReaderAt, size int64, e tableEntry, dst *ctable.Table) error {
	fail := func(format string, args ...any) error { return corrupt("load", e.Name, format, args...) }
	l, err := readLayout(f, size)
	if err != nil {
		return fail("%w", err)
	}
	if l.Meta["format"] != tableFormat || l.Meta["version"] != tableVersion {
		return fail("format %q version %q, want %q version %q", l.Meta["format"], l.Meta["version"], tableFormat, tableVersion)
	}
	if l.Meta["step"] != strconv.FormatInt(e.Step, 10) {
		return fail("step %q, the manifest says %d", l.Meta["step"], e.Step)
	}
	cc, err := dst.Config()
	if err != nil {
		return wrap("load", e.Name, err)
	}
	states, widths, err := tableStates(dst, cc)
	if err != nil {
		return wrap("load", e.Name, err)
	}
	want := tableRegions(e.Rows, e.Counts, cc.Dim, states, widths)
	if len(want) != len(l.Tensors) {
		return fail("%d tensors, want %d", len(l.Tensors), len(want))
	}
	for _, w := range want {
		g, ok := l.Tensor(w.Name)
		if !ok || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) {
			return fail("tensor %q missing or not %s %v", w.Name, w.DType, w.Shape)
		}
	}
	if err := dst.SetStep(e.Step); err != nil {
		return wrap("load", e.Name, err)
	}
	if err := dst.SetAdmission(e.AdmitAfter); err != nil {
		return wrap("load", e.Name, err)
	}
	if e.DeltaLineage != 0 {
		if err := dst.SetDeltaChain(e.DeltaLineage, e.DeltaSeq); err != nil {
			return fail("%w", err)
		}
	}
	rd := newSTReader(f, l)
	cr := chunkRows(cc.Dim, widths)
	rows := make([]float32, cr*cc.Dim)
	st := make([][]float32, len(widths))
	for i, w := range widths {
		st[i] = make([]float32, cr*w)
	}
	ids, last, freq, stamp := make([]int64, cr), make([]int64, cr), make([]int64, cr), make([]int64, cr)
	for off := int64(0); off < e.Rows; off += cr {
		if err := stopped(ctx, "load", e.Name); err != nil {
			return err
		}
		n := min(cr, e.Rows-off)
		r := ctable.Rows{IDs: ids[:n], Rows: rows[:n*cc.Dim], LastStep: last[:n], Frequency: freq[:n], Stamp: stamp[:n]}
		errs := []error{rd.next("ids", int64Bytes(r.IDs)), rd.next("rows", float32Bytes(r.Rows))}
		for i, s := range states {
			r.States = append(r.States, st[i][:n*widths[i]])
			errs = append(errs, rd.next("state."+s, float32Bytes(r.States[i])))
		}
		errs = append(errs, rd.next("last_step", int64Bytes(r.LastStep)), rd.next("frequency", int64Bytes(r.Frequency)),
			rd.next("stamp", int64Bytes(r.Stamp)))
		if err := firstErr(errs...); err != nil {
			return fail("%w", err)
		}
		if err := dst.Import(r); err != nil {
			return importError(e.Name, err)
		}
	}
	for off := int64(0); off < e.Counts; off += cr {
		n := min(cr, e.Counts-off)
		if err := firstErr(rd.next("admission.ids", int64Bytes(ids[:n])), rd.next("admission.counts", int64Bytes(freq[:n]))); err != nil {
			return fail("%w", err)
		}
		if err := dst.ImportCounts(ids[:n], freq[:n]); err != nil {
			return importError(e.Name, err)
		}
	}
	if err := rd.verify(e.Checksums); err != nil {
		return fail("%w", err)
	}
	st2, err := dst.Stats()
	if err != nil {
		return wrap("load", e.Name, err)
	}
	if st2.Size != e.Rows {
		return fail("%d distinct ids for %d rows", st2.Size, e.Rows)
	}
	if _, counted, err := dst.Admission(); err != nil || counted != e.Counts {
		return fail("%d distinct admission ids for %d counts", counted, e.Counts)
	}
	if err := dst.Check(); err != nil {
		return fail("%w", err)
	}
	return nil
}

// importError: data the C side rejects (NaN, duplicate ids, steps beyond the counter) is a
// corrupt file.
func importError(table string, err error) error {
	if errors.Is(err, cgotorch.ErrInvalidArgument) {
		return corrupt("load", table, "%w", err)
	}
	return wrap("load", table, err)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// initializerOf and optimizerOf turn the C configuration back into this package's types (the
// parameters are those after defaults, which map to themselves).
func initializerOf(k ctable.Init, p [4]float64) Initializer {
	switch k {
	case ctable.InitConstant:
		return Constant{Value: p[0]}
	case ctable.InitUniform:
		return Uniform{Low: p[0], High: p[1]}
	case ctable.InitNormal:
		return Normal{Mean: p[0], Std: p[1]}
	case ctable.InitTruncatedNormal:
		return TruncatedNormal{Mean: p[0], Std: p[1], Low: p[2], High: p[3]}
	case ctable.InitXavierUniform:
		return XavierUniform{Gain: p[0], FanIn: int(p[1]), FanOut: int(p[2])}
	case ctable.InitXavierNormal:
		return XavierNormal{Gain: p[0], FanIn: int(p[1]), FanOut: int(p[2])}
	}
	return Zeros{}
}

func optimizerOf(k ctable.Optimizer, p [8]float64) Optimizer {
	switch k {
	case ctable.OptSGD:
		return SGD{LR: p[0], Momentum: p[1], Dampening: p[2], Nesterov: p[3] != 0}
	case ctable.OptAdagrad:
		return Adagrad{LR: p[0], LRDecay: p[1], InitialAccumulator: p[2], Eps: p[3]}
	case ctable.OptRowWiseAdagrad:
		return RowWiseAdagrad{LR: p[0], LRDecay: p[1], InitialAccumulator: p[2], Eps: p[3]}
	case ctable.OptSparseAdam:
		return SparseAdam{LR: p[0], Beta1: p[1], Beta2: p[2], Eps: p[3]}
	case ctable.OptAdamW:
		return AdamW{LR: p[0], Beta1: p[1], Beta2: p[2], Eps: p[3], WeightDecay: p[4]}
	case ctable.OptFTRL:
		return FTRL{Alpha: p[0], Beta: p[1], L1: p[2], L2: p[3], InitialAccumulator: p[4]}
	}
	return NoOptimizer{}
}
