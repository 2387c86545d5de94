package dist

// Several sharded tables trained together: their Steps in one exchange of gradients (StepAll,
// through nn.Optimizer.Step), their lookups fetched in one exchange (TrainStep).

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() {
	scenarios["joint-train"] = scenarioJointTrain
	scenarios["joint-bad"] = scenarioJointBad
}

// itemsConfig is the second table of the joint tests: another width and optimizer than the
// first (trainConfigs).
var itemsConfig = embedding.Config{Dim: 3, Seed: 43, Initializer: embedding.Normal{Std: 0.1}, Optimizer: embedding.SGD{LR: 0.02, Momentum: 0.5}}

// Training a model of two sharded tables (an Embedding of one, an EmbeddingBag of the other,
// of other widths and optimizers) on 2 ranks ends with the tables of one process trained on
// the whole batches (within the equivalence tolerance), and TrainStep's training equals the
// plain loop's bit for bit. The optimizer's Step runs 2 collectives for both tables (the
// gradients' all-to-all, the owners' verdicts), and TrainStep 2 more (the ids', the rows').
// A defect of the second table's gradient exchange (misrouted, lost or unsummed gradients)
// must make the comparison fail.
func TestShardedTablesStepTogether(t *testing.T) {
	for _, c := range []struct{ opt, fault string }{
		{"sgd", ""}, {"adagrad", ""}, {"sparseadam", ""},
		{"adagrad", "wrong-owner"}, {"adagrad", "lost-gradient"}, {"adagrad", "no-sum"},
	} {
		t.Run(c.opt+"/"+c.fault, func(t *testing.T) {
			res := runSharded(t, "joint-train", 2, time.Minute, "GOREC_SHARD_OPT="+c.opt, "GOREC_SHARD_FAULT="+c.fault)
			requirePassed(t, res)
			t.Log(res[0].output)
		})
	}
}

// jointModel looks up users (one id per sample) and items (a bag per sample) and projects the
// concatenated rows.
type jointModel struct {
	nn.Container
	users *nn.Embedding
	items *nn.EmbeddingBag
}

func newJointModel(users, items nn.EmbeddingTable) *jointModel {
	m := &jointModel{users: nn.NewEmbedding(users, nn.EmbeddingOptions{}), items: nn.NewEmbeddingBag(items, embedding.Sum, nn.EmbeddingOptions{})}
	m.Add("users", m.users)
	m.Add("items", m.items)
	return m
}

// loss is the squared error summed over samples (so that the ranks' gradients add up to the
// whole batch's).
func (m *jointModel) loss(samples []sample) (*cgotorch.Tensor, error) {
	ids, offs, one := sampleIDs(samples)
	ys := make([]float32, len(samples))
	for i, s := range samples {
		ys[i] = s.y
	}
	x := cgotorch.Cat([]*cgotorch.Tensor{m.users.Forward(cgotorch.MustFromSlice(one)),
		m.items.Forward(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offs))}, 1)
	proj := cgotorch.MustFromSlice([]float32{0.5, -1, 0.25, 2, 1, -0.5, 0.75}, trainDim+3, 1)
	return x.MM(proj).Sub(cgotorch.MustFromSlice(ys, int64(len(ys)), 1)).Square().Sum(), nil
}

// lookups are the model's lookups of samples, in the order loss runs them.
func (m *jointModel) lookups(samples []sample) []Prefetch {
	ids, _, one := sampleIDs(samples)
	return []Prefetch{{Table: m.users.Table.(*ShardedTable), IDs: cgotorch.MustFromSlice(one)},
		{Table: m.items.Table.(*ShardedTable), IDs: cgotorch.MustFromSlice(ids)}}
}

