package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/atomicfile"
)

// shardedManifestFile names the committed generation of a sharded table's checkpoint
// directory.
const shardedManifestFile = "sharded.json"

// shardedManifest is the JSON of shardedManifestFile.
type shardedManifest struct {
	Format     string   `json:"format"` // "gorec-sharded-table"
	Version    int      `json:"version"`
	Table      string   `json:"table"`
	WorldSize  int      `json:"world_size"` // of the ranks that saved it
	Generation int64    `json:"generation"`
	Shards     []string `json:"shards"` // rank r's embedding checkpoint, relative to the directory
}

const shardedFormat = "gorec-sharded-table"

func readShardedManifest(dir string) (shardedManifest, error) {
	var m shardedManifest
	b, err := readManifestFile(dir, shardedManifestFile)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Format != shardedFormat || m.Version != 1 ||
		m.WorldSize < 1 || len(m.Shards) != m.WorldSize {
		return m, fmt.Errorf("%w: %s is not a sharded table manifest of version 1 (%v)", embedding.ErrCorrupt, filepath.Join(dir, shardedManifestFile), err)
	}
	for _, s := range m.Shards {
		if !filepath.IsLocal(s) {
			return m, fmt.Errorf("%w: shard path %q leaves the directory", embedding.ErrCorrupt, s)
		}
	}
	return m, nil
}

// generationDir is the directory of a generation's shards.
func generationDir(gen int64) string { return fmt.Sprintf("gen-%08d", gen) }

// Save writes the table into the directory dir (collective). Each rank saves its shard as an
// embedding checkpoint (embedding.Save) under dir/gen-N/rank-R; once every rank's is durable,
// rank 0 commits dir/sharded.json (atomically replaced) naming generation N, then removes the
// older generations. A crash at any point leaves the last committed checkpoint loadable. dir
// must be one directory that every rank reaches (one machine, or a shared file system: rank 0
// checks that it sees every rank's shard before the commit), and holds one checkpoint: a save
// into a directory that holds another table's checkpoint, or a model's (SaveCheckpoint), fails
// on every rank (rank 0: ErrInvalidArgument) and changes nothing. A rank
// whose ctx is done stops its shard's save (embedding.Save), and then the save fails on every
// rank before the commit: the last committed checkpoint stays.
func (s *ShardedTable) Save(ctx context.Context, dir string) error {
	m := shardedManifest{Format: shardedFormat, Version: 1, Table: s.name, WorldSize: s.g.WorldSize()}
	write := func(gen int64) error {
		m.Generation, m.Shards = gen, rankPaths(gen, m.WorldSize)
		return embedding.Save(ctx, cleared(filepath.Join(dir, m.Shards[s.g.Rank()])), s.shard)
	}
	gens := generations{dir: dir, manifest: shardedManifestFile, replaces: func(raw []byte) error {
		var old shardedManifest
		if json.Unmarshal(raw, &old) == nil && old.Table != s.name {
			return fmt.Errorf("it holds the checkpoint of table %q", old.Table)
		}
		return nil
	}}
	return saveGeneration(s.g, fmt.Sprintf("table %q", s.name), gens, write, func() any { return m }, s.beforeCommit)
}

// rankPaths are the directories of each rank's part of generation gen, relative to the
// checkpoint's directory.
func rankPaths(gen int64, world int) []string {
	out := make([]string, world)
	for r := range out {
		out[r] = filepath.Join(generationDir(gen), fmt.Sprintf("rank-%05d", r))
	}
	return out
}

// cleared removes what a save that crashed before its commit left at path, and returns path
// (a failure to remove it fails the save that then writes there).
func cleared(path string) string {
	os.RemoveAll(path)
	return path
}

// generations is a checkpoint directory that keeps its generations under dir/gen-N and names
// the committed one in dir/manifest. A directory holds one checkpoint: a save refuses a
// directory with the other kind's manifest, or whose committed manifest replaces refuses
// (replaces may be nil).
type generations struct {
	dir, manifest string
	replaces      func(raw []byte) error
}

// manifestLoaders names the manifest of every kind of checkpoint directory, and what loads it.
var manifestLoaders = map[string]string{shardedManifestFile: "LoadShardedTable", modelManifestFile: "LoadCheckpoint"}

