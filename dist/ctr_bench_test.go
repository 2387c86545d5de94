package dist

// CTR training on 1 and 2 ranks with the same global batch: a DeepFM-like model (four id
// fields and a bag of tags, dim 16, an MLP) whose tables are local ("1-local") or sharded, its
// MLP then in a DataParallel. The tables are looked up by an Embedding per field and an
// EmbeddingBag, or by one EmbeddingBagCollection of the five features ("2-collection").

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() { scenarios["ctr-bench"] = scenarioCTRBench }

const (
	ctrBenchBatch = 1024 // the global batch
	ctrBenchDim   = 16
)

// ctrBenchIDs are the id spaces of the fields (Zipf ranks) and of the tags.
var ctrBenchIDs = [...]uint64{1_000_000, 200_000, 200, 24}

const ctrBenchTags = 1000

type ctrBenchModel struct {
	nn.Container
	fields []*nn.Embedding
	tags   *nn.EmbeddingBag
	bags   *nn.EmbeddingBagCollection // instead of fields and tags
	mlp    *nn.Sequential
	tables []nn.EmbeddingTable
}

// newCTRBenchModel makes the model over tables made by table, looked up by one collection
// (collection) or by a module per feature.
func newCTRBenchModel(table func(name string, cfg embedding.Config) (nn.EmbeddingTable, error), collection bool) (*ctrBenchModel, error) {
	cgotorch.ManualSeed(1)
	m := &ctrBenchModel{}
	cfg := embedding.Config{Dim: ctrBenchDim, Seed: 1, Initializer: embedding.Normal{Std: 0.01}, Optimizer: embedding.SparseAdam{LR: 0.01}}
	for f := 0; f <= len(ctrBenchIDs); f++ {
		t, err := table(fmt.Sprintf("ctr-bench-%d", f), cfg)
		if err != nil {
			return nil, errors.Join(err, m.close())
		}
		m.tables = append(m.tables, t)
		if collection {
			continue
		}
		if f < len(ctrBenchIDs) {
			m.fields = append(m.fields, nn.NewEmbedding(t, nn.EmbeddingOptions{}))
			m.Add(fmt.Sprint("field", f), m.fields[f])
		} else {
			m.tags = nn.NewEmbeddingBag(t, embedding.Mean, nn.EmbeddingOptions{})
			m.Add("tags", m.tags)
		}
	}
	if collection {
		var fs []nn.EmbeddingBagFeature
		for f, t := range m.tables {
			fs = append(fs, nn.EmbeddingBagFeature{Name: fmt.Sprint("f", f), Table: t, Mode: embedding.Mean})
		}
		bags, err := nn.NewEmbeddingBagCollection(fs, nn.EmbeddingOptions{})
		if err != nil {
			return nil, errors.Join(err, m.close())
		}
		m.bags = bags
		m.Add("bags", bags)
	}
	m.mlp = nn.NewSequential(nn.NewLinear(ctrBenchDim*(len(ctrBenchIDs)+1), 64, true), &nn.ReLU{},
		nn.NewLinear(64, 32, true), &nn.ReLU{}, nn.NewLinear(32, 1, true))
	m.Add("mlp", m.mlp)
	return m, nil
}

