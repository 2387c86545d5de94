package dist

// An nn.EmbeddingBagCollection and an nn.EmbeddingCollection over sharded tables: every
// feature's rows fetched in one exchange, the tables stepped in one.

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() {
	scenarios["bags-train"] = scenarioBagsTrain
}

// bagsModel looks up three features through one collection: the user (one id, table users),
// the history (a bag, mean) and the candidate (the history's last id) of table items; pooled
// (bags) or not (seq: each row then projected on its own).
type bagsModel struct {
	nn.Container
	bags *nn.EmbeddingBagCollection
	seq  *nn.EmbeddingCollection
}

// bagsPadding is the collection's padding id, among the ids the batches draw.
var bagsPadding = trainID(5)

func newBagsModel(users, items nn.EmbeddingTable, seq bool) (*bagsModel, error) {
	opts := nn.EmbeddingOptions{Padding: true, PaddingID: bagsPadding}
	m := &bagsModel{}
	var err error
	if seq {
		m.seq, err = nn.NewEmbeddingCollection([]nn.EmbeddingFeature{
			{Name: "user", Table: users}, {Name: "history", Table: items}, {Name: "candidate", Table: items}}, opts)
		m.Add("seq", m.seq)
	} else {
		m.bags, err = nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{
			{Name: "user", Table: users, Mode: embedding.Sum},
			{Name: "history", Table: items, Mode: embedding.Mean},
			{Name: "candidate", Table: items, Mode: embedding.Sum},
		}, opts)
		m.Add("bags", m.bags)
	}
	return m, err
}

func (m *bagsModel) collection() nn.Collection {
	if m.seq != nil {
		return m.seq
	}
	return m.bags
}

// forward is the collection's output: the pooled [B, 10], or the three features' rows.
func (m *bagsModel) forward(in nn.KeyedJagged) []*cgotorch.Tensor {
	if m.seq != nil {
		return m.seq.Forward(in)
	}
	return []*cgotorch.Tensor{m.bags.Forward(in)}
}

// bagsInput is samples' input, its keys in another order than the features.
func bagsInput(samples []sample) nn.KeyedJagged {
	var cand, user, hist []int64
	lengths := make([]int64, 2*len(samples)) // candidate, user: one id a bag
	for _, s := range samples {
		cand = append(cand, s.bag[len(s.bag)-1])
		user = append(user, s.one)
		hist = append(hist, s.bag...)
		lengths = append(lengths, int64(len(s.bag)))
	}
	for i := range 2 * len(samples) {
		lengths[i] = 1
	}
	ids := append(append(cand, user...), hist...)
	return nn.KeyedJagged{Keys: []string{"candidate", "user", "history"},
		Values: cgotorch.MustFromSlice(ids), Lengths: cgotorch.MustFromSlice(lengths)}
}

// loss is the squared error of the pooled features' projection, summed over samples; without
// pooling, that of each row's projection against 0.5, summed over the rows.
func (m *bagsModel) loss(samples []sample) (*cgotorch.Tensor, error) {
	proj := []float32{0.5, -1, 0.25, 2, 1, -0.5, 0.75, -0.25, 0.5, 1.5}
	outs := m.forward(bagsInput(samples))
	if m.seq != nil {
		var l *cgotorch.Tensor
		for f, at := range [][2]int{{0, 4}, {4, 7}, {7, 10}} {
			p := cgotorch.MustFromSlice(proj[at[0]:at[1]], int64(at[1]-at[0]), 1)
			e := outs[f].MM(p).SubScalar(0.5).Square().Sum()
			if l == nil {
				l = e
			} else {
				l = l.Add(e)
			}
		}
		return l, nil
	}
	ys := make([]float32, len(samples))
	for i, s := range samples {
		ys[i] = s.y
	}
	x := outs[0].MM(cgotorch.MustFromSlice(proj, trainDim+6, 1))
	return x.Sub(cgotorch.MustFromSlice(ys, int64(len(ys)), 1)).Square().Sum(), nil
}

func (m *bagsModel) lookups(samples []sample) []Prefetch {
	p, err := CollectionPrefetches(m.collection(), bagsInput(samples))
	if err != nil {
		panic(err)
	}
	return p
}

// bagsTrainMode is how bagsTrain trains: the plain loop, TrainStep or a TrainPipeline.
type bagsTrainMode int

const (
	bagsPlain bagsTrainMode = iota
	bagsTrainStep
	bagsPipeline
)

