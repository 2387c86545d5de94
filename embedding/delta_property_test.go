package embedding_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// The property of deltas: random sequences of lookups (admission sightings among them), updates,
// writes, deletions, evictions, compactions, SetLR, SetAdmission and deltas (marked or not),
// with a checkpoint taken at a random point, rebuild the table in a fresh process (this test
// binary run again: TestDeltaChainChild) from the checkpoint and the delta files taken after
// it; then the same operations on both keep them bit for bit equal (rows, optimizer states,
// step, admission), with Check passing after every operation and every delta. (Access metadata
// of rows only looked up since a mark is not in deltas: it is left out of the comparison.)
// An in-process copy fed every delta from the start is compared after each one.
func TestDeltaChainProperty(t *testing.T) {
	names := make([]string, 0, len(roundTripConfigs))
	for name := range roundTripConfigs {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		t.Run(name, func(t *testing.T) { deltaChainProperty(t, name, uint64(i)) })
	}
}

// deltaPlan is what the child process reads: the table's configuration (by name), the
// checkpoint, the delta files in order and the seed of the operations after them.
type deltaPlan struct {
	Config string
	Base   string
	Deltas []string
	Tail   uint64
	Out    string
}

func deltaChainProperty(t *testing.T, name string, seed uint64) {
	cfg := roundTripConfigs[name]
	live := newTable(t, cfg, "live")
	mirror := newTable(t, cfg, "mirror")
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(seed, 77))
	const ops = 160
	saveAt := r.IntN(ops / 2)
	plan := deltaPlan{Config: name, Base: filepath.Join(dir, "base"), Tail: seed + 1000, Out: filepath.Join(dir, "child.json")}
	for op := 0; op < ops; op++ {
		if op == saveAt {
			if err := embedding.Save(context.Background(), plan.Base, live); err != nil {
				t.Fatal(err)
			}
		}
		if k := r.IntN(10); k < 8 {
			randomOp(t, live, r, true)
		} else {
			d, err := live.Delta(k == 8)
			if err != nil {
				t.Fatal(err)
			}
			if err := mirror.ApplyDelta(d); err != nil {
				t.Fatalf("op %d: the in-process copy: %v", op, err)
			}
			checked(t, mirror)
			sameDump(t, fmt.Sprintf("op %d: the in-process copy", op), withoutAccess(dump(t, mirror)), withoutAccess(dump(t, live)))
			if op >= saveAt {
				path := filepath.Join(dir, fmt.Sprintf("delta-%03d", op))
				if err := embedding.WriteDelta(path, d, cfg.Dim); err != nil {
					t.Fatal(err)
				}
				plan.Deltas = append(plan.Deltas, path)
			}
		}
		checked(t, live)
	}
	d, err := live.Delta(true) // (the changes since the last delta)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "delta-last")
	if err := embedding.WriteDelta(path, d, cfg.Dim); err != nil {
		t.Fatal(err)
	}
	plan.Deltas = append(plan.Deltas, path)
	b, _ := json.Marshal(plan)
	planPath := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeltaChainChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GOREC_DELTA_PLAN="+planPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child process: %v\n%s", err, out)
	}
	tail(t, live, plan.Tail)
	var got tableDump
	if b, err = os.ReadFile(plan.Out); err != nil {
		t.Fatalf("the child wrote no result: %v", err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	sameDump(t, "the fresh process's copy after the same operations", got, withoutAccess(dump(t, live)))
	if len(got.IDs) == 0 {
		t.Errorf("the table ended empty: the comparison compared nothing")
	}
}

// TestDeltaChainChild is the child process of TestDeltaChainProperty (it runs only there).
func TestDeltaChainChild(t *testing.T) {
	path := os.Getenv("GOREC_DELTA_PLAN")
	if path == "" {
		t.Skip("run by TestDeltaChainProperty")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var plan deltaPlan
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	tbls, err := embedding.LoadRenamed(context.Background(), plan.Base, func(string) string { return "child" })
	if err != nil {
		t.Fatal(err)
	}
	tbl := tbls[0]
	defer tbl.Close()
	checked(t, tbl)
	for _, p := range plan.Deltas {
		d, _, err := embedding.ReadDelta(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := tbl.ApplyDelta(d); err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
		checked(t, tbl)
	}
	tail(t, tbl, plan.Tail)
	out, _ := json.Marshal(withoutAccess(dump(t, tbl)))
	if err := os.WriteFile(plan.Out, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func checked(t *testing.T, tbl *embedding.Table) {
	t.Helper()
	if err := tbl.Check(); err != nil {
		t.Fatal(err)
	}
}

// tail is the same operations on a table and its copy: no evictions (they read the access
// metadata, which deltas carry only for the rows they carry).
func tail(t *testing.T, tbl *embedding.Table, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 5))
	for i := 0; i < 40; i++ {
		randomOp(t, tbl, r, false)
		checked(t, tbl)
	}
}

// randomOp runs one random operation on ids of a small span (so that they repeat).
func randomOp(t *testing.T, tbl *embedding.Table, r *rand.Rand, evict bool) {
	t.Helper()
	cfg := tbl.Config()
	_, plain := cfg.Optimizer.(embedding.NoOptimizer)
	batch := func() []int64 {
		ids := make([]int64, 1+r.IntN(24))
		for i := range ids {
			ids[i] = r.Int64N(120)
		}
		return ids
	}
	values := func(n int) []float32 {
		v := make([]float32, n*cfg.Dim)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	var err error
	switch k := r.IntN(12); {
	case k < 3: // lookups: admission sightings, access metadata
		_, err = tbl.LookupIDs(batch())
	case k < 6:
		if plain {
			_, err = tbl.LookupIDs(batch())
			break
		}
		ids := batch()
		err = tbl.UpdateIDs(ids, values(len(ids)))
	case k == 6:
		ids := batch()
		err = tbl.WriteIDs(ids, values(len(ids)))
	case k == 7:
		ids := batch()
		_, err = tbl.DeleteIDs(ids[:min(len(ids), 1+r.IntN(4))])
	case k == 8 && evict && cfg.TrackAccess:
		p := []embedding.EvictPolicy{embedding.TTL(int64(r.IntN(6))), embedding.KeepRecent(40 + r.IntN(40)),
			embedding.KeepFrequent(40 + r.IntN(40)), embedding.MemoryBudget(int64(4000 + r.IntN(8000)))}[r.IntN(4)]
		var ev *embedding.Evicted
		if ev, err = tbl.Evict(context.Background(), p, false); err == nil && r.IntN(2) == 0 {
			err = tbl.Compact()
		}
		ev.Close()
	case k == 9 && !plain:
		err = tbl.SetLR([]float64{0.3, 0.05, 0.01}[r.IntN(3)])
	case k == 10:
		err = tbl.SetAdmission([]int{0, 2, 3}[r.IntN(3)])
	default:
		_, err = tbl.LookupIDs(batch())
	}
	if err != nil {
		t.Fatal(err)
	}
}
