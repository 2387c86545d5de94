package dist

// The sharded tables' scenarios a rank process runs (see ranks_test.go).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() {
	for name, f := range map[string]func(Options) error{
		"sharded-train":  scenarioShardedTrain,
		"sharded-init":   scenarioShardedInit,
		"sharded-ops":    scenarioShardedOps,
		"sharded-config": scenarioShardedConfig,
		"sharded-bad":    scenarioShardedBad,
		"sharded-killed": scenarioShardedKilled,
		"sharded-closed": scenarioShardedClosed,
		"sharded-save":   scenarioShardedSave,
		"sharded-load":   scenarioShardedLoad,
		"sharded-crash":  scenarioShardedCrash,
	} {
		scenarios[name] = f
	}
}

var faults = map[string]fault{"": noFault, "wrong-owner": faultWrongOwner, "lost-gradient": faultLostGradient, "no-sum": faultNoSum}

// scenarioShardedTrain trains the test model over a sharded table ($GOREC_SHARD_OPT's
// configuration) on this rank's slices of the global batches, and over a local table on the
// whole batches, and compares the tables. With $GOREC_SHARD_FAULT set, the sharded table has
// that defect, and the scenario fails unless the comparison catches it.
func scenarioShardedTrain(o Options) error {
	return withTrainTables(o, func(g *Group, st *ShardedTable, ref *embedding.Table) error {
		if err := train(st, g.Rank(), g.WorldSize()); err != nil {
			return err
		}
		if err := train(ref, 0, 1); err != nil {
			return err
		}
		if err := ownsItsIDs(st); err != nil && st.fault == noFault {
			return err
		}
		worst, err := against(st, ref)
		fmt.Printf("rank %d: against one process: worst difference %.3g of the tolerance, %v\n", g.Rank(), worst, err)
		if st.fault != noFault {
			if err == nil {
				return fmt.Errorf("the defect %q went unnoticed", os.Getenv("GOREC_SHARD_FAULT"))
			}
			return nil
		}
		return err
	})
}

// withTrainTables starts the group, makes a sharded table of $GOREC_SHARD_OPT's configuration
// with the defect $GOREC_SHARD_FAULT (none if empty) and a local table of that configuration,
// and runs f on them.
func withTrainTables(o Options, f func(g *Group, st *ShardedTable, ref *embedding.Table) error) error {
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
	st, err := NewShardedTable(g, "users", cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	st.fault = defect
	ref, err := embedding.NewNamed("reference", cfg)
	if err != nil {
		return err
	}
	defer ref.Close()
	return f(g, st, ref)
}

// ownsItsIDs checks that the rank's shard holds only ids that Owner gives it.
func ownsItsIDs(st *ShardedTable) error {
	snap, err := st.ExportShard()
	if err != nil {
		return err
	}
	defer snap.Close()
	ids, err := cgotorch.ToSlice[int64](snap.IDs)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if o := Owner(id, st.g.WorldSize()); o != st.g.Rank() {
			return fmt.Errorf("rank %d holds id %d of rank %d", st.g.Rank(), id, o)
		}
	}
	return nil
}

// initIDs are ids whose initial rows the init scenario compares: consecutive, strided,
// negative and large.
func initIDs() []int64 {
	var ids []int64
	for i := int64(-20); i < 200; i++ {
		ids = append(ids, i, i*64, i<<40)
	}
	return ids
}

// scenarioShardedInit compares the initial rows of a sharded table with a local table's
// (those of a 1-rank table), bit for bit, for every initializer kind.
func scenarioShardedInit(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	for i, init := range []embedding.Initializer{embedding.Normal{Std: 0.1}, embedding.Uniform{Low: -1, High: 1}, embedding.TruncatedNormal{Std: 1, Low: -2, High: 2}} {
		cfg := embedding.Config{Dim: 5, Seed: 1234, Initializer: init}
		if err := sameInitialRows(g, fmt.Sprint("init", i), cfg); err != nil {
			return fmt.Errorf("%#v: %w", init, err)
		}
	}
	// The default seed, derived from the table's name alike on every rank: the rows every rank
	// gets (from every owner) are those of a local table of this rank's shard's seed.
	if err := sameInitialRows(g, "init-default", embedding.Config{Dim: 5}); err != nil {
		return fmt.Errorf("default seed: %w", err)
	}
	return nil
}