// bagsTrain trains a bagsModel (seq: unpooled) over users and items for trainSteps steps on
// this rank's slices of the global batches; g (nil: local tables) checks that a plain step runs
// 4 collectives for both tables and all three features (2 to fetch the rows, 2 to step), and a
// TrainStep as many.
func bagsTrain(g *Group, users, items nn.EmbeddingTable, rank, world int, mode bagsTrainMode, seq bool) error {
	m, err := newBagsModel(users, items, seq)
	if err != nil {
		return err
	}
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		return err
	}
	per := trainBatch / world
	slice := func(step int) []sample { return globalBatch(step)[rank*per : (rank+1)*per] }
	if mode == bagsPipeline {
		p, err := NewTrainPipeline(opt, m.lookups, m.loss, TrainPipelineOptions{})
		if err != nil {
			return err
		}
		for step := 0; step < trainSteps; step++ {
			if _, _, err := p.Progress(slice(step)); err != nil {
				return err
			}
		}
		_, _, err = p.Flush()
		return err
	}
	for step := 0; step < trainSteps; step++ {
		b := slice(step)
		calls := collectivesOf(g, func() error {
			if mode == bagsTrainStep {
				_, err := TrainStep(opt, m.lookups, m.loss, b)
				return err
			}
			opt.ZeroGrad()
			if err := cgotorch.TryWithScope(func() error { l, err := m.loss(b); l.Backward(); return err }); err != nil {
				return err
			}
			return opt.Step()
		}, &err)
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if g != nil && calls != 4 {
			return fmt.Errorf("step %d ran %d collectives, want 4", step, calls)
		}
	}
	return nil
}

// Training a collection of three features over two sharded tables on 2 ranks, pooled (an
// EmbeddingBagCollection) or not (an EmbeddingCollection), ends with the tables of one process
// trained on the whole batches (within the equivalence tolerance); TrainStep and TrainPipeline
// (with CollectionPrefetches) train as the plain loop does, bit for bit; an evaluation lookup
// gives one process's output and inserts nothing.
func TestShardedCollections(t *testing.T) {
	for _, kind := range []string{"bags", "seq"} {
		for _, opt := range []string{"sgd", "adagrad", "sparseadam"} {
			t.Run(kind+"/"+opt, func(t *testing.T) {
				res := runSharded(t, "bags-train", 2, time.Minute, "GOREC_SHARD_OPT="+opt, "GOREC_SHARD_COLLECTION="+kind)
				requirePassed(t, res)
				t.Log(res[0].output)
			})
		}
	}
}

func scenarioBagsTrain(o Options) error {
	cfg, ok := trainConfigs[os.Getenv("GOREC_SHARD_OPT")]
	if !ok {
		return fmt.Errorf("bad $GOREC_SHARD_OPT")
	}
	seq := os.Getenv("GOREC_SHARD_COLLECTION") == "seq"
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	var tables []*ShardedTable // users, items of the plain loop, TrainStep, the pipeline
	defer func() {
		for _, t := range tables {
			t.Close()
		}
	}()
	for _, name := range []string{"users", "items", "users-step", "items-step", "users-pipe", "items-pipe"} {
		c := cfg
		if name[0] == 'i' {
			c = itemsConfig
		}
		t, err := NewShardedTable(g, name, c)
		if err != nil {
			return err
		}
		tables = append(tables, t)
	}
	var refs []*embedding.Table
	defer func() {
		for _, t := range refs {
			t.Close()
		}
	}()
	for _, c := range []embedding.Config{cfg, itemsConfig} {
		t, err := embedding.New(c)
		if err != nil {
			return err
		}
		refs = append(refs, t)
	}
	r, w := g.Rank(), g.WorldSize()
	if err := bagsTrain(g, tables[0], tables[1], r, w, bagsPlain, seq); err != nil {
		return fmt.Errorf("plain loop: %w", err)
	}
	if err := bagsTrain(nil, refs[0], refs[1], 0, 1, bagsPlain, seq); err != nil {
		return fmt.Errorf("one process: %w", err)
	}
	for k := range 2 {
		worst, err := against(tables[k], refs[k])
		fmt.Printf("rank %d: table %q against one process: %.3g of the tolerance\n", r, tables[k].name, worst)
		if err != nil {
			return fmt.Errorf("table %q against one process: %w", tables[k].name, err)
		}
	}
	for i, mode := range []bagsTrainMode{bagsTrainStep, bagsPipeline} {
		a, b := tables[2+2*i], tables[3+2*i]
		if err := bagsTrain(g, a, b, r, w, mode, seq); err != nil {
			return fmt.Errorf("mode %d: %w", mode, err)
		}
		for k, t := range []*ShardedTable{a, b} {
			if err := sameExports(t, tables[k]); err != nil {
				return fmt.Errorf("mode %d against the plain loop: table %q: %w", mode, t.name, err)
			}
		}
	}
	return bagsEval(g, tables[:2], refs, seq)
}

