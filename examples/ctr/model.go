package main

import (
	"errors"
	"fmt"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// DeepFM (Guo et al., 2017) over hash embedding tables: a first-order term (one weight per
// field value, from a shared dim-1 table keyed by field-tagged ids), FM's pairwise interactions
// of the fields' Dim-wide embeddings, and an MLP over their concatenation; the logit is the
// sum of the three. Each field has its own table, and one EmbeddingBagCollection looks up every
// table for a batch (TorchRec's way): 12 features over 7 tables, each single-valued field a sum
// bag of one id (its row), the tags a mean bag, and the first-order table serving all six
// fields.
type DeepFM struct {
	nn.Container
	bags   *nn.EmbeddingBagCollection // the features of featureNames
	mlp    *nn.Sequential
	dim    int64
	device cgotorch.Device
	tables []Table
}

// Table is what the model keeps of each of its tables: an *embedding.Table in one process, a
// *dist.ShardedTable (whose calls are collective) in a distributed run.
type Table interface {
	nn.EmbeddingTable
	Read(ids *cgotorch.Tensor) (rows, found *cgotorch.Tensor, err error)
	Close() error
}

// NewTable creates a table of the model; LocalTable is the one of a single process.
type NewTable func(name string, cfg embedding.Config) (Table, error)

// LocalTable creates an unnamed embedding.Table in this process (nothing looks it up by name;
// a sharded table needs its name to agree across the ranks).
func LocalTable(_ string, cfg embedding.Config) (Table, error) { return embedding.New(cfg) }

// numTables is the number of field tables (the single-valued fields and the tags).
const numTables = numFields + 1

// tableNames name the field tables, then the first-order table.
var tableNames = append(fieldNames[:], "linear")

// NewDeepFM creates the model on device: its tables (made by newTable, names prefixed by prefix,
// with the sparse optimizer opt; each with its own seed, seed, seed+1, ..., so that id 42 of
// two fields starts apart), the collection that looks them up, and its MLP (built on the CPU,
// then moved).
func NewDeepFM(newTable NewTable, prefix string, dim int, hidden []int, opt embedding.Optimizer, seed uint64, device cgotorch.Device) (*DeepFM, error) {
	m := &DeepFM{dim: int64(dim), device: device}
	for _, name := range tableNames {
		d := dim
		if name == "linear" {
			d = 1
		}
		t, err := newTable(prefix+name, embedding.Config{
			Dim: d, Optimizer: opt, Seed: seed + uint64(len(m.tables)), Initializer: embedding.Normal{Std: 0.01}, Device: device,
		})
		if err != nil {
			return nil, errors.Join(err, m.Close())
		}
		m.tables = append(m.tables, t)
	}
	features := make([]nn.EmbeddingBagFeature, len(featureNames))
	for i, name := range featureNames {
		f := i % numTables
		t, mode := m.tables[f], embedding.Sum
		if i >= numTables {
			t = m.tables[numTables] // linear
		}
		if f == numFields {
			mode = embedding.Mean // the tags
		}
		features[i] = nn.EmbeddingBagFeature{Name: name, Table: t, Mode: mode}
	}
	bags, err := nn.NewEmbeddingBagCollection(features, nn.EmbeddingOptions{})
	if err != nil {
		return nil, errors.Join(err, m.Close())
	}
	m.bags = bags
	m.Add("bags", m.bags)

	m.mlp = nn.NewSequential()
	in := numTables * dim
	for _, h := range hidden {
		m.mlp.Append(nn.NewLinear(in, h, true)).Append(&nn.ReLU{})
		in = h
	}
	m.mlp.Append(nn.NewLinear(in, 1, true))
	m.Add("mlp", m.mlp)
	if err := nn.To(m.mlp, device, cgotorch.KeepDType); err != nil {
		return nil, errors.Join(err, m.Close())
	}
	return m, nil
}

// Logits returns the model's logits, float32 [B, 1], on its device.
func (m *DeepFM) Logits(b *Batch) (*nn.Tensor, error) {
	x, err := m.bags.Forward(b.KJT).To(m.device, cgotorch.KeepDType) // [B, numTables*dim + numTables]
	if err != nil {
		return nil, err
	}
	parts := x.Split([]int64{numTables * m.dim, numTables}, 1) // (one concatenation back)
	e := parts[0].Reshape(-1, numTables, m.dim)                // [B, F, dim]
	first := parts[1].SumDim([]int64{1}, true)
	sum := e.SumDim([]int64{1}, false)
	fm := sum.Square().Sub(e.Square().SumDim([]int64{1}, false)).SumDim([]int64{1}, true).MulScalar(0.5)
	deep := m.mlp.Forward(e.Flatten(1, 2))
	return first.Add(fm).Add(deep), nil
}

// TableStats returns the stats of each field table and of the first-order table, named (of
// the whole table when it is sharded).
func (m *DeepFM) TableStats() ([]string, []embedding.Stats, error) {
	stats := make([]embedding.Stats, len(m.tables))
	for i, t := range m.tables {
		st, err := t.Stats()
		if err != nil {
			return nil, nil, fmt.Errorf("stats of %s: %w", tableNames[i], err)
		}
		stats[i] = st
	}
	return tableNames, stats, nil
}

// Close closes the model's tables.
func (m *DeepFM) Close() error {
	var errs []error
	for _, t := range m.tables {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}