// readManifestFile reads dir's manifest file; when there is none, the error (wrapping
// fs.ErrNotExist) says what the directory holds instead.
func readManifestFile(dir, file string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if errors.Is(err, fs.ErrNotExist) {
		held := "no committed checkpoint"
		for f, loader := range manifestLoaders {
			if _, serr := os.Stat(filepath.Join(dir, f)); f != file && serr == nil {
				held = fmt.Sprintf("another kind of checkpoint (%s, which %s loads)", f, loader)
			}
		}
		err = fmt.Errorf("dist: load: %s holds %s: %w", dir, held, err)
	}
	return b, err
}

// saveGeneration is the collective save of a checkpoint directory: rank 0 picks the generation
// after the committed one, every rank writes its part (write(N)), and once every rank's is
// durable and rank 0 sees every part in the directory, rank 0 commits manifest() (atomically
// replacing the manifest; beforeCommit, when not nil, runs just before: tests crash there),
// then removes the other generations. what names the checkpoint in errors.
func saveGeneration(g *Group, what string, gens generations, write func(gen int64) error, manifest func() any, beforeCommit func()) error {
	const op = "save"
	var gen int64
	var err error
	if g.Rank() == 0 {
		gen, err = gens.next()
	}
	all, gerr := gatherInt64s(g, what, op, []int64{boolInt(err != nil), gen})
	if gerr != nil {
		return errors.Join(gerr, err)
	}
	settle := func(err error) error {
		_, err = verdicts(g, what, op, err, false, "failed to save")
		return err
	}
	if err != nil || all[0] != 0 {
		return settle(err) // rank 0's failure, on every rank
	}
	if err := settle(write(all[1])); err != nil {
		return err
	}
	if g.Rank() == 0 {
		err = gens.holdsParts(all[1], g.WorldSize())
		if err == nil && beforeCommit != nil {
			beforeCommit()
		}
		if err == nil {
			err = commitManifest(gens.dir, gens.manifest, manifest())
		}
	}
	if err := settle(err); err != nil {
		return err
	}
	if g.Rank() == 0 {
		removeOtherGenerations(gens.dir, all[1])
	}
	return nil
}

// next is the generation after the one committed in the directory (1 when there is none),
// creating the directory; it refuses a directory that holds another checkpoint.
func (gens generations) next() (int64, error) {
	if err := os.MkdirAll(gens.dir, 0o755); err != nil {
		return 0, err
	}
	refuse := func(why error) error {
		return &Error{Op: "save", Kind: ErrInvalidArgument,
			Err: fmt.Errorf("%s: %w: a directory holds one checkpoint, and a save replaces only its own", gens.dir, why)}
	}
	for f := range manifestLoaders {
		if _, err := os.Stat(filepath.Join(gens.dir, f)); f != gens.manifest && err == nil {
			return 0, refuse(fmt.Errorf("it holds another kind of checkpoint (%s)", f))
		}
	}
	path := filepath.Join(gens.dir, gens.manifest)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	var m struct{ Generation int64 }
	if err := json.Unmarshal(b, &m); err != nil || m.Generation < 1 {
		return 0, fmt.Errorf("%w: %s names no generation (%v)", embedding.ErrCorrupt, path, err)
	}
	if gens.replaces != nil {
		if err := gens.replaces(b); err != nil {
			return 0, refuse(err)
		}
	}
	return m.Generation + 1, nil
}

// holdsParts checks that every rank's part of generation gen is in the directory as this rank
// sees it: ranks that each saved to a directory of their own (no shared file system) would
// otherwise commit a checkpoint that cannot load.
func (gens generations) holdsParts(gen int64, world int) error {
	for r, p := range rankPaths(gen, world) {
		if !embedding.IsCheckpoint(filepath.Join(gens.dir, p)) {
			return &Error{Op: "save", Kind: ErrInvalidArgument, Err: fmt.Errorf(
				"rank %d's part is not in %s as rank 0 sees it: dir must be one directory that every rank reaches (one machine, or a shared file system)", r, gens.dir)}
		}
	}
	return nil
}

func commitManifest(dir, manifestFile string, m any) error {
	err := atomicfile.Replace(filepath.Join(dir, manifestFile), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	})
	if err == nil {
		err = atomicfile.SyncDir(dir)
	}
	return err
}