// bagsEval checks an evaluation lookup of the collection over sharded tables against the
// same over local ones, on a batch of seen and unseen ids: the same output (within the
// equivalence tolerance), 2 collectives, and no id inserted.
func bagsEval(g *Group, tables []*ShardedTable, refs []*embedding.Table, seq bool) error {
	sharded, err := newBagsModel(tables[0], tables[1], seq)
	if err != nil {
		return err
	}
	local, err := newBagsModel(refs[0], refs[1], seq)
	if err != nil {
		return err
	}
	sharded.Train(false)
	local.Train(false)
	samples := globalBatch(99)
	for i := range samples {
		samples[i].bag = append(samples[i].bag, trainID(40+i)) // unseen: the candidate too
	}
	before := [2]int{}
	for k, t := range tables {
		if before[k], err = t.Len(); err != nil {
			return err
		}
	}
	return cgotorch.TryWithScope(func() error {
		var got []*cgotorch.Tensor
		calls := collectivesOf(g, func() error {
			return cgotorch.Try(func() { got = sharded.forward(bagsInput(samples)) })
		}, &err)
		if err != nil {
			return err
		}
		if calls != 2 {
			return fmt.Errorf("an evaluation lookup ran %d collectives, want 2", calls)
		}
		want := local.forward(bagsInput(samples))
		for i := range want {
			if got[i].RequiresGrad() {
				return errors.New("an evaluation lookup requires a gradient")
			}
			gv, _ := cgotorch.ToSlice[float32](got[i])
			wv, _ := cgotorch.ToSlice[float32](want[i])
			worst, err := closeValues(fmt.Sprint("output ", i), gv, wv)
			fmt.Printf("rank %d: evaluation against one process: %.3g of the tolerance\n", g.Rank(), worst)
			if err != nil {
				return fmt.Errorf("evaluation: %w", err)
			}
		}
		for k, t := range tables {
			if n, err := t.Len(); err != nil || n != before[k] {
				return fmt.Errorf("table %q holds %d ids after an evaluation lookup, %d before (%v)", t.name, n, before[k], err)
			}
		}
		return nil
	})
}

// withPair runs f on a group made from o and its sharded tables "users" (Adagrad) and "items"
// (itemsConfig), closed after.
func withPair(o Options, f func(g *Group, users, items *ShardedTable) error) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	users, err := NewShardedTable(g, "users", trainConfigs["adagrad"])
	if err != nil {
		return err
	}
	defer users.Close()
	items, err := NewShardedTable(g, "items", itemsConfig)
	if err != nil {
		return err
	}
	defer items.Close()
	return f(g, users, items)
}

// shardedPair returns two sharded tables of g (prefix+"users" and prefix+"items") closed at
// the test's end.
func shardedPair(t *testing.T, g *Group, prefix string) (users, items *ShardedTable) {
	t.Helper()
	var ts [2]*ShardedTable
	for k, c := range []embedding.Config{trainConfigs["adagrad"], itemsConfig} {
		st, err := NewShardedTable(g, prefix+[]string{"users", "items"}[k], c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		ts[k] = st
	}
	return ts[0], ts[1]
}

// A collection's tables are all local or all sharded tables of one group; the sharded ones (of
// either collection) are in a model's distributed checkpoint, and refused by a model checkpoint
// of package nn.
func TestShardedBagCollectionTables(t *testing.T) {
	g := oneRank(t)
	users, items := shardedPair(t, g, "")
	other, _ := shardedPair(t, oneRank(t), "other-")
	local, err := embedding.New(itemsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	for _, pair := range [][2]nn.EmbeddingTable{{users, local}, {local, users}, {users, other}} {
		_, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{{Name: "a", Table: pair[0]}, {Name: "b", Table: pair[1]}}, nn.EmbeddingOptions{})
		if !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("a collection over %T and %T: %v, want ErrInvalidArgument", pair[0], pair[1], err)
		}
	}
	for _, seq := range []bool{false, true} {
		m, err := newBagsModel(users, items, seq)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := modelTables(g, m); err != nil || len(got) != 2 || got[0] != users || got[1] != items {
			t.Errorf("unpooled %v: modelTables: %v (%v), want users and items", seq, got, err)
		}
		if err := nn.SaveCheckpoint(t.Context(), t.TempDir(), m); !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("unpooled %v: nn.SaveCheckpoint of sharded tables: %v, want ErrBadInput", seq, err)
		}
	}
}

