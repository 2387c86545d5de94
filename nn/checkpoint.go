package nn

import (
	"context"
	"fmt"
	"io"

	"github.com/gorec/gorec/embedding"
)

// The files of a model checkpoint besides the tables and the caller's: the dense state, and in
// a training checkpoint the optimizer's state and the random generator's.
const (
	denseFile     = "dense"
	optimizerFile = "optimizer"
	rngFile       = "rng"
)

var reservedFiles = map[string]string{denseFile: "the model's dense state",
	optimizerFile: "the optimizer's state", rngFile: "the random generator's state"}

// TableModule is implemented by modules that hold embedding tables (Embedding, EmbeddingBag,
// EmbeddingBagCollection); a model's own module holding tables implements it to have them
// checkpointed.
type TableModule interface {
	Tables() []*embedding.Table
}

// Tables returns the Embedding's table when it is an *embedding.Table (a sharded table is
// not in a model checkpoint of this package).
func (e *Embedding) Tables() []*embedding.Table { return localTables(e.Table) }

// Tables returns the EmbeddingBag's table when it is an *embedding.Table.
func (b *EmbeddingBag) Tables() []*embedding.Table { return localTables(b.Table) }

func localTables(t EmbeddingTable) []*embedding.Table {
	if lt, ok := t.(*embedding.Table); ok {
		return []*embedding.Table{lt}
	}
	return nil
}

// Tables returns the embedding tables of m and of its descendants (TableModule, through
// Children), each once, in module order.
func Tables(m Module) []*embedding.Table {
	var out []*embedding.Table
	seen := map[string]bool{}
	walkModules(m, func(m Module) {
		if tm, ok := m.(TableModule); ok {
			for _, t := range tm.Tables() {
				if t != nil && !seen[t.Name()] {
					seen[t.Name()] = true
					out = append(out, t)
				}
			}
		}
	})
	return out
}

// walkModules calls f on m and on each of its descendants (through Children), in module order.
func walkModules(m Module, f func(Module)) {
	f(m)
	if c, ok := m.(interface{ Children() []NamedModule }); ok {
		for _, ch := range c.Children() {
			walkModules(ch.Module, f)
		}
	}
}

// checkLocalTables refuses a model whose Embedding or EmbeddingBag looks up in a table that a
// model checkpoint cannot hold (a dist.ShardedTable): saving the model without it would lose
// its rows, and loading would leave it as it was.
func checkLocalTables(op string, m Module) error {
	var err error
	walkModules(m, func(m Module) {
		for _, t := range LookupTables(m) {
			if _, local := t.(*embedding.Table); !local && err == nil {
				err = badCheckpoint(op, "table %q is not in this process (%T): a model checkpoint cannot hold it; "+
					"checkpoint the model with dist.SaveCheckpoint", t.Name(), t)
			}
		}
	})
	return err
}

// SaveCheckpoint writes a checkpoint of the whole model to dir in one call: every embedding
// table of m (Tables: ids, rows, optimizer states, steps, configuration, metadata, admission
// counts) and its dense state (StateDict, as SaveState writes it), with embedding.SaveWith's
// crash safety: the previous checkpoint in dir stays loadable until the new one is complete.
// Save between training steps: the tables and the dense state are each consistent, not
// consistent with each other while other goroutines train. ctx stops the save as it stops
// embedding.Save (the previous checkpoint stays).
func SaveCheckpoint(ctx context.Context, dir string, m Module) error {
	return SaveCheckpointWith(ctx, dir, m, embedding.SaveOptions{})
}

// SaveCheckpointWith is SaveCheckpoint with embedding's save options: o.Staged copies each
// table into memory under its lock and writes the copy after, so training in other goroutines
// waits for the copy, not for the disk (the files are the same); o.Files adds files of the
// caller's own (a vocabulary, the data reader's position), read back by LoadCheckpointWith.
// "dense", "optimizer" and "rng" are the checkpoint's own: a file of such a name is
// ErrBadInput.
func SaveCheckpointWith(ctx context.Context, dir string, m Module, o embedding.SaveOptions) error {
	return saveModel(ctx, dir, m, nil, o)
}

func saveModel(ctx context.Context, dir string, m Module, opt *Optimizer, o embedding.SaveOptions) error {
	if err := checkLocalTables("save", m); err != nil {
		return err
	}
	files, err := withReserved("save", o.Files, savers(m, opt))
	if err != nil {
		return err
	}
	o.Files = files
	return embedding.SaveWithOptions(ctx, dir, Tables(m), o)
}

// LoadCheckpoint restores a checkpoint of SaveCheckpoint into m (its tables must match the
// saved ones in name, dim, optimizer and layout: embedding.ErrIncompatible otherwise; its
// dense state is loaded strictly, like LoadState). Everything is read and checked before
// anything changes: on error m is as it was, also when ctx stops the load (embedding.LoadInto).
func LoadCheckpoint(ctx context.Context, dir string, m Module) error {
	return LoadCheckpointWith(ctx, dir, m, nil)
}

// LoadCheckpointWith is LoadCheckpoint that also reads the caller's files saved with
// SaveCheckpointWith (each must be in the checkpoint: embedding.ErrIncompatible otherwise).
// The tables, the dense state and the caller's files are all read and checked before anything
// changes, so on error m is as it was (a file function that ran has seen its file); then the
// tables are swapped in and the dense state copied in.
func LoadCheckpointWith(ctx context.Context, dir string, m Module, files map[string]func(io.Reader) error) error {
	return loadModel(ctx, dir, m, nil, files)
}

func loadModel(ctx context.Context, dir string, m Module, opt *Optimizer, files map[string]func(io.Reader) error) error {
	if err := checkLocalTables("load", m); err != nil {
		return err
	}
	var read modelReads
	defer read.close()
	all, err := withReserved("load", files, read.readers(m, opt))
	if err != nil {
		return err
	}
	if err := embedding.LoadInto(ctx, dir, Tables(m), all); err != nil {
		return err
	}
	return read.apply()
}

// badCheckpoint is the ErrBadInput error of a checkpoint call (op "save" or "load").
func badCheckpoint(op, format string, args ...any) error {
	return &embedding.Error{Op: op, Kind: embedding.ErrBadInput, Err: fmt.Errorf(format, args...)}
}

// withReserved is the caller's files with the checkpoint's own added (a caller's file of such
// a name is ErrBadInput).
func withReserved[F any](op string, files map[string]F, own map[string]F) (map[string]F, error) {
	all := make(map[string]F, len(files)+len(own))
	for name, f := range files {
		if _, taken := reservedFiles[name]; taken {
			return nil, badCheckpoint(op, "the file name %q is the checkpoint's own (%s)", name, reservedFiles[name])
		}
		all[name] = f
	}
	for name, f := range own {
		all[name] = f
	}
	return all, nil
}