// jointTrain trains a jointModel over users and items for trainSteps steps on this rank's
// slices of the global batches, through TrainStep (fetched) or the plain loop; g (nil: local
// tables) checks how many collectives each step runs.
func jointTrain(g *Group, users, items nn.EmbeddingTable, rank, world int, fetched bool) error {
	m := newJointModel(users, items)
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		return err
	}
	per := trainBatch / world
	for step := 0; step < trainSteps; step++ {
		b := globalBatch(step)[rank*per : (rank+1)*per]
		var calls int64
		if fetched {
			calls = collectivesOf(g, func() error { _, err := TrainStep(opt, m.lookups, m.loss, b); return err }, &err)
		} else {
			opt.ZeroGrad()
			if err = cgotorch.TryWithScope(func() error { l, err := m.loss(b); l.Backward(); return err }); err == nil {
				calls = collectivesOf(g, opt.Step, &err)
			}
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if want := int64(2 + 2*boolInt(fetched)); g != nil && calls != want {
			return fmt.Errorf("step %d ran %d collectives, want %d", step, calls, want)
		}
	}
	return nil
}

// collectivesOf runs f, sets *err to its error and returns how many collectives it ran on g
// (0 when g is nil).
func collectivesOf(g *Group, f func() error, err *error) int64 {
	if g == nil {
		*err = f()
		return 0
	}
	before := g.Collectives()
	*err = f()
	return g.Collectives() - before
}