// Bad input to a collection over sharded tables is refused before anything moves, inserts
// nothing, and the next lookup works; CollectionPrefetches refuses what Forward would, in the
// lookups it returns: TrainStep fails with them.
func TestShardedBagCollectionBadInput(t *testing.T) {
	g := oneRank(t)
	users, items := shardedPair(t, g, "")
	m, err := newBagsModel(users, items, false)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	noLoss := func(nn.KeyedJagged) (*cgotorch.Tensor, error) { return nil, errors.New("the loss ran") }
	good := bagsInput(globalBatch(0))
	lengths, _ := cgotorch.ToSlice[int64](good.Lengths)
	lengths[len(lengths)-1]++ // one id more than the values hold
	for name, in := range map[string]nn.KeyedJagged{
		"lengths":     {Keys: good.Keys, Values: good.Values, Lengths: cgotorch.MustFromSlice(lengths)},
		"no key":      {Keys: []string{"candidate", "user", "other"}, Values: good.Values, Lengths: good.Lengths},
		"float ids":   {Keys: good.Keys, Values: cgotorch.MustFromSlice([]float32{1, 2, 3}), Lengths: good.Lengths},
		"no bounds":   {Keys: good.Keys, Values: good.Values},
		"both bounds": {Keys: good.Keys, Values: good.Values, Lengths: good.Lengths, Offsets: good.Lengths},
		"weights":     {Keys: good.Keys, Values: good.Values, Lengths: good.Lengths, Weights: cgotorch.MustFromSlice([]float32{1})},
	} {
		err := cgotorch.Try(func() { m.bags.Forward(in) })
		if !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: Forward: %v, want ErrInvalidArgument", name, err)
		}
		lookups, err := CollectionPrefetches(m.bags, in)
		if err != nil || len(lookups) != 2 {
			t.Errorf("%s: CollectionPrefetches: %d lookups, %v; want one per table and the refusal in them", name, len(lookups), err)
		} else if _, err := TrainStep(opt, func(nn.KeyedJagged) []Prefetch { return lookups }, noLoss, in); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: TrainStep with CollectionPrefetches' lookups: %v, want ErrInvalidArgument", name, err)
		}
		for _, st := range []*ShardedTable{users, items} {
			if n, err := st.Len(); err != nil || n != 0 {
				t.Fatalf("%s: table %q holds %d ids (%v)", name, st.name, n, err)
			}
		}
	}
	if err := cgotorch.Try(func() { m.bags.Forward(good) }); err != nil {
		t.Fatal(err)
	}
	if n, err := items.Len(); err != nil || n == 0 {
		t.Fatalf("items hold %d ids after a good lookup (%v)", n, err)
	}
}

// An optimizer steps a collection's sharded tables together with an Embedding's of the same
// group: one exchange of gradients and one of verdicts for all of them, each table once.
func TestOptimizerStepsCollectionWithTables(t *testing.T) {
	g := oneRank(t)
	users, items := shardedPair(t, g, "")
	bags, err := nn.NewEmbeddingBagCollection([]nn.EmbeddingBagFeature{{Name: "history", Table: items}, {Name: "user", Table: users}}, nn.EmbeddingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one := nn.NewEmbedding(users, nn.EmbeddingOptions{})
	m := &nn.Container{}
	m.Add("one", one)
	m.Add("bags", bags)
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = cgotorch.TryWithScope(func() error {
		in := nn.KeyedJagged{Keys: []string{"history", "user"}, Values: cgotorch.MustFromSlice([]int64{1006, 1012, 1018}),
			Lengths: cgotorch.MustFromSlice([]int64{2, 1})}
		bags.Forward(in).Sum().Add(one.Forward(cgotorch.MustFromSlice([]int64{1024})).Sum()).Backward()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls := collectivesOf(g, opt.Step, &err); err != nil || calls != 2 {
		t.Fatalf("Step ran %d collectives (%v), want 2", calls, err)
	}
	if err := steps(users, 1, items, 1); err != nil {
		t.Fatal(err)
	}
}

// A collection over sharded tables pools the same bags given by offsets as by lengths.
func TestShardedBagCollectionOffsets(t *testing.T) {
	g := oneRank(t)
	users, items := shardedPair(t, g, "")
	m, err := newBagsModel(users, items, false)
	if err != nil {
		t.Fatal(err)
	}
	byLengths := bagsInput(globalBatch(3))
	lengths, _ := cgotorch.ToSlice[int64](byLengths.Lengths)
	offsets := []int64{0}
	for _, l := range lengths {
		offsets = append(offsets, offsets[len(offsets)-1]+l)
	}
	byOffsets := byLengths
	byOffsets.Lengths, byOffsets.Offsets = nil, cgotorch.MustFromSlice(offsets)
	var a, b []float32
	err = cgotorch.TryWithScope(func() error {
		a, _ = cgotorch.ToSlice[float32](m.bags.Forward(byLengths))
		b, _ = cgotorch.ToSlice[float32](m.bags.Forward(byOffsets))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 12*(trainDim+6) || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("by offsets %v, by lengths %v", b, a)
	}
}