func sameInitialRows(g *Group, name string, cfg embedding.Config) error {
	st, err := NewShardedTable(g, name, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if cfg.Seed == 0 {
		if cfg.Seed = st.shard.Config().Seed; cfg.Seed == 0 {
			return fmt.Errorf("the shard of %q kept seed 0", name)
		}
	}
	local, err := embedding.New(cfg)
	if err != nil {
		return err
	}
	defer local.Close()
	ids := cgotorch.MustFromSlice(initIDs())
	defer ids.Close()
	got, err := st.Lookup(ids)
	if err != nil {
		return err
	}
	defer got.Close()
	want, err := local.Lookup(ids)
	if err != nil {
		return err
	}
	defer want.Close()
	gv, _ := cgotorch.ToSlice[float32](got)
	wv, _ := cgotorch.ToSlice[float32](want)
	if len(gv) != len(wv) || len(gv) == 0 {
		return fmt.Errorf("%d values, want %d", len(gv), len(wv))
	}
	for i := range gv {
		if math.Float32bits(gv[i]) != math.Float32bits(wv[i]) {
			return fmt.Errorf("id %d: %v, want %v", initIDs()[i/cfg.Dim], gv[i], wv[i])
		}
	}
	if n, err := st.Len(); err != nil || n != local.Len() {
		return fmt.Errorf("len %d (%v), want %d", n, err, local.Len())
	}
	return ownsItsIDs(st)
}

// scenarioShardedOps checks Write, Read, Update, Delete, Len and Stats against a local table
// given the same calls: each rank writes and updates its own ids and some shared ones.
func scenarioShardedOps(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	cfg := embedding.Config{Dim: 3, Seed: 5, Optimizer: embedding.Adagrad{LR: 0.1}}
	st, err := NewShardedTable(g, "ops", cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	ref, err := embedding.NewNamed("ops-local", cfg)
	if err != nil {
		return err
	}
	defer ref.Close()
	r, w := g.Rank(), g.WorldSize()
	// rank q writes ids 10q..10q+4 and 100 (rank w-1's value of 100 wins), updates 10q+1 and 100
	for q := 0; q < w; q++ {
		ids := []int64{int64(10 * q), int64(10*q + 1), int64(10*q + 2), int64(10*q + 3), int64(10*q + 4), 100}
		vals := make([]float32, len(ids)*3)
		for i := range vals {
			vals[i] = float32(q*100 + i)
		}
		if err := ref.WriteIDs(ids, vals); err != nil {
			return err
		}
		if q == r {
			if err := st.Write(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(vals, int64(len(ids)), 3)); err != nil {
				return err
			}
		}
	}
	var allIDs []int64
	var allGrads []float32
	for q := 0; q < w; q++ {
		ids := []int64{int64(10*q + 1), 100, 100}
		grads := []float32{1, 2, 3, float32(q), -1, 0.5, 0.25, 0.25, 0.25}
		allIDs, allGrads = append(allIDs, ids...), append(allGrads, grads...)
		if q == r {
			if err := st.Update(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(grads, 3, 3)); err != nil {
				return err
			}
		}
	}
	if err := ref.UpdateIDs(allIDs, allGrads); err != nil {
		return err
	}
	n, err := st.Delete(cgotorch.MustFromSlice([]int64{3, 4, 999}))
	if m, _ := ref.DeleteIDs([]int64{3, 4, 999}); err != nil || n != m {
		return fmt.Errorf("delete: %d (%v), want %d", n, err, m)
	}
	// Read: every rank reads every id and an absent one
	probe := append(append([]int64{}, allIDs...), 3, 10*int64(w-1)+4, 100, 7777)
	rows, found, err := st.Read(cgotorch.MustFromSlice(probe))
	if err != nil {
		return err
	}
	wrows, wfound, err := ref.ReadIDs(probe)
	if err != nil {
		return err
	}
	gv, _ := cgotorch.ToSlice[float32](rows)
	wv, _ := cgotorch.ToSlice[float32](wrows)
	gf, _ := cgotorch.ToSlice[bool](found)
	if fmt.Sprint(gv) != fmt.Sprint(wv) || fmt.Sprint(gf) != fmt.Sprint(wfound) {
		return fmt.Errorf("read: %v %v, want %v %v", gv, gf, wv, wfound)
	}
	if err := sameLookups(st, ref, probe); err != nil {
		return err
	}
	stats, err := st.Stats()
	if err != nil || stats.Len != ref.Len() || stats.Step != 1 || stats.Dim != 3 {
		return fmt.Errorf("stats %+v (%v), want len %d and step 1", stats, err, ref.Len())
	}
	_, err = against(st, ref)
	return err
}

// scenarioShardedConfig: rank 1 creates tables whose configuration differs from rank 0's by
// one field; every rank must fail with ErrMismatch, and the name must be free afterwards.
func scenarioShardedConfig(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	base := embedding.Config{Dim: 4, Seed: 9, Optimizer: embedding.SGD{LR: 0.1}, Initializer: embedding.Normal{Std: 0.1}}
	variants := map[string]func(*embedding.Config){
		"dim":         func(c *embedding.Config) { c.Dim = 5 },
		"seed":        func(c *embedding.Config) { c.Seed = 10 },
		"optimizer":   func(c *embedding.Config) { c.Optimizer = embedding.Adagrad{LR: 0.1} },
		"lr":          func(c *embedding.Config) { c.Optimizer = embedding.SGD{LR: 0.2} },
		"initializer": func(c *embedding.Config) { c.Initializer = embedding.Normal{Std: 0.2} },
	}
	for _, name := range []string{"dim", "seed", "optimizer", "lr", "initializer"} {
		cfg := base
		if g.Rank() == 1 {
			variants[name](&cfg)
		}
		st, err := NewShardedTable(g, name, cfg)
		if err == nil {
			st.Close()
			return fmt.Errorf("%s: a table was created", name)
		}
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "configuration") {
			return fmt.Errorf("%s: %v, want ErrMismatch about the configuration", name, err)
		}
		fmt.Printf("rank %d: %s: %v\n", g.Rank(), name, err)
		st, err = NewShardedTable(g, name, base) // the name is free again
		if err != nil {
			return fmt.Errorf("%s: again with one configuration: %w", name, err)
		}
		st.Close()
	}
	return nil
}

// shardState is a rank's shard as text, to see that it did not change.
func shardState(st *ShardedTable) (string, error) {
	snap, err := st.ExportShard()
	if err != nil {
		return "", err
	}
	defer snap.Close()
	return snapshotText(snap), nil
}

// snapshotText is a snapshot as text, exact to the bit (float32s print in their shortest
// round-tripping form).
func snapshotText(snap *embedding.Snapshot) string {
	ids, _ := cgotorch.ToSlice[int64](snap.IDs)
	rows, _ := cgotorch.ToSlice[float32](snap.Rows)
	out := fmt.Sprint(ids, rows, snap.Step)
	for _, s := range snap.States {
		v, _ := cgotorch.ToSlice[float32](s.Values)
		out += fmt.Sprint(s.Name, v)
	}
	return out
}

// scenarioShardedBad: rank 1 gives bad input to each operation (ids of the wrong dtype to a
// training lookup, Write and Delete, values of the wrong shape, a NaN gradient to Update, and
// a NaN in the gradients a backward pass left pending before Step); every rank must get an
// error (ErrBadInput on rank 1, ErrMismatch on the others), no shard may change, and the table
// must work afterwards.
func scenarioShardedBad(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	st, err := NewShardedTable(g, "bad", trainConfigs["adagrad"])
	if err != nil {
		return err
	}
	defer st.Close()
	bad := g.Rank() == 1
	m := newTrainModel(st)
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		return err
	}
	if err := shardedTrainStep(m, opt, globalBatch(0)[:2]); err != nil { // some rows in every shard
		return err
	}
	ids := func(v ...int64) *cgotorch.Tensor {
		if bad {
			f := make([]float32, len(v))
			return cgotorch.MustFromSlice(f)
		}
		return cgotorch.MustFromSlice(v)
	}
	grads := func(n int) *cgotorch.Tensor {
		v := make([]float32, n*trainDim)
		if bad {
			v[1] = float32(math.NaN())
		}
		return cgotorch.MustFromSlice(v, int64(n), trainDim)
	}
	const nanStep = "step with a NaN pending gradient"
	prepare := map[string]func() error{nanStep: func() error { return nanGradient(m, opt, bad) }} // before the state is taken
	cases := []struct {
		name string
		call func() error
	}{
		{"training lookup with float ids", func() error {
			_, err := st.Forward(ids(5000, 5001, 5002), embedding.ForwardOptions{Train: true})
			return err
		}},
		{"bag with bad offsets", func() error {
			offs := []int64{0, 1}
			if bad {
				offs = []int64{2, 0}
			}
			_, err := st.ForwardBag(cgotorch.MustFromSlice([]int64{6000, 6001, 6002}), cgotorch.MustFromSlice(offs), nil, embedding.Sum, embedding.ForwardOptions{Train: true})
			return err
		}},
		{"write with float ids", func() error {
			return st.Write(ids(7000, 7001), cgotorch.MustFromSlice(make([]float32, 2*trainDim), 2, trainDim))
		}},
		{"write with values of the wrong shape", func() error {
			n := int64(2)
			if bad {
				n = 1
			}
			return st.Write(cgotorch.MustFromSlice([]int64{7000, 7001}[:n]), cgotorch.MustFromSlice(make([]float32, 2*trainDim), 2, trainDim))
		}},
		{"update with a NaN gradient", func() error { return st.Update(cgotorch.MustFromSlice([]int64{1006, 1012}), grads(2)) }},
		{"delete with float ids", func() error { _, err := st.Delete(ids(1006, 1012)); return err }},
		{nanStep, func() error { return opt.Step() }},
	}
	for _, c := range cases {
		if p := prepare[c.name]; p != nil {
			if err := p(); err != nil {
				return err
			}
		}
		before, err := shardState(st)

		if err != nil {
			return err
		}
		err = c.call()
		switch {
		case bad && !errors.Is(err, embedding.ErrBadInput):
			return fmt.Errorf("%s: %v, want ErrBadInput", c.name, err)
		case !bad && !errors.Is(err, ErrMismatch):
			return fmt.Errorf("%s: %v, want ErrMismatch", c.name, err)
		}
		fmt.Printf("rank %d: %s: %v\n", g.Rank(), c.name, err)
		if after, err := shardState(st); err != nil || after != before {
			return fmt.Errorf("%s: the shard changed (%v)", c.name, err)
		}
	}
	opt.ZeroGrad()
	return shardedTrainStep(m, opt, globalBatch(1)[:2]) // the table and the group still work
}