// scenarioJointTrain trains the joint model on sharded tables with the plain loop, then on
// fresh ones through TrainStep, and on local tables in one process on the whole batches, and
// compares them ($GOREC_SHARD_FAULT: a defect of the items table, which must be caught).
func scenarioJointTrain(o Options) error {
	cfg, ok := trainConfigs[os.Getenv("GOREC_SHARD_OPT")]
	defect, fok := faults[os.Getenv("GOREC_SHARD_FAULT")]
	if !ok || !fok {
		return fmt.Errorf("bad $GOREC_SHARD_OPT or $GOREC_SHARD_FAULT")
	}
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	var tables []*ShardedTable
	defer func() {
		for _, t := range tables {
			t.Close()
		}
	}()
	for _, name := range []string{"users", "items", "users-fetched", "items-fetched"} {
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
	tables[1].fault = defect
	refUsers, err := embedding.NewNamed("ref-users", cfg)
	if err != nil {
		return err
	}
	defer refUsers.Close()
	refItems, err := embedding.NewNamed("ref-items", itemsConfig)
	if err != nil {
		return err
	}
	defer refItems.Close()
	r, w := g.Rank(), g.WorldSize()
	if err := jointTrain(g, tables[0], tables[1], r, w, false); err != nil {
		return fmt.Errorf("plain loop: %w", err)
	}
	if err := jointTrain(nil, refUsers, refItems, 0, 1, false); err != nil {
		return fmt.Errorf("one process: %w", err)
	}
	worstUsers, errUsers := against(tables[0], refUsers)
	worstItems, errItems := against(tables[1], refItems)
	fmt.Printf("rank %d: against one process: users %.3g (%v), items %.3g (%v) of the tolerance\n", r, worstUsers, errUsers, worstItems, errItems)
	if defect != noFault {
		if errItems == nil {
			return fmt.Errorf("the defect %q went unnoticed", os.Getenv("GOREC_SHARD_FAULT"))
		}
		return nil
	}
	if err := errors.Join(errUsers, errItems); err != nil {
		return err
	}
	if err := jointTrain(g, tables[2], tables[3], r, w, true); err != nil {
		return fmt.Errorf("TrainStep: %w", err)
	}
	for k := range 2 {
		if err := sameExports(tables[k+2], tables[k]); err != nil {
			return fmt.Errorf("TrainStep against the plain loop: table %q: %w", tables[k].name, err)
		}
	}
	return nil
}

// sameExports compares two sharded tables' exports bit for bit.
func sameExports(a, b *ShardedTable) error {
	x, err := a.Export()
	if err != nil {
		return err
	}
	defer x.Close()
	y, err := b.Export()
	if err != nil {
		return err
	}
	defer y.Close()
	return identicalSnapshots(x, y)
}

// Stepping several sharded tables together keeps each table's own Step semantics, and the ranks
// must step the same tables: a NaN in one table's pending gradients on rank 1 refuses that
// table on every rank (ErrBadInput there, ErrMismatch on rank 0; its shards unchanged, its
// gradients still pending) while the other table steps; ranks that pass other tables, or the
// same in another order, fail alike with ErrMismatch and change nothing; and the group still
// works after both.
func TestShardedTablesStepTogetherRefusals(t *testing.T) {
	requirePassed(t, runSharded(t, "joint-bad", 2, time.Minute))
}

func scenarioJointBad(o Options) error { return withPair(o, jointBad) }

func jointBad(g *Group, users, items *ShardedTable) error {
	m := newJointModel(users, items)
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		return err
	}
	bad := g.Rank() == 1
	// gradients for both tables, a NaN among the users' on rank 1
	pend := func(nan bool) error {
		opt.ZeroGrad()
		return cgotorch.Try(func() {
			scale := 1.0
			if nan {
				scale = math.NaN()
			}
			u := m.users.Forward(cgotorch.MustFromSlice([]int64{1006, 1012, 1018}))
			i := m.items.Forward(cgotorch.MustFromSlice([]int64{1024, 1030}), cgotorch.MustFromSlice([]int64{0}))
			u.Sum().MulScalar(scale).Add(i.Sum()).Backward()
		})
	}
	if err := pend(bad); err != nil {
		return err
	}
	before, err := shardState(users)
	if err != nil {
		return err
	}
	err = opt.Step()
	switch {
	case bad && (!errors.Is(err, embedding.ErrBadInput) || errors.Is(err, ErrMismatch)):
		return fmt.Errorf("NaN on this rank: %v, want ErrBadInput alone", err)
	case !bad && (!errors.Is(err, ErrMismatch) || errors.Is(err, embedding.ErrBadInput)):
		return fmt.Errorf("NaN on rank 1: %v, want ErrMismatch alone", err)
	}
	fmt.Printf("rank %d: a NaN in one table: %v\n", g.Rank(), err)
	if err := steps(users, 0, items, 1); err != nil {
		return err
	}
	if after, err := shardState(users); err != nil || after != before {
		return fmt.Errorf("the refused table's shard changed (%v)", err)
	}
	if ids, grads, err := users.cache.PendingGrad(); err != nil || ids.Numel() == 0 {
		return fmt.Errorf("the refused table's gradients are no longer pending (%v)", err)
	} else {
		ids.Close()
		grads.Close()
	}
	// other tables, or another order, on rank 1
	if err := pend(false); err != nil {
		return err
	}
	for _, other := range [][]*ShardedTable{{items, users}, {users}} {
		order := []*ShardedTable{users, items}
		if bad {
			order = other
		}
		err := StepAll(order)
		if !errors.Is(err, ErrMismatch) {
			return fmt.Errorf("ranks stepping other tables: %v, want ErrMismatch", err)
		}
		fmt.Printf("rank %d: other tables: %v\n", g.Rank(), err)
		if err := steps(users, 0, items, 1); err != nil {
			return err
		}
	}
	if err := StepAll([]*ShardedTable{users, items, users}); err != nil { // the group still works
		return err
	}
	return steps(users, 1, items, 2)
}

// steps checks the step counts of two sharded tables.
func steps(a *ShardedTable, na int64, b *ShardedTable, nb int64) error {
	for _, c := range []struct {
		t *ShardedTable
		n int64
	}{{a, na}, {b, nb}} {
		st, err := c.t.Stats()
		if err != nil {
			return err
		}
		if st.Step != c.n {
			return fmt.Errorf("table %q took %d steps, want %d", c.t.name, st.Step, c.n)
		}
	}
	return nil
}