func (m *ctrBenchModel) close() error {
	var errs []error
	for _, t := range m.tables {
		if c, ok := t.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// ctrBenchBatchOf is samples [from, to) of the global batch of step: the same on every rank.
type ctrBenchBatchOf struct {
	ids        [len(ctrBenchIDs)]*cgotorch.Tensor
	tags, offs *cgotorch.Tensor
	labels     *cgotorch.Tensor
	kjt        nn.KeyedJagged // all of them, for the collection: a bag of one id per field
}

func newCTRBenchBatch(step, from, to int) *ctrBenchBatchOf {
	rng := rand.New(rand.NewPCG(uint64(step), 7))
	b := &ctrBenchBatchOf{}
	ids := make([][]int64, len(ctrBenchIDs))
	var tags, offs []int64
	labels := make([]float32, 0, to-from)
	zipf := make([]*rand.Zipf, len(ctrBenchIDs))
	for f, n := range ctrBenchIDs {
		zipf[f] = rand.NewZipf(rng, 1.1, 1, n-1)
	}
	for i := 0; i < ctrBenchBatch; i++ {
		var row [len(ctrBenchIDs)]int64
		for f := range row {
			row[f] = int64(zipf[f].Uint64()*0x9e3779b97f4a7c15>>2) ^ int64(f)
		}
		nt := 1 + rng.IntN(3)
		var t []int64
		for range nt {
			t = append(t, rng.Int64N(ctrBenchTags))
		}
		y := float32(rng.IntN(2))
		if i < from || i >= to {
			continue
		}
		for f := range row {
			ids[f] = append(ids[f], row[f])
		}
		offs = append(offs, int64(len(tags)))
		tags = append(tags, t...)
		labels = append(labels, y)
	}
	for f := range ids {
		b.ids[f] = cgotorch.MustFromSlice(ids[f])
	}
	b.tags, b.offs = cgotorch.MustFromSlice(tags), cgotorch.MustFromSlice(offs)
	b.labels = cgotorch.MustFromSlice(labels, int64(len(labels)), 1)
	var values, lengths []int64
	for f := range ids {
		values = append(values, ids[f]...)
		for range ids[f] {
			lengths = append(lengths, 1)
		}
	}
	for i, o := range offs {
		end := int64(len(tags))
		if i+1 < len(offs) {
			end = offs[i+1]
		}
		lengths = append(lengths, end-o)
	}
	b.kjt = nn.KeyedJagged{Keys: []string{"f0", "f1", "f2", "f3", "f4"},
		Values: cgotorch.MustFromSlice(append(values, tags...)), Lengths: cgotorch.MustFromSlice(lengths)}
	return b
}

// step trains on b.
func (m *ctrBenchModel) step(opt *nn.Optimizer, b *ctrBenchBatchOf) error {
	return cgotorch.TryWithScope(func() error {
		opt.ZeroGrad()
		m.loss(b).Backward()
		return opt.Step()
	})
}

// loss is the loss on b, summed over b and divided by the global batch size.
func (m *ctrBenchModel) loss(b *ctrBenchBatchOf) *cgotorch.Tensor {
	var x *cgotorch.Tensor
	if m.bags != nil {
		x = m.bags.Forward(b.kjt)
	} else {
		embs := make([]*cgotorch.Tensor, 0, len(m.fields)+1)
		for f, e := range m.fields {
			embs = append(embs, e.Forward(b.ids[f]))
		}
		x = cgotorch.Cat(append(embs, m.tags.Forward(b.tags, b.offs)), 1)
	}
	logits := m.mlp.Forward(x)
	return cgotorch.BCEWithLogitsLoss(logits, b.labels, cgotorch.ReduceSum).DivScalar(ctrBenchBatch)
}

// lookups are the sharded tables' lookups of b, in the order loss runs them (TrainPipeline).
func (m *ctrBenchModel) lookups(b *ctrBenchBatchOf) []Prefetch {
	out := make([]Prefetch, 0, len(m.tables))
	for f := range m.fields {
		out = append(out, Prefetch{Table: m.tables[f].(*ShardedTable), IDs: b.ids[f]})
	}
	return append(out, Prefetch{Table: m.tables[len(m.fields)].(*ShardedTable), IDs: b.tags})
}

// scenarioCTRBench trains the model $GOREC_DIST_BENCH_N steps after 3 of warm-up, each rank on
// its slice of every global batch, with local tables ($GOREC_CTR_MODE=local, one rank) or
// sharded ones (sharded; collection: looked up by one collection; pipelined: through a
// TrainPipeline; pipelined-fork: fetching on a fork of the group); rank 0 prints the time of a step
// and the bytes it sent per step.
func scenarioCTRBench(o Options) error {
	g, n, err := benchGroup(o, "GOREC_DIST_BENCH_N")
	if err != nil {
		return err
	}
	defer g.Close()
	local := os.Getenv("GOREC_CTR_MODE") == "local"
	m, err := newCTRBenchModel(func(name string, cfg embedding.Config) (nn.EmbeddingTable, error) {
		if local {
			return embedding.NewNamed(name, cfg)
		}
		return NewShardedTable(g, name, cfg)
	}, os.Getenv("GOREC_CTR_MODE") == "collection")
	if err != nil {
		return err
	}
	defer m.close()
	var opt *nn.Optimizer
	if local {
		opt, err = nn.NewAdam(m, nn.DefaultAdamOptions())
	} else {
		var ddp *DataParallel
		if ddp, err = NewDataParallel(g, m, DataParallelOptions{SumGradients: true}); err == nil {
			opt, err = nn.NewAdam(ddp, nn.DefaultAdamOptions())
		}
	}
	if err != nil {
		return err
	}
	r, w := g.Rank(), g.WorldSize()
	const warm = 3
	batches := make([]*ctrBenchBatchOf, warm+n)
	for k := range batches {
		batches[k] = newCTRBenchBatch(k, r*ctrBenchBatch/w, (r+1)*ctrBenchBatch/w)
	}
	var start time.Time
	var sent, fetchSent, calls, fetchCalls int64
	var fetchGroup *Group // pipelined-fork: the pipeline's fetch group
	train := func(b *ctrBenchBatchOf) error { return m.step(opt, b) }
	flush := func() error { return nil }
	if os.Getenv("GOREC_CTR_MODE") == "fused" {
		train = func(b *ctrBenchBatchOf) error {
			_, err := TrainStep(opt, m.lookups, func(b *ctrBenchBatchOf) (*cgotorch.Tensor, error) { return m.loss(b), nil }, b)
			return err
		}
	}
	if mode := os.Getenv("GOREC_CTR_MODE"); strings.HasPrefix(mode, "pipelined") { // Progress(batch k) trains batch k-1
		var po TrainPipelineOptions
		if mode == "pipelined-fork" {
			if po.FetchGroup, err = g.Fork("pipeline"); err != nil {
				return err
			}
			defer po.FetchGroup.Close()
			fetchGroup = po.FetchGroup
		}
		p, err := NewTrainPipeline(opt, m.lookups, func(b *ctrBenchBatchOf) (*cgotorch.Tensor, error) { return m.loss(b), nil }, po)
		if err != nil {
			return err
		}
		defer p.Close()
		train = func(b *ctrBenchBatchOf) error { _, _, err := p.Progress(b); return err }
		flush = func() error { _, _, err := p.Flush(); return err }
	}
	for k, b := range batches {
		if k == warm {
			start, sent, calls = time.Now(), g.BytesSent(), g.Collectives()
			if fetchGroup != nil {
				fetchSent, fetchCalls = fetchGroup.BytesSent(), fetchGroup.Collectives()
			}
		}
		if err := train(b); err != nil {
			return fmt.Errorf("step %d: %w", k, err)
		}
	}
	// n batches trained (pipelined: n fetched too)
	took, bytes, calls := time.Since(start), g.BytesSent()-sent, g.Collectives()-calls
	if fetchGroup != nil {
		bytes += fetchGroup.BytesSent() - fetchSent
		calls += fetchGroup.Collectives() - fetchCalls
	}
	if err := flush(); err != nil {
		return err
	}
	if r == 0 {
		fmt.Printf("bench-ns-per-op %d\nbytes-per-op %d\ncollectives-per-op %.2f\n", took.Nanoseconds()/int64(n), bytes/int64(n), float64(calls)/float64(n))
	}
	return nil
}

// BenchmarkCTRTrainRanks trains the CTR model on global batches of 1,024 samples: on one
// process with local tables (1-local), and with sharded tables and a DataParallel MLP on 1 and
// 2 local rank processes (2-fused: through TrainStep; 2-collection: the plain loop with the
// tables in one EmbeddingBagCollection; 2-pipelined: through a TrainPipeline;
// -fork: fetching on a fork of the group, concurrently with the Step), each rank on its slice
// of every batch. It reports the samples/s of the whole job, the time of a step, and the bytes
// a rank sends and the collectives it runs per step (b/step, collectives/step). The ranks share this machine's cores, so 2 ranks show the
// exchange's cost, not a speed-up.
func BenchmarkCTRTrainRanks(b *testing.B) {
	for _, c := range []struct {
		name  string
		world int
		mode  string
	}{{"1-local", 1, "local"}, {"1", 1, "sharded"}, {"2", 2, "sharded"},
		{"2-fused", 2, "fused"}, {"2-collection", 2, "collection"}, {"2-pipelined", 2, "pipelined"}, {"2-pipelined-fork", 2, "pipelined-fork"}} {
		b.Run(c.name, func(b *testing.B) {
			n := max(b.N, 20)
			out := rankOutput(b, "ctr-bench", c.world, time.Minute, []string{"GOREC_CTR_MODE=" + c.mode, "GOREC_DIST_BENCH_N=" + strconv.Itoa(n)})
			ns := benchNs(b, out, "bench-ns-per-op ")
			b.ReportMetric(ns, "ns/op")
			b.ReportMetric(ctrBenchBatch/(ns/1e9), "samples/s")
			b.ReportMetric(benchNs(b, out, "bytes-per-op "), "b/step")
			b.ReportMetric(benchNs(b, out, "collectives-per-op "), "collectives/step")
		})
	}
}