// removeOtherGenerations removes the generations other than gen (best effort: a leftover is
// only disk space, never read).
func removeOtherGenerations(dir string, gen int64) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "gen-") && e.Name() != generationDir(gen) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// LoadShardedTable opens the sharded table that Save committed in dir, on g (collective),
// whatever the world size that saved it: every rank reads every saved shard and keeps the ids
// it owns in g (Owner), with their rows, optimizer states and metadata; the step counter,
// configuration, learning rate, admission threshold and admission counts are the saved ones.
// The table takes its saved name, which must be free in this process (close the table that
// was saved before loading it again). A rank
// whose ctx is done stops its reads (embedding.Load), and the load fails on every rank.
func LoadShardedTable(ctx context.Context, g *Group, dir string) (*ShardedTable, error) {
	const op = "load"
	m, err := readShardedManifest(dir)
	var saved *embedding.Table // shard 0, for the configuration, rate and admission threshold
	var cfg embedding.Config
	if err == nil {
		if saved, err = loadShard(ctx, filepath.Join(dir, m.Shards[0]), m.Table); err == nil {
			defer saved.Close()
			cfg = saved.Config()
		}
	}
	if _, err := verdicts(g, fmt.Sprintf("table %q", m.Table), op, err, false, "could not read it"); err != nil {
		return nil, err
	}
	s, err := NewShardedTable(g, m.Table, cfg)
	if err != nil {
		return nil, err
	}
	err = sameRateAndAdmission(s.shard, saved)
	for k := 0; err == nil && k < len(m.Shards); k++ {
		err = s.takeOwnIDs(ctx, filepath.Join(dir, m.Shards[k]), m.Table)
	}
	if err := s.settle(op, err); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// loadShard opens the one table of a saved shard, unnamed; it must have been saved as table
// name.
func loadShard(ctx context.Context, path, name string) (*embedding.Table, error) {
	var names []string
	tables, err := embedding.LoadRenamed(ctx, path, func(saved string) string {
		names = append(names, saved)
		return ""
	})
	if err != nil {
		return nil, err
	}
	if len(tables) != 1 || len(names) != 1 || names[0] != name {
		for _, t := range tables {
			t.Close()
		}
		return nil, fmt.Errorf("%w: %s holds tables %q, want one, %q", embedding.ErrCorrupt, path, names, name)
	}
	return tables[0], nil
}

// takeOwnIDs merges into this rank's shard the ids it owns from the saved shard at path.
func (s *ShardedTable) takeOwnIDs(ctx context.Context, path, name string) error {
	t, err := loadShard(ctx, path, name)
	if err != nil {
		return err
	}
	defer t.Close()
	return takeOwn(s.shard, t, s.g.Rank(), s.g.WorldSize())
}

// takeOwn merges into dst the ids that rank owns among world ranks from saved (a saved shard):
// its whole-table delta, filtered, applied without a chain (embedding.ApplyDelta), then the
// admission counts of the ids rank owns, which such a delta does not carry (dst's admission
// threshold is set first: sameRateAndAdmission).
func takeOwn(dst, saved *embedding.Table, rank, world int) error {
	d, err := saved.Delta(false)
	if err != nil {
		return err
	}
	own := ownDelta(d, rank, world, saved.Dim())
	if err := dst.ApplyDelta(own); err != nil {
		return err
	}
	return dst.SetAdmissionCounts(own.CountIDs, own.Counts)
}

// ownDelta is d with only the ids (rows and admission counts) that rank owns among world ranks,
// and no chain.
func ownDelta(d *embedding.Delta, rank, world, dim int) *embedding.Delta {
	out := &embedding.Delta{Step: d.Step, Optimizer: d.Optimizer, States: make([][]float32, len(d.States))}
	widths := make([]int, len(d.States))
	for j, st := range d.States {
		if len(d.IDs) > 0 {
			widths[j] = len(st) / len(d.IDs)
		}
	}
	const metaWidth = 3
	for i, id := range d.IDs {
		if Owner(id, world) != rank {
			continue
		}
		out.IDs = append(out.IDs, id)
		out.Rows = append(out.Rows, d.Rows[i*dim:(i+1)*dim]...)
		out.Meta = append(out.Meta, d.Meta[i*metaWidth:(i+1)*metaWidth]...)
		for j, st := range d.States {
			out.States[j] = append(out.States[j], st[i*widths[j]:(i+1)*widths[j]]...)
		}
	}
	for i, id := range d.CountIDs {
		if d.Counts[i] > 0 && Owner(id, world) == rank {
			out.CountIDs, out.Counts = append(out.CountIDs, id), append(out.Counts, d.Counts[i])
		}
	}
	return out
}
