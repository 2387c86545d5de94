package dist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"path/filepath"

	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// modelManifestFile names the committed generation of a model checkpoint's directory.
const modelManifestFile = "model.json"

const modelFormat = "gorec-sharded-model"

// modelManifest is the JSON of modelManifestFile.
type modelManifest struct {
	Format     string   `json:"format"` // modelFormat
	Version    int      `json:"version"`
	WorldSize  int      `json:"world_size"` // of the ranks that saved it
	Generation int64    `json:"generation"`
	Tables     []string `json:"tables"` // the sharded tables' names
	// Ranks[r] is rank r's embedding checkpoint, relative to the directory: its shard of every
	// table, and in rank 0's the dense state and the optimizer's (files "dense", "optimizer").
	Ranks     []string `json:"ranks"`
	Optimizer bool     `json:"optimizer"` // whether the optimizer's state was saved
}

// The files of rank 0's part.
const (
	denseFile     = "dense"
	optimizerFile = "optimizer"
)

func readModelManifest(dir string) (modelManifest, error) {
	var m modelManifest
	path := filepath.Join(dir, modelManifestFile)
	b, err := readManifestFile(dir, modelManifestFile)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Format != modelFormat || m.Version != 1 ||
		m.WorldSize < 1 || len(m.Ranks) != m.WorldSize || m.Generation < 1 {
		return m, fmt.Errorf("%w: %s is not a model checkpoint manifest of version 1 (%v)", embedding.ErrCorrupt, path, err)
	}
	for _, r := range m.Ranks {
		if !filepath.IsLocal(r) {
			return m, fmt.Errorf("%w: rank path %q leaves the directory", embedding.ErrCorrupt, r)
		}
	}
	return m, nil
}

// SaveCheckpoint writes a checkpoint of a distributed model into the directory dir
// (collective: every rank calls it, between training steps): the shards of its sharded tables
// (every ShardedTable an nn.Embedding, nn.EmbeddingBag or collection of m looks up, which must
// all be of g), its dense state (nn.SaveState: the replicated layers, rank 0's) and, when opt
// is not nil, the optimizer's state (nn.Optimizer.SaveState, rank 0's). m may be the DataParallel that
// wraps the model.
//
// Each rank writes an embedding checkpoint of its shards under dir/gen-N/rank-R (rank 0's also
// holds the dense and optimizer states); once every rank's is durable, rank 0 commits
// dir/model.json (atomically replaced) naming generation N, then removes the older
// generations. A crash at any point leaves the last committed checkpoint loadable, and
// LoadCheckpoint loads it on any world size. dir must be one directory that every rank
// reaches (one machine, or a shared file system: rank 0 checks that it sees every rank's part
// before the commit), and hold nothing else: a save into a directory that holds a table's
// checkpoint (ShardedTable.Save) fails on every rank (rank 0: ErrInvalidArgument) and changes
// nothing. A model with a table
// local to this process (an *embedding.Table) is refused (ErrInvalidArgument): every rank
// would train its own.
//
// The state of libtorch's random generator is not saved: a model that draws numbers while
// training (Dropout) resumes with other draws.
func SaveCheckpoint(ctx context.Context, g *Group, dir string, m nn.Module, opt *nn.Optimizer) error {
	return SaveCheckpointWith(ctx, g, dir, m, opt, nil)
}

