package embedding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/internal/atomicfile"
	"github.com/gorec/gorec/internal/ctable"
)

// Checkpoints: a directory holding manifest.json and the files it names (docs/checkpoint.md).
// A save writes new files under a fresh generation prefix, fsyncs them and the directory, then
// writes the manifest under a temporary name, fsyncs it, renames it over manifest.json (the
// commit point) and fsyncs the directory; only then are the previous generation's files
// removed. A process killed at any moment leaves manifest.json naming complete files.

const (
	manifestName   = "manifest.json"
	manifestFormat = "gorec-checkpoint"
	// manifestVersion is the version a save writes: 2 carries manifest_crc32c. Version 1 (no
	// checksum, written before it) is still read.
	manifestVersion = 2
	tableFormat     = "gorec-table"
	tableVersion    = "1"
	// chunkBytes is the size of the buffers a save or load streams a table through.
	chunkBytes = 8 << 20
)

// ours matches the names a save creates, which a later save may remove.
var ours = regexp.MustCompile(`^(g[0-9a-f]+\.(t[0-9]+\.safetensors|f\.[A-Za-z0-9_-]+)|manifest\.json\.tmp-g[0-9a-f]+)$`)

// fileNameOK restricts the names of extra files.
var fileNameOK = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

type manifest struct {
	Format     string       `json:"format"`
	Version    int          `json:"version"`
	Generation string       `json:"generation"`
	Tables     []tableEntry `json:"tables"`
	Files      []fileEntry  `json:"files"`
	// Checksum is the CRC-32C of the manifest's canonical bytes (manifestSum); nil in version 1.
	Checksum *uint32 `json:"manifest_crc32c,omitempty"`
}

// tableEntry describes one table of a checkpoint: its file and everything needed to rebuild it.
type tableEntry struct {
	Name        string            `json:"name"`
	File        string            `json:"file"`
	Size        int64             `json:"size"`
	Rows        int64             `json:"rows"`
	Counts      int64             `json:"admission_counts"`
	Step        int64             `json:"step"`
	Dim         int64             `json:"dim"`
	BlockRows   int64             `json:"block_rows"`
	Layout      string            `json:"layout"`
	Initializer string            `json:"initializer"`
	InitParams  [4]float64        `json:"init_params"`
	Optimizer   string            `json:"optimizer"`
	OptParams   [8]float64        `json:"opt_params"`
	Seed        uint64            `json:"seed"`
	ReadDefault string            `json:"read_default"`
	TrackAccess bool              `json:"track_access,omitempty"`
	AdmitAfter  int64             `json:"admit_after"`
	States      []string          `json:"states"`
	Checksums   map[string]uint32 `json:"crc32c"`

	// The table's place in its delta chain (Delta.Lineage, Delta.Seq), once it has a mark;
	// absent before (and in manifests of an older gorec): the loaded table then starts at mark
	// 0 of a lineage of its own, which takes whole-table deltas only.
	DeltaLineage uint64 `json:"delta_lineage,omitempty"`
	DeltaSeq     int64  `json:"delta_seq,omitempty"`
}

