package main

import (
	"errors"
	"fmt"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// Batch holds a batch of samples as tensors: IDs[f] int64 [B] for each single-valued field,
// the tags as a flat int64 [N] with offsets [B], the same ids tagged with their field for the
// shared first-order table (tagged), and the labels float32 [B, 1].
type Batch struct {
	IDs, Tagged      [numFields]*nn.Tensor
	Tags, TaggedTags *nn.Tensor
	Offs             *nn.Tensor
	Labels           *nn.Tensor
}

// NewBatch converts samples to tensors on device d (the ids too: a table looks them up on the
// host and returns rows on the ids' device).
func NewBatch(samples []Sample, d cgotorch.Device) (*Batch, error) {
	n := len(samples)
	var ids [numFields][]int64
	for f := range ids {
		ids[f] = make([]int64, n)
	}
	var tags, offs []int64
	labels := make([]float32, n)
	for i, s := range samples {
		for f := range ids {
			ids[f][i] = s.IDs[f]
		}
		offs = append(offs, int64(len(tags)))
		tags = append(tags, s.Tags...)
		if s.Click {
			labels[i] = 1
		}
	}
	b := &Batch{
		Tags:       cgotorch.MustFromSlice(tags),
		TaggedTags: cgotorch.MustFromSlice(tagged(tags, numFields)),
		Offs:       cgotorch.MustFromSlice(offs),
		Labels:     cgotorch.MustFromSlice(labels, int64(n), 1),
	}
	for f := range ids {
		b.IDs[f] = cgotorch.MustFromSlice(ids[f])
		b.Tagged[f] = cgotorch.MustFromSlice(tagged(ids[f], f))
	}
	if d.Type == cgotorch.DeviceCPU {
		return b, nil
	}
	ptrs := []**nn.Tensor{&b.Tags, &b.TaggedTags, &b.Offs, &b.Labels}
	for f := range b.IDs {
		ptrs = append(ptrs, &b.IDs[f], &b.Tagged[f])
	}
	for _, p := range ptrs {
		moved, err := (*p).To(d, cgotorch.KeepDType)
		if err != nil {
			return nil, err
		}
		*p = moved
	}
	return b, nil
}

// tagged returns ids with field's number in the high bits, which keeps the fields apart in the
// shared first-order table.
func tagged(ids []int64, field int) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(field+1)<<48 ^ id
	}
	return out
}

// DeepFM (Guo et al., 2017) over hash embedding tables: a first-order term (one weight per
// field value, from a shared dim-1 table keyed by field-tagged ids), FM's pairwise interactions
// of the fields' Dim-wide embeddings, and an MLP over their concatenation; the logit is the
// sum of the three. Each field has its own table; the tags field is an EmbeddingBag (mean).
type DeepFM struct {
	nn.Container
	fields    [numFields]*nn.Embedding
	tags      *nn.EmbeddingBag
	linear    *nn.Embedding    // first-order weights of the single-valued fields
	linearBag *nn.EmbeddingBag // first-order weights of the tags, in the same table
	mlp       *nn.Sequential
	tables    []Table
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

// NewDeepFM creates the model on device: its tables (made by newTable, names prefixed by prefix,
// with the sparse optimizer opt; each with its own seed, seed, seed+1, ..., so that id 42 of
// two fields starts apart) and its MLP (built on the CPU, then moved).
func NewDeepFM(newTable NewTable, prefix string, dim int, hidden []int, opt embedding.Optimizer, seed uint64, device cgotorch.Device) (*DeepFM, error) {
	m := &DeepFM{}
	table := func(name string, d int) (Table, error) {
		t, err := newTable(prefix+name, embedding.Config{
			Dim: d, Optimizer: opt, Seed: seed + uint64(len(m.tables)), Initializer: embedding.Normal{Std: 0.01}, Device: device,
		})
		if err == nil {
			m.tables = append(m.tables, t)
		}
		return t, err
	}
	for f := range m.fields {
		t, err := table(fieldNames[f], dim)
		if err != nil {
			return nil, errors.Join(err, m.Close())
		}
		m.fields[f] = nn.NewEmbedding(t, nn.EmbeddingOptions{})
		m.Add(fieldNames[f], m.fields[f])
	}
	t, err := table("tags", dim)
	if err != nil {
		return nil, errors.Join(err, m.Close())
	}
	m.tags = nn.NewEmbeddingBag(t, embedding.Mean, nn.EmbeddingOptions{})
	m.Add("tags", m.tags)
	if t, err = table("linear", 1); err != nil {
		return nil, errors.Join(err, m.Close())
	}
	m.linear = nn.NewEmbedding(t, nn.EmbeddingOptions{})
	m.linearBag = nn.NewEmbeddingBag(t, embedding.Mean, nn.EmbeddingOptions{})
	m.Add("linear", m.linear)
	m.Add("linear_bag", m.linearBag)

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

// Logits returns the model's logits, float32 [B, 1].
func (m *DeepFM) Logits(b *Batch) *nn.Tensor {
	embs := make([]*nn.Tensor, 0, numTables)
	first := make([]*nn.Tensor, 0, numTables)
	for f, e := range m.fields {
		embs = append(embs, e.Forward(b.IDs[f]))             // [B, dim]
		first = append(first, m.linear.Forward(b.Tagged[f])) // [B, 1]
	}
	embs = append(embs, m.tags.Forward(b.Tags, b.Offs))
	first = append(first, m.linearBag.Forward(b.TaggedTags, b.Offs))

	e := cgotorch.Stack(embs, 1) // [B, F, dim]
	sum := e.SumDim([]int64{1}, false)
	fm := sum.Square().Sub(e.Square().SumDim([]int64{1}, false)).SumDim([]int64{1}, true).MulScalar(0.5)
	deep := m.mlp.Forward(e.Flatten(1, 2))
	return cgotorch.Cat(first, 1).SumDim([]int64{1}, true).Add(fm).Add(deep)
}

// TableStats returns the stats of each field table and of the first-order table, named (of
// the whole table when it is sharded).
func (m *DeepFM) TableStats() ([]string, []embedding.Stats, error) {
	names := append(fieldNames[:numTables:numTables], "linear")
	stats := make([]embedding.Stats, len(m.tables))
	for i, t := range m.tables {
		st, err := t.Stats()
		if err != nil {
			return nil, nil, fmt.Errorf("stats of %s: %w", names[i], err)
		}
		stats[i] = st
	}
	return names, stats, nil
}

// Close closes the model's tables.
func (m *DeepFM) Close() error {
	var errs []error
	for _, t := range m.tables {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}