// SaveCheckpointWith is SaveCheckpoint with the caller's files in the checkpoint: what else a
// job resumes from (a learning-rate schedule's state, a data cursor, the loop's step).
// files[name] writes the file name on rank 0 (rank 0's state is the job's; every rank passes
// the same names, and the other ranks' functions are not called). "dense" and "optimizer" are
// the checkpoint's own (ErrInvalidArgument). LoadCheckpointWith reads them back.
func SaveCheckpointWith(ctx context.Context, g *Group, dir string, m nn.Module, opt *nn.Optimizer, files map[string]func(io.Writer) error) error {
	tables, err := modelTables(g, m)
	if err == nil {
		err = ownFiles(files)
	}
	if _, err := verdicts(g, "checkpoint", "save", err, false, "refused their model"); err != nil {
		return err
	}
	m = unwrap(m)
	man := modelManifest{Format: modelFormat, Version: 1, WorldSize: g.WorldSize(), Optimizer: opt != nil}
	shards := make([]*embedding.Table, len(tables))
	for i, s := range tables {
		man.Tables = append(man.Tables, s.name)
		shards[i] = s.shard
	}
	write := func(gen int64) error {
		man.Generation, man.Ranks = gen, rankPaths(gen, man.WorldSize)
		var o embedding.SaveOptions
		if g.Rank() == 0 {
			o.Files = maps.Clone(files)
			if o.Files == nil {
				o.Files = map[string]func(io.Writer) error{}
			}
			o.Files[denseFile] = func(w io.Writer) error { return nn.SaveState(w, m) }
			if opt != nil {
				o.Files[optimizerFile] = opt.SaveState
			}
		}
		return embedding.SaveWithOptions(ctx, cleared(filepath.Join(dir, man.Ranks[g.Rank()])), shards, o)
	}
	gens := generations{dir: dir, manifest: modelManifestFile}
	return saveGeneration(g, "checkpoint", gens, write, func() any { return man }, checkpointBeforeCommit)
}

// checkpointBeforeCommit, when not nil, runs on rank 0 just before SaveCheckpoint commits
// (tests: a crash there).
var checkpointBeforeCommit func()

// LoadCheckpoint restores the checkpoint that SaveCheckpoint committed in dir into m and, when
// not nil, opt (collective), whatever the world size that saved it: every rank reads every
// saved shard of each of m's sharded tables and keeps the ids it owns in g (Owner), with their
// rows, optimizer states and metadata, the saved step counter, learning rate, admission
// threshold and the admission counts of the ids it owns (the table's counts before the load
// are forgotten); every rank loads rank 0's dense state (nn.LoadState) and the optimizer's
// (nn.Optimizer.LoadState).
//
// m and opt must be built as the saved ones were: the same sharded tables (names, dims,
// optimizers), the same dense layers and optimizer. Load into a model whose tables have not
// trained past the checkpoint (a restarted job): tables that have are refused
// (embedding.ErrBadInput). The checkpoint, every table's rows and
// configuration are read and checked on every rank, and the ranks agree, before anything
// changes (an error on any rank: every rank returns one and nothing changed). The dense and
// optimizer states are then checked as they load, each all or nothing, before the tables
// change: one that does not fit the model (another layer, shape or optimizer) is an error on
// every rank with the tables unchanged, but the dense layers may have been loaded.
func LoadCheckpoint(ctx context.Context, g *Group, dir string, m nn.Module, opt *nn.Optimizer) error {
	return LoadCheckpointWith(ctx, g, dir, m, opt, nil)
}

// LoadCheckpointWith is LoadCheckpoint that also reads the caller's files that
// SaveCheckpointWith saved: on every rank, files[name] reads rank 0's file name, with the
// checkpoint's other parts, before the ranks agree and anything of m, opt or the tables
// changes. A file the checkpoint lacks is embedding.ErrIncompatible, and a function's error is
// returned wrapped in embedding.ErrBadInput, on its rank (the others fail with it); a function
// that changes the caller's state should then leave it as it was.
func LoadCheckpointWith(ctx context.Context, g *Group, dir string, m nn.Module, opt *nn.Optimizer, files map[string]func(io.Reader) error) error {
	const op = "load"
	tables, err := modelTables(g, m)
	if err == nil {
		err = ownFiles(files)
	}
	var r *restore
	if err == nil {
		r, err = readCheckpoint(ctx, g, dir, tables, opt != nil, files)
	}
	defer r.close()
	if _, err := verdicts(g, "checkpoint", op, err, false, "could not read it"); err != nil {
		return err
	}
	m = unwrap(m)
	err = nn.LoadState(bytes.NewReader(r.dense), m)
	if err == nil && opt != nil {
		err = opt.LoadState(bytes.NewReader(r.opt))
	}
	if _, err := verdicts(g, "checkpoint", op, err, false, "could not load its dense or optimizer state"); err != nil {
		return err
	}
	return r.apply(g)
}