type fileEntry struct {
	Name   string `json:"name"`
	File   string `json:"file"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

var (
	initNames   = []string{"zeros", "constant", "uniform", "normal", "truncated_normal", "xavier_uniform", "xavier_normal"}
	optNames    = []string{"none", "sgd", "adagrad", "rowwise_adagrad", "sparse_adam", "adamw", "ftrl"}
	layoutNames = []string{"separate", "interleaved"}
	readNames   = []string{"zeros", "initial"}
)

func kindOf(names []string, s string) (int, bool) {
	for i, n := range names {
		if n == s {
			return i, true
		}
	}
	return 0, false
}

func corrupt(op, table, format string, args ...any) error {
	return &Error{Op: op, Table: table, Kind: ErrCorrupt, Err: fmt.Errorf(format, args...)}
}

// Save writes a checkpoint of tables to dir (created if needed), replacing the checkpoint there
// only once the new one is complete and durable. Each table is a consistent snapshot (see
// Table.Export): writers of that table wait while it is written (with SaveOptions.Staged,
// only while it is copied into memory), lookups of present ids go on.
// Tables saved together are not mutually consistent unless the caller pauses training.
// Every table needs a name (NewNamed): the checkpoint knows tables by name (ErrBadInput for an
// unnamed one).
//
// ctx is checked between chunks of rows, tables and files: once it is done, the save stops,
// deletes what it wrote and returns an error wrapping ctx.Err(); the checkpoint already in dir
// stays as it was (a save is done once its manifest is committed, which ctx no longer stops).
func Save(ctx context.Context, dir string, tables ...*Table) error {
	return SaveWith(ctx, dir, tables, nil)
}

// SaveWith is Save with extra files in the same checkpoint: files maps a name (letters, digits,
// '_' and '-') to a function writing its content (nn.SaveCheckpoint writes the dense state
// this way).
func SaveWith(ctx context.Context, dir string, tables []*Table, files map[string]func(io.Writer) error) error {
	return SaveWithOptions(ctx, dir, tables, SaveOptions{Files: files})
}

// SaveOptions adjust a save (SaveWithOptions). The zero value is Save's behaviour.
type SaveOptions struct {
	// Files are extra files of the checkpoint, as in SaveWith.
	Files map[string]func(io.Writer) error
	// Staged copies each table into memory (its rows, states, metadata and admission counts)
	// while holding its lock, then writes the copy: the table's writers (updates, inserts,
	// deletes) wait only for the copy, not for the disk, at the cost of one table's size in
	// memory during the save (tables are staged one at a time; the memory is returned to the
	// system when the save ends, with debug.FreeOSMemory: a garbage collection). For training
	// that goes on in other goroutines while a checkpoint is written. The file is the same
	// either way.
	Staged bool
}

// SaveWithOptions is Save with options.
func SaveWithOptions(ctx context.Context, dir string, tables []*Table, o SaveOptions) (err error) {
	const op = "save"
	if err := nilIn(op, tables); err != nil {
		return err
	}
	for _, t := range tables {
		if t.name == "" {
			return badInput(op, "", "an unnamed table cannot be saved: a checkpoint knows tables by name (NewNamed)")
		}
	}
	if err := stopped(ctx, op, ""); err != nil {
		return err
	}
	files := o.Files
	if o.Staged {
		defer debug.FreeOSMemory() // the copies' memory goes back to the system at once
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	gen := fmt.Sprintf("g%x%08x", time.Now().UnixNano(), rand.Uint32())
	m := manifest{Format: manifestFormat, Version: manifestVersion, Generation: gen, Tables: []tableEntry{}, Files: []fileEntry{}}
	var created []string
	defer func() {
		if err != nil {
			for _, p := range created {
				os.Remove(p)
			}
		}
	}()
	seen := map[string]bool{}
	for i, t := range tables {
		if seen[t.Name()] {
			return badInput(op, t.Name(), "the table is listed twice")
		}
		seen[t.Name()] = true
		name := fmt.Sprintf("%s.t%d.safetensors", gen, i)
		path := filepath.Join(dir, name)
		created = append(created, path)
		e, err := writeTableFile(ctx, path, t, o.Staged)
		if err != nil {
			return err
		}
		e.File = name
		m.Tables = append(m.Tables, e)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !fileNameOK.MatchString(n) {
			return badInput(op, "", "bad file name %q", n)
		}
		if err := stopped(ctx, op, ""); err != nil {
			return err
		}
		name := gen + ".f." + n
		path := filepath.Join(dir, name)
		created = append(created, path)
		e, err := writeExtraFile(path, files[n])
		if err != nil {
			return &Error{Op: op, Kind: ErrInternal, Err: fmt.Errorf("file %q: %w", n, err)}
		}
		e.Name, e.File = n, name
		m.Files = append(m.Files, e)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	if err := stopped(ctx, op, ""); err != nil { // the last moment: the commit follows
		return err
	}
	sum, err := manifestSum(m)
	if err != nil {
		return &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	m.Checksum = &sum
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	tmp := filepath.Join(dir, manifestName+".tmp-"+gen)
	created = append(created, tmp)
	if err := atomicfile.WriteSynced(tmp, func(w io.Writer) error { _, err := w.Write(append(js, '\n')); return err }); err != nil {
		return &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	if err := os.Rename(tmp, filepath.Join(dir, manifestName)); err != nil {
		return &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	created = nil // committed
	if err := atomicfile.SyncDir(dir); err != nil {
		return &Error{Op: op, Kind: ErrInternal, Err: err}
	}
	removeStale(dir, m)
	return nil
}

// removeStale deletes the files of earlier (or failed) saves; best effort.
func removeStale(dir string, m manifest) {
	keep := map[string]bool{}
	for _, t := range m.Tables {
		keep[t.File] = true
	}
	for _, f := range m.Files {
		keep[f.File] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if ours.MatchString(e.Name()) && !keep[e.Name()] {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

type crcWriter struct {
	w   io.Writer
	n   int64
	crc uint32
}

func (c *crcWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.crc = crc32.Update(c.crc, castagnoli, b[:n])
	c.n += int64(n)
	return n, err
}

func writeExtraFile(path string, f func(io.Writer) error) (fileEntry, error) {
	var e fileEntry
	err := atomicfile.WriteSynced(path, func(w io.Writer) error {
		cw := &crcWriter{w: w}
		if err := f(cw); err != nil {
			return err
		}
		e.Size, e.CRC32C = cw.n, cw.crc
		return nil
	})
	return e, err
}

// IsCheckpoint reports whether dir holds a committed checkpoint (its manifest), without reading
// it: a job can tell whether to resume or start afresh. Load still checks everything.
func IsCheckpoint(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, manifestName))
	return err == nil && st.Mode().IsRegular()
}

// readManifest reads and checks dir's manifest.
func readManifest(dir string) (manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return manifest{}, fileError("load", err)
	}
	return parseManifest(b)
}

func parseManifest(b []byte) (manifest, error) {
	const op = "load"
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, corrupt(op, "", "manifest: %w", err)
	}
	if m.Format != manifestFormat {
		return m, corrupt(op, "", "manifest: format %q, want %q", m.Format, manifestFormat)
	}
	if err := checkManifestSum(m); err != nil {
		return m, err
	}
	tables, files := map[string]bool{}, map[string]bool{}
	for _, t := range m.Tables {
		if !ours.MatchString(t.File) || filepath.Base(t.File) != t.File {
			return m, corrupt(op, t.Name, "manifest: bad file name %q", t.File)
		}
		if tables[t.Name] {
			return m, corrupt(op, t.Name, "manifest: the table is listed twice")
		}
		tables[t.Name] = true
		if _, ok := kindOf(optNames, t.Optimizer); !ok {
			return m, corrupt(op, t.Name, "manifest: unknown optimizer %q", t.Optimizer)
		}
		if _, ok := kindOf(initNames, t.Initializer); !ok {
			return m, corrupt(op, t.Name, "manifest: unknown initializer %q", t.Initializer)
		}
		if _, ok := kindOf(layoutNames, t.Layout); !ok {
			return m, corrupt(op, t.Name, "manifest: unknown layout %q", t.Layout)
		}
		if _, ok := kindOf(readNames, t.ReadDefault); !ok {
			return m, corrupt(op, t.Name, "manifest: unknown read default %q", t.ReadDefault)
		}
		if t.Dim <= 0 || t.Rows < 0 || t.Counts < 0 || t.Step < 0 || t.BlockRows <= 0 || t.Size < 0 {
			return m, corrupt(op, t.Name, "manifest: negative or zero sizes")
		}
	}
	for _, f := range m.Files {
		if !ours.MatchString(f.File) || filepath.Base(f.File) != f.File {
			return m, corrupt(op, f.Name, "manifest: bad file name %q", f.File)
		}
		if files[f.Name] {
			return m, corrupt(op, "", "manifest: file %q is listed twice", f.Name)
		}
		files[f.Name] = true
	}
	return m, nil
}

// Load opens every table of the checkpoint in dir as a new table under its saved name, with
// its saved configuration, on the CPU. On error nothing stays open. ctx is checked between
// chunks of rows: once it is done the load stops, closes what it opened and returns an error
// wrapping ctx.Err().
func Load(ctx context.Context, dir string) ([]*Table, error) { return LoadRenamed(ctx, dir, nil) }

// LoadRenamed is Load with the tables opened under rename(saved name) (rename nil: the saved
// names), to load a checkpoint next to the tables it was taken from; a table rename gives ""
// opens unnamed (as New), keeping its saved seed.
func LoadRenamed(ctx context.Context, dir string, rename func(saved string) string) ([]*Table, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	var out []*Table
	for _, e := range m.Tables {
		name, err := e.Name, error(nil)
		if rename != nil {
			if name = rename(name); name != "" {
				err = validName(name)
			}
		}
		var t *Table
		if err == nil {
			t, err = loadNew(ctx, dir, e, name, cgotorch.CPU, false, e.TrackAccess)
		}
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// validName checks a name rename gave as the C layer checks a table's name, so that a bad one
// is the caller's error (ErrBadInput), not taken for a corrupt manifest.
func validName(name string) error {
	bad := func(why string) error { return badInput("load", name, "rename gave a table name that %s", why) }
	switch {
	case name == "":
		return bad("is empty")
	case len(name) > 255:
		return bad("is longer than 255 bytes")
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return bad("contains a control character")
	}
	return nil
}

// LoadInto restores tables (each must be in the checkpoint, with the same dim, optimizer, layout
// and block rows: ErrIncompatible otherwise) and reads the extra files with files' functions
// (each must be in the checkpoint; a function's error is returned wrapped in ErrBadInput).
// Everything is read and checked into new tables first, then the extra files are read, then
// the contents are swapped in: on error no table has changed. A table takes over the saved
// initializer and optimizer parameters, step counter, metadata and admission state; its delta
// tracking starts over (the next delta is the whole table). Every table needs a name
// (ErrBadInput otherwise): the checkpoint knows tables by name. ctx is checked between chunks
// of rows and before the swaps: once it is done the load stops and returns an error wrapping
// ctx.Err(), and no table has changed.
func LoadInto(ctx context.Context, dir string, tables []*Table, files map[string]func(io.Reader) error) (err error) {
	const op = "load"
	if err := nilIn(op, tables); err != nil {
		return err
	}
	for _, t := range tables {
		if t.name == "" {
			return badInput(op, "", "an unnamed table is in no checkpoint: a checkpoint knows tables by name (NewNamed)")
		}
	}
	m, err := readManifest(dir)
	if err != nil {
		return err
	}
	byName := map[string]tableEntry{}
	for _, e := range m.Tables {
		byName[e.Name] = e
	}
	var fresh []*Table
	defer func() {
		for _, f := range fresh {
			f.Close()
		}
	}()
	for _, t := range tables {
		e, ok := byName[t.Name()]
		if !ok {
			return &Error{Op: op, Table: t.Name(), Kind: ErrIncompatible, Err: errors.New("the checkpoint has no such table")}
		}
		cc, err := t.t.Config()
		if err != nil {
			return wrap(op, t.Name(), err)
		}
		states, _, err := tableStates(t.t, cc)
		if err != nil {
			return wrap(op, t.Name(), err)
		}
		if err := compatible(e, cc, states); err != nil {
			return err
		}
		f, err := loadNew(ctx, dir, e, "", cc.Device, cc.TensorKernels, cc.TrackAccess) // unnamed: swapped in below
		if err != nil {
			return err
		}
		fresh = append(fresh, f)
	}
	byFile := map[string]fileEntry{}
	for _, f := range m.Files {
		byFile[f.Name] = f
	}
	for name, read := range files {
		f, ok := byFile[name]
		if !ok {
			return &Error{Op: op, Kind: ErrIncompatible, Err: fmt.Errorf("the checkpoint has no file %q", name)}
		}
		if err := readExtraFile(filepath.Join(dir, f.File), f, read); err != nil {
			return err
		}
	}
	if err := stopped(ctx, op, ""); err != nil { // the last moment: the swaps follow
		return err
	}
	// (The swaps are not under configs' lock: each waits for the operations in flight.)
	for i, t := range tables {
		if err := t.t.Swap(fresh[i].t); err != nil {
			// Checked compatible above: the table was closed meanwhile. A swap is its own
			// inverse: the tables swapped already get their contents back.
			for j := i - 1; j >= 0; j-- {
				_ = tables[j].t.Swap(fresh[j].t)
			}
			return wrap(op, t.Name(), err)
		}
	}
	configs.Lock()
	defer configs.Unlock()
	for i, t := range tables {
		t.st.cfg.Store(fresh[i].st.cfg.Load()) // every handle of the table sees it
		if _, ok := configs.m[t.name]; !ok && isOpen(t.name) {
			configs.m[t.name] = t.st // a table created through the binding, reached with Get
		}
	}
	return nil
}

func readExtraFile(path string, e fileEntry, read func(io.Reader) error) error {
	const op = "load"
	b, err := os.ReadFile(path)
	if err != nil {
		return corrupt(op, "", "file %q: %w", e.Name, err)
	}
	if int64(len(b)) != e.Size || crc32.Checksum(b, castagnoli) != e.CRC32C {
		return corrupt(op, "", "file %q: size or checksum does not match the manifest", e.Name)
	}
	if err := read(bytesReader(b)); err != nil {
		return &Error{Op: op, Kind: ErrBadInput, Err: fmt.Errorf("file %q: %w", e.Name, err)}
	}
	return nil
}

// compatible checks that a saved table fits a table of configuration cc and optimizer states
// states: everything a swap of their contents needs, so that a load checked by it swaps
// every table or none.
func compatible(e tableEntry, cc ctable.Config, states []string) error {
	opt, _ := kindOf(optNames, e.Optimizer)
	lay, _ := kindOf(layoutNames, e.Layout)
	switch {
	case e.Dim != cc.Dim:
		return &Error{Op: "load", Table: e.Name, Kind: ErrIncompatible, Err: fmt.Errorf("saved with dim %d, the table has dim %d", e.Dim, cc.Dim)}
	case ctable.Optimizer(opt) != cc.Optimizer:
		return &Error{Op: "load", Table: e.Name, Kind: ErrIncompatible, Err: fmt.Errorf("saved with optimizer %s, the table has %s", e.Optimizer, optNames[cc.Optimizer])}
	case ctable.Layout(lay) != cc.Layout || e.BlockRows != cc.BlockRows:
		return &Error{Op: "load", Table: e.Name, Kind: ErrIncompatible, Err: errors.New("saved with another layout or block size")}
	case !slices.Equal(e.States, states):
		return &Error{Op: "load", Table: e.Name, Kind: ErrIncompatible, Err: fmt.Errorf("saved with optimizer states %q, the table has %q (SGD has a momentum buffer only with momentum)", e.States, states)}
	}
	return nil
}

// configOf rebuilds the Config and the C configuration of a saved table.
// The device, kernels and access tracking are the loader's choice (a table loaded into keeps its own).
func configOf(e tableEntry, dev cgotorch.Device, tensorKernels, track bool) (Config, ctable.Config) {
	ik, _ := kindOf(initNames, e.Initializer)
	ok, _ := kindOf(optNames, e.Optimizer)
	lay, _ := kindOf(layoutNames, e.Layout)
	rd, _ := kindOf(readNames, e.ReadDefault)
	cc := ctable.Config{
		Dim: e.Dim, BlockRows: e.BlockRows, Init: ctable.Init(ik), InitParams: e.InitParams,
		Optimizer: ctable.Optimizer(ok), OptParams: e.OptParams, Device: dev, Seed: e.Seed,
		Layout: ctable.Layout(lay), TensorKernels: tensorKernels, TrackAccess: track,
	}
	cfg := Config{
		Dim: int(e.Dim), Initializer: initializerOf(cc.Init, cc.InitParams), Optimizer: optimizerOf(cc.Optimizer, cc.OptParams),
		BlockRows: int(e.BlockRows), Seed: e.Seed, Device: dev, Layout: Separate, ReadDefault: ReadDefault(rd),
		TrackAccess: track,
	}
	if cc.Layout == ctable.LayoutInterleaved {
		cfg.Layout = Interleaved
	}
	return cfg, cc
}

// loadNew creates a table named name ("": unnamed) from entry e and loads its file; closed
// again on error.
func loadNew(ctx context.Context, dir string, e tableEntry, name string, dev cgotorch.Device, tensorKernels, track bool) (*Table, error) {
	cfg, cc := configOf(e, dev, tensorKernels, track)
	ct, err := ctable.New(name, cc)
	if err != nil {
		if errors.Is(err, cgotorch.ErrInvalidArgument) {
			return nil, corrupt("load", e.Name, "manifest: %w", err)
		}
		return nil, wrap("load", e.Name, err)
	}
	if err := loadTableFile(ctx, filepath.Join(dir, e.File), e, ct); err != nil {
		ct.Close()
		return nil, err
	}
	st := newState(cfg)
	if name != "" {
		configs.Lock()
		configs.m[name] = st
		configs.Unlock()
	}
	return &Table{t: ct, name: name, st: st}, nil
}
