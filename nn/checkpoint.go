package nn

import (
	"io"

	"github.com/gorec/gorec/embedding"
)

// denseFile is the name of the dense state in a model checkpoint.
const denseFile = "dense"

// TableModule is implemented by modules that hold embedding tables (Embedding, EmbeddingBag);
// a model's own module holding tables implements it to have them checkpointed.
type TableModule interface {
	Tables() []*embedding.Table
}

// Tables returns the Embedding's table.
func (e *Embedding) Tables() []*embedding.Table { return []*embedding.Table{e.Table} }

// Tables returns the EmbeddingBag's table.
func (b *EmbeddingBag) Tables() []*embedding.Table { return []*embedding.Table{b.Table} }

// Tables returns the embedding tables of m and of its descendants (TableModule, through
// Children), each once, in module order.
func Tables(m Module) []*embedding.Table {
	var out []*embedding.Table
	seen := map[string]bool{}
	var walk func(Module)
	walk = func(m Module) {
		if tm, ok := m.(TableModule); ok {
			for _, t := range tm.Tables() {
				if t != nil && !seen[t.Name()] {
					seen[t.Name()] = true
					out = append(out, t)
				}
			}
		}
		if c, ok := m.(interface{ Children() []NamedModule }); ok {
			for _, ch := range c.Children() {
				walk(ch.Module)
			}
		}
	}
	walk(m)
	return out
}

// SaveCheckpoint writes a checkpoint of the whole model to dir in one call: every embedding
// table of m (Tables: ids, rows, optimizer states, steps, configuration, metadata, admission
// counts) and its dense state (StateDict, as SaveState writes it), with embedding.SaveWith's
// crash safety: the previous checkpoint in dir stays loadable until the new one is complete.
// Save between training steps: the tables and the dense state are each consistent, not
// consistent with each other while other goroutines train.
func SaveCheckpoint(dir string, m Module) error {
	return embedding.SaveWith(dir, Tables(m), map[string]func(io.Writer) error{
		denseFile: func(w io.Writer) error { return SaveState(w, m) },
	})
}

// LoadCheckpoint restores a checkpoint of SaveCheckpoint into m (its tables must match the
// saved ones in name, dim, optimizer and layout: embedding.ErrIncompatible otherwise; its
// dense state is loaded strictly, like LoadState). Everything is read and checked before
// anything changes: on error m is as it was.
func LoadCheckpoint(dir string, m Module) error {
	return embedding.LoadInto(dir, Tables(m), map[string]func(io.Reader) error{
		denseFile: func(r io.Reader) error { return LoadState(r, m) },
	})
}