// unwrap is the model a DataParallel wraps, or m.
func unwrap(m nn.Module) nn.Module {
	if d, ok := m.(*DataParallel); ok {
		return d.Module()
	}
	return m
}

// modelTables returns the sharded tables that m's modules look up (nn.LookupTables: each once,
// in module order), refusing a table of this process or of another group.
func modelTables(g *Group, m nn.Module) ([]*ShardedTable, error) {
	bad := func(format string, args ...any) error {
		return &Error{Op: "checkpoint", Kind: ErrInvalidArgument, Err: fmt.Errorf(format, args...)}
	}
	if m == nil {
		return nil, bad("nil model")
	}
	m = unwrap(m)
	if local := nn.Tables(m); len(local) > 0 {
		return nil, bad("table %q is local to this process: in a distributed model every rank would train its own", local[0].Name())
	}
	var out []*ShardedTable
	var err error
	seen := map[*ShardedTable]bool{}
	walk(m, func(mod nn.Module) {
		for _, t := range nn.LookupTables(mod) {
			s, ok := t.(*ShardedTable)
			switch {
			case err != nil || seen[s]:
			case !ok:
				err = bad("table %q (%T) is not a sharded table", t.Name(), t)
			case s.g != g:
				err = bad("table %q is sharded over another group", s.name)
			default:
				seen[s] = true
				out = append(out, s)
			}
		}
	})
	return out, err
}

// walk calls f on m and on each of its descendants, in module order.
func walk(m nn.Module, f func(nn.Module)) {
	f(m)
	if c, ok := m.(interface{ Children() []nn.NamedModule }); ok {
		for _, ch := range c.Children() {
			walk(ch.Module, f)
		}
	}
}

// restore is a checkpoint read and checked on this rank, not applied yet.
type restore struct {
	tables     []*ShardedTable
	fresh      []*embedding.Table // fresh[i]: this rank's part of tables[i], as saved
	dense, opt []byte
}

// readCheckpoint reads this rank's part of the checkpoint in dir: the ids it owns of each
// table, into new tables, and the dense and optimizer states' bytes.
func readCheckpoint(ctx context.Context, g *Group, dir string, tables []*ShardedTable, withOpt bool, callers map[string]func(io.Reader) error) (*restore, error) {
	man, err := readModelManifest(dir)
	if err != nil {
		return nil, err
	}
	if withOpt && !man.Optimizer {
		return nil, fmt.Errorf("%w: the checkpoint %s has no optimizer state", embedding.ErrIncompatible, dir)
	}
	r := &restore{tables: tables}
	files := maps.Clone(callers)
	if files == nil {
		files = map[string]func(io.Reader) error{}
	}
	files[denseFile] = readAll(&r.dense)
	if withOpt {
		files[optimizerFile] = readAll(&r.opt)
	}
	if err := embedding.LoadInto(ctx, filepath.Join(dir, man.Ranks[0]), nil, files); err != nil {
		return r, err
	}
	for _, s := range tables {
		if !containsString(man.Tables, s.name) {
			return r, fmt.Errorf("%w: the checkpoint %s has no table %q", embedding.ErrIncompatible, dir, s.name)
		}
	}
	r.fresh = make([]*embedding.Table, len(tables))
	for _, part := range man.Ranks {
		if err := r.takeOwnIDs(ctx, g, filepath.Join(dir, part)); err != nil {
			return r, err
		}
	}
	return r, nil
}

// ownFiles refuses the caller's files that would take the name of the checkpoint's own.
func ownFiles[F any](files map[string]F) error {
	for _, name := range []string{denseFile, optimizerFile} {
		if _, ok := files[name]; ok {
			return &Error{Op: "checkpoint", Kind: ErrInvalidArgument, Err: fmt.Errorf("file %q is the checkpoint's own", name)}
		}
	}
	return nil
}