// scenarioShardedKilled: the rank $GOREC_DIST_KILL dies between its backward pass and its
// optimizer step; the others' step must fail with ErrPeer or ErrTimeout within the timeout.
func scenarioShardedKilled(o Options) error {
	kill, err := strconv.Atoi(os.Getenv("GOREC_DIST_KILL"))
	if err != nil {
		return err
	}
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	st, err := NewShardedTable(g, "killed", trainConfigs["sgd"])
	if err != nil {
		return err
	}
	defer st.Close()
	m := newTrainModel(st)
	opt, err := nn.NewSGD(m, nn.SGDOptions{})
	if err != nil {
		return err
	}
	per := trainBatch / g.WorldSize()
	mine := globalBatch(0)[g.Rank()*per : (g.Rank()+1)*per]
	if err := shardedTrainStep(m, opt, mine); err != nil {
		return err
	}
	if err := backward(m, opt, mine); err != nil {
		return err
	}
	if g.Rank() == kill {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	start := time.Now()
	err = opt.Step()
	took := time.Since(start)
	fmt.Printf("rank %d: after %v: %v\n", g.Rank(), took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrPeer) && !errors.Is(err, ErrTimeout) {
		return fmt.Errorf("a step with a dead rank: %v, want ErrPeer or ErrTimeout", err)
	}
	if took > o.Timeout+2*time.Second {
		return fmt.Errorf("the error came after %v, past the timeout %v", took, o.Timeout)
	}
	return nil
}

// nanGradient leaves gradients pending, with a NaN when bad.
func nanGradient(m *trainModel, opt *nn.Optimizer, bad bool) error {
	opt.ZeroGrad()
	return cgotorch.Try(func() {
		out := m.one.Forward(cgotorch.MustFromSlice([]int64{1006, 1012, 1018}))
		scale := 1.0
		if bad {
			scale = math.NaN()
		}
		out.Sum().MulScalar(scale).Backward()
	})
}

// sameLookups compares the sharded table's lookups of ids with the local table's: inference
// (nothing inserted), and a training bag with a padding id under no gradient, which inserts.
func sameLookups(st *ShardedTable, ref *embedding.Table, ids []int64) error {
	opts := []embedding.ForwardOptions{{}, {MaxNorm: 1}, {Train: true, Padding: true, PaddingID: ids[0]}}
	for _, o := range opts {
		var got, want []float32
		err := cgotorch.TryWithScope(func() error {
			var err error
			cgotorch.NoGrad(func() {
				t := cgotorch.MustFromSlice(ids)
				offs := cgotorch.MustFromSlice([]int64{0, 2, 5})
				var g, w *cgotorch.Tensor
				if g, err = st.ForwardBag(t, offs, nil, embedding.Mean, o); err != nil {
					return
				}
				if w, err = ref.ForwardBag(t, offs, nil, embedding.Mean, o); err != nil {
					return
				}
				got, _ = cgotorch.ToSlice[float32](g)
				want, _ = cgotorch.ToSlice[float32](w)
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("forward %+v: %w", o, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("forward %+v: %v, want %v", o, got, want)
		}
		if n, err := st.Len(); err != nil || n != ref.Len() {
			return fmt.Errorf("forward %+v: len %d (%v), want %d", o, n, err, ref.Len())
		}
	}
	return nil
}

// scenarioShardedClosed: rank 1's shard is closed under the sharded table, so it fails to
// apply what the ranks agreed on; every rank must get an error (ErrClosed there, ErrMismatch on
// the others), not only the rank that failed.
func scenarioShardedClosed(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	st, err := NewShardedTable(g, "closed", trainConfigs["sgd"])
	if err != nil {
		return err
	}
	defer st.Close()
	if g.Rank() == 1 {
		st.Shard().Close()
	}
	var ids []int64
	for k := 1; k < 30; k++ { // ids of every rank
		ids = append(ids, trainID(k))
	}
	n := int64(len(ids))
	calls := map[string]func() error{
		"write":  func() error { return st.Write(cgotorch.MustFromSlice(ids), cgotorch.Zeros([]int64{n, trainDim})) },
		"update": func() error { return st.Update(cgotorch.MustFromSlice(ids), cgotorch.Zeros([]int64{n, trainDim})) },
		"delete": func() error { _, err := st.Delete(cgotorch.MustFromSlice(ids)); return err },
	}
	for _, name := range []string{"write", "update", "delete"} {
		err := calls[name]()
		fmt.Printf("rank %d: %s: %v\n", g.Rank(), name, err)
		if g.Rank() == 1 && !errors.Is(err, embedding.ErrClosed) || g.Rank() != 1 && !errors.Is(err, ErrMismatch) {
			return fmt.Errorf("%s with a closed shard on rank 1: %v", name, err)
		}
	}
	return nil
}

// scenarioShardedSave trains a sharded table ($GOREC_SHARD_OPT) and saves it twice into
// $GOREC_SHARD_DIR (the second save replaces the first generation); rank 0 writes the gathered
// table's text to expected.txt there.
func scenarioShardedSave(o Options) error {
	return withTrained(o, scenarioShardedSaveTrained)
}

// withTrained runs f on a group and a sharded table ($GOREC_SHARD_OPT) trained for trainSteps,
// its rate then set to 0.125 (a rate of SetLR's is saved too).
func withTrained(o Options, f func(g *Group, st *ShardedTable, dir string) error) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	st, err := NewShardedTable(g, "saved", trainConfigs[os.Getenv("GOREC_SHARD_OPT")])
	if err != nil {
		return err
	}
	defer st.Close()
	if err := train(st, g.Rank(), g.WorldSize()); err != nil {
		return err
	}
	if err := st.SetLR(0.125); err != nil {
		return err
	}
	return f(g, st, os.Getenv("GOREC_SHARD_DIR"))
}

func scenarioShardedSaveTrained(g *Group, st *ShardedTable, dir string) error {
	for i := 0; i < 2; i++ {
		if err := st.Save(context.Background(), dir); err != nil {
			return fmt.Errorf("save %d: %w", i, err)
		}
	}
	snap, err := st.Export()
	if err != nil {
		return err
	}
	defer snap.Close()
	if g.Rank() != 0 {
		return nil
	}
	gens, _ := filepath.Glob(filepath.Join(dir, "gen-*"))
	if len(gens) != 1 {
		return fmt.Errorf("generations left after two saves: %v", gens)
	}
	return os.WriteFile(dir+"/expected.txt", []byte(snapshotText(snap)), 0o644)
}

// scenarioShardedLoad loads the table saved in $GOREC_SHARD_DIR (by another world size) and
// compares it, gathered, with expected.txt, bit for bit; every rank holds only its own ids.
func scenarioShardedLoad(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	dir := os.Getenv("GOREC_SHARD_DIR")
	st, err := LoadShardedTable(context.Background(), g, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := ownsItsIDs(st); err != nil {
		return err
	}
	if st.Name() != "saved" || st.LR() != 0.125 {
		return fmt.Errorf("loaded %q at rate %v, want \"saved\" at 0.125", st.Name(), st.LR())
	}
	snap, err := st.Export()
	if err != nil {
		return err
	}
	defer snap.Close()
	want, err := os.ReadFile(dir + "/expected.txt")
	if err != nil {
		return err
	}
	if got := snapshotText(snap); got != string(want) {
		return fmt.Errorf("loaded table:\n%s\nwant:\n%s", got, want)
	}
	n, err := st.Len()
	fmt.Printf("rank %d: %d ids loaded on %d ranks, %v\n", g.Rank(), n, g.WorldSize(), err)
	if err != nil {
		return err
	}
	return resumes(st, g, os.Getenv("GOREC_SHARD_OPT"))
}

// resumes trains the loaded table 5 more steps and compares it with one process trained
// without interruption (20 steps, the rate set to 0.125, 5 steps), within the equivalence's
// tolerance.
func resumes(st *ShardedTable, g *Group, opt string) error {
	ref, err := embedding.NewNamed("uninterrupted", trainConfigs[opt])
	if err != nil {
		return err
	}
	defer ref.Close()
	if err := train(ref, 0, 1); err != nil {
		return err
	}
	if err := ref.SetLR(0.125); err != nil {
		return err
	}
	if err := trainFrom(ref, 0, 1, trainSteps, trainSteps+5); err != nil {
		return err
	}
	if err := trainFrom(st, g.Rank(), g.WorldSize(), trainSteps, trainSteps+5); err != nil {
		return err
	}
	if _, err := against(st, ref); err != nil {
		return fmt.Errorf("resumed after loading: %w", err)
	}
	return nil
}

// against compares the sharded table, gathered, with a local table (sameSnapshot).
func against(st *ShardedTable, ref *embedding.Table) (worst float64, err error) {
	got, err := st.Export()
	if err != nil {
		return 0, err
	}
	defer got.Close()
	want, err := ref.Export()
	if err != nil {
		return 0, err
	}
	defer want.Close()
	return sameSnapshot(got, want)
}

// scenarioShardedCrash saves as scenarioShardedSave does (once), trains 2 more steps, and
// saves again, but rank 0 is killed after every shard is written and before its commit: the
// other ranks' Save must fail, and the directory must still hold the first save (the test
// then loads it).
func scenarioShardedCrash(o Options) error {
	return withTrained(o, scenarioShardedCrashTrained)
}

func scenarioShardedCrashTrained(g *Group, st *ShardedTable, dir string) error {
	if err := st.Save(context.Background(), dir); err != nil {
		return err
	}
	snap, err := st.Export()
	if err != nil {
		return err
	}
	defer snap.Close()
	if g.Rank() == 0 {
		if err := os.WriteFile(dir+"/expected.txt", []byte(snapshotText(snap)), 0o644); err != nil {
			return err
		}
		st.beforeCommit = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	if err := trainFrom(st, g.Rank(), g.WorldSize(), trainSteps, trainSteps+2); err != nil {
		return err
	}
	err = st.Save(context.Background(), dir)
	fmt.Printf("rank %d: the save whose commit crashed: %v\n", g.Rank(), err)
	if err == nil {
		return fmt.Errorf("a save whose commit crashed succeeded")
	}
	return nil
}