func readAll(dst *[]byte) func(io.Reader) error {
	return func(r io.Reader) (err error) {
		*dst, err = io.ReadAll(r)
		return err
	}
}

func containsString(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

// takeOwnIDs adds to r.fresh the ids this rank owns of every table in one saved rank's part.
func (r *restore) takeOwnIDs(ctx context.Context, g *Group, path string) error {
	suffix := fmt.Sprintf("#restore-%x", rand.Uint64())
	saved, err := embedding.LoadRenamed(ctx, path, func(name string) string { return name + suffix })
	if err != nil {
		return err
	}
	defer func() {
		for _, t := range saved {
			t.Close()
		}
	}()
	byName := map[string]*embedding.Table{}
	for _, t := range saved {
		byName[t.Name()[:len(t.Name())-len(suffix)]] = t
	}
	for i, s := range r.tables {
		t, ok := byName[s.name]
		if !ok {
			return fmt.Errorf("%w: %s has no shard of table %q", embedding.ErrCorrupt, path, s.name)
		}
		if err := compatibleShard(s, t); err != nil {
			return err
		}
		if r.fresh[i] == nil {
			if r.fresh[i], err = embedding.NewNamed(s.name+suffix+"-mine", t.Config()); err == nil {
				err = sameRateAndAdmission(r.fresh[i], t)
			}
			if err != nil {
				return err
			}
		}
		if err := takeOwn(r.fresh[i], t, g.Rank(), g.WorldSize()); err != nil {
			return err
		}
	}
	return nil
}

// sameRateAndAdmission gives dst the learning rate and admission threshold of src (a saved
// shard), and forgets dst's admission counts: a delta applied without a chain carries none of
// them. The caller then sets the saved counts (SetAdmissionCounts).
func sameRateAndAdmission(dst, src *embedding.Table) error {
	k, _, err := src.Admission()
	if err == nil {
		err = dst.SetLR(src.LR())
	}
	if err == nil {
		err = dst.SetAdmission(1) // (forgets the counts)
	}
	if err == nil {
		err = dst.SetAdmission(k)
	}
	return err
}

// compatibleShard checks that a saved shard fits the model's table: the same dim and
// optimizer, and no more steps taken by the table than by the saved one.
func compatibleShard(s *ShardedTable, saved *embedding.Table) error {
	sc, mc := saved.Config(), s.shard.Config() // (as normalised: a nil optimizer is SGD)
	if sc.Dim != mc.Dim || fmt.Sprintf("%T", sc.Optimizer) != fmt.Sprintf("%T", mc.Optimizer) {
		return fmt.Errorf("%w: table %q: saved with dim %d and optimizer %T, the model's has dim %d and %T",
			embedding.ErrIncompatible, s.name, sc.Dim, sc.Optimizer, mc.Dim, mc.Optimizer)
	}
	mine, err := s.shard.Stats()
	if err != nil {
		return err
	}
	st, err := saved.Stats()
	if err != nil {
		return err
	}
	if mine.Step > st.Step {
		return fmt.Errorf("%w: table %q has taken %d steps, the checkpoint %d: load into a table that has not trained past it",
			embedding.ErrBadInput, s.name, mine.Step, st.Step)
	}
	return nil
}

// apply puts the tables' parts read into their shards (collective: the ranks then agree).
func (r *restore) apply(g *Group) error {
	var errs []error
	for i, s := range r.tables {
		err := sameRateAndAdmission(s.shard, r.fresh[i])
		var d *embedding.Delta
		if err == nil {
			d, err = r.fresh[i].Delta(false)
		}
		if err == nil {
			err = s.shard.ApplyDelta(d)
		}
		if err == nil {
			err = s.shard.SetAdmissionCounts(d.CountIDs, d.Counts)
		}
		errs = append(errs, err, s.ZeroGrad())
	}
	_, err := verdicts(g, "checkpoint", "load", errors.Join(errs...), false, "failed to load their shards")
	return err
}

func (r *restore) close() {
	if r == nil {
		return
	}
	for _, t := range r.fresh {
		if t != nil {
			t.Close()
		}
	}
}
