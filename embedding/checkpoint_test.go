package embedding_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/internal/procstat"
)

// tableDump is everything a checkpoint must restore, as plain values (floats as bits).
type tableDump struct {
	IDs          []int64
	Rows         []uint32
	States       map[string][]uint32
	Step         int64
	Last, Freq   []int64
	Admit, Count int
}

func bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

func dump(t testing.TB, tbl *embedding.Table) tableDump {
	t.Helper()
	s, ids := snapshot(t, tbl)
	defer s.Close()
	d := tableDump{IDs: ids, Rows: bits(floats(t, s.Rows)), States: map[string][]uint32{}, Step: s.Step}
	for _, st := range s.States {
		d.States[st.Name] = bits(floats(t, st.Values))
	}
	if tbl.Config().TrackAccess {
		mids, last, freq, err := tbl.Metadata()
		if err != nil {
			t.Fatalf("Metadata: %v", err)
		}
		if !reflect.DeepEqual(mids, ids) && len(ids) > 0 {
			t.Fatalf("Metadata ids differ from Export ids")
		}
		d.Last, d.Freq = last, freq
	}
	var err error
	if d.Admit, d.Count, err = tbl.Admission(); err != nil {
		t.Fatal(err)
	}
	return d
}

func sameDump(t testing.TB, what string, got, want tableDump) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: tables differ:\n got: ids %d rows %d step %d admit %d/%d\nwant: ids %d rows %d step %d admit %d/%d",
			what, len(got.IDs), len(got.Rows), got.Step, got.Admit, got.Count, len(want.IDs), len(want.Rows), want.Step, want.Admit, want.Count)
	}
}

// train runs steps updates over random ids of [0, span) with random gradients.
func train(t testing.TB, tbl *embedding.Table, r *rand.Rand, steps, batch int, span int64) {
	t.Helper()
	dim := tbl.Dim()
	for s := 0; s < steps; s++ {
		ids := make([]int64, batch)
		g := make([]float32, batch*dim)
		for i := range ids {
			ids[i] = r.Int64N(span) - span/2
		}
		for i := range g {
			g[i] = float32(r.NormFloat64())
		}
		if _, err := tbl.LookupIDs(ids); err != nil {
			t.Fatal(err)
		}
		if err := tbl.UpdateIDs(ids, g); err != nil {
			t.Fatal(err)
		}
	}
}

var roundTripConfigs = map[string]embedding.Config{
	"sgd":          {Dim: 3, Optimizer: embedding.SGD{LR: 0.1}, BlockRows: 8, TrackAccess: true},
	"sgd-momentum": {Dim: 5, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}, BlockRows: 16, TrackAccess: true},
	"adagrad":      {Dim: 4, Optimizer: embedding.Adagrad{LR: 0.1, InitialAccumulator: 0.1}, BlockRows: 8, Layout: embedding.Interleaved, TrackAccess: true},
	"rowwise":      {Dim: 3, Optimizer: embedding.RowWiseAdagrad{LR: 0.1}, BlockRows: 8, Seed: 3, TrackAccess: true},
	"sparse-adam":  {Dim: 6, Optimizer: embedding.SparseAdam{LR: 0.01}, BlockRows: 32, Initializer: embedding.Uniform{Low: -1, High: 1}, TrackAccess: true},
	"adamw":        {Dim: 2, Optimizer: embedding.AdamW{LR: 0.01, WeightDecay: 0.1}, BlockRows: 4, TrackAccess: true},
	"ftrl":         {Dim: 4, Optimizer: embedding.FTRL{Alpha: 0.1, L1: 0.01}, BlockRows: 8, ReadDefault: embedding.ReadInitial},
	"none":         {Dim: 3, Optimizer: embedding.NoOptimizer{}, BlockRows: 8, TrackAccess: true},
}

// TestCheckpointRoundTrip: save, train on, close; load, train on the same way: the two runs
// agree bit for bit (rows, every optimizer state, step, metadata, admission counts), also
// after deletions, evictions and compaction. (The tensor kernels: cgotorch/ctest/table_test.c.)
func TestCheckpointRoundTrip(t *testing.T) {
	for name, cfg := range roundTripConfigs {
		{
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				tname := "rt-" + strings.ReplaceAll(t.Name(), "/", "-")
				tbl, err := embedding.NewNamed(tname, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer tbl.Close()
				seed := tbl.Config().Seed
				trainable := cfg.Optimizer != embedding.NoOptimizer{}
				r := rand.New(rand.NewPCG(1, 2))
				if trainable {
					train(t, tbl, r, 20, 40, 200)
				} else {
					if _, err := tbl.LookupIDs([]int64{1, 2, 3, 50, -7}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := tbl.DeleteIDs([]int64{-3, -2, 0, 1, 5}); err != nil {
					t.Fatal(err)
				}
				if ev, err := tbl.Evict(context.Background(), embedding.TTL(15), false); !cfg.TrackAccess {
					if !errors.Is(err, embedding.ErrBadInput) {
						t.Errorf("Evict on a table without TrackAccess: %v, want ErrBadInput", err)
					}
				} else if err != nil {
					t.Fatal(err)
				} else if trainable && ev.N == 0 {
					t.Errorf("TTL(15) evicted nothing")
				}
				if err := tbl.Compact(); err != nil {
					t.Fatal(err)
				}
				if err := tbl.SetAdmission(3); err != nil {
					t.Fatal(err)
				}
				if _, err := tbl.LookupIDs([]int64{1000, 1001, 1001}); err != nil {
					t.Fatal(err)
				}
				before := dump(t, tbl)
				if before.Count != 2 {
					t.Fatalf("admission counts %d, want 2", before.Count)
				}
				if err := embedding.Save(context.Background(), dir, tbl); err != nil {
					t.Fatalf("Save: %v", err)
				}
				cont := func(tb *embedding.Table) tableDump {
					if trainable {
						train(t, tb, rand.New(rand.NewPCG(5, 6)), 10, 30, 300)
					}
					if _, err := tb.LookupIDs([]int64{1001, 1002}); err != nil {
						t.Fatal(err)
					}
					return dump(t, tb)
				}
				after := cont(tbl)
				if err := tbl.Close(); err != nil {
					t.Fatal(err)
				}
				loaded, err := embedding.Load(context.Background(), dir)
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if len(loaded) != 1 || loaded[0].Name() != tname {
					t.Fatalf("Load gave %d tables", len(loaded))
				}
				l := loaded[0]
				defer l.Close()
				// Parameters come back with their defaults filled in.
				got, want := l.Config(), withDefaults(t, cfg)
				want.Seed = seed // (derived from the table's name when cfg leaves it 0)
				if reflect.TypeOf(got.Optimizer) != reflect.TypeOf(want.Optimizer) {
					t.Errorf("optimizer: got %+v, want %+v", got.Optimizer, want.Optimizer)
				}
				got.Optimizer, want.Optimizer = nil, nil
				if !reflect.DeepEqual(got, want) {
					t.Errorf("config: got %+v, want %+v", got, want)
				}
				sameDump(t, "right after load", dump(t, l), before)
				sameDump(t, "after training on", cont(l), after)
			})
		}
	}
}

// withDefaults is cfg as a table created from it reports it.
func withDefaults(t testing.TB, cfg embedding.Config) embedding.Config {
	tbl, err := embedding.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	return tbl.Config()
}

func TestCheckpointModelOfSeveralTablesAndLoadInto(t *testing.T) {
	dir := t.TempDir()
	a := newTable(t, embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{}}, "a")
	b := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}, "b")
	r := rand.New(rand.NewPCG(3, 4))
	train(t, a, r, 5, 10, 50)
	train(t, b, r, 7, 10, 50)
	da, db := dump(t, a), dump(t, b)
	extra := []byte("dense state bytes")
	err := embedding.SaveWith(context.Background(), dir, []*embedding.Table{a, b}, map[string]func(w io.Writer) error{
		"dense": func(w io.Writer) error { _, err := w.Write(extra); return err },
	})
	if err != nil {
		t.Fatal(err)
	}
	train(t, a, r, 3, 10, 80)
	train(t, b, r, 3, 10, 80)
	var got []byte
	err = embedding.LoadInto(context.Background(), dir, []*embedding.Table{a, b}, map[string]func(io.Reader) error{
		"dense": func(rd io.Reader) error { var err error; got, err = io.ReadAll(rd); return err },
	})
	if err != nil {
		t.Fatal(err)
	}
	sameDump(t, "a", dump(t, a), da)
	sameDump(t, "b", dump(t, b), db)
	if string(got) != string(extra) {
		t.Errorf("extra file %q", got)
	}
	// Only the new generation's files remain after another save.
	if err := embedding.Save(context.Background(), dir, a, b); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("files after two saves: %v", names)
	}
}

func TestCheckpointIncompatible(t *testing.T) {
	dir := t.TempDir()
	a := newTable(t, embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{}}, "x")
	train(t, a, rand.New(rand.NewPCG(1, 1)), 2, 5, 20)
	if err := embedding.Save(context.Background(), dir, a); err != nil {
		t.Fatal(err)
	}
	want := dump(t, a)
	a.Close()
	for name, cfg := range map[string]embedding.Config{
		"dim":       {Dim: 8, Optimizer: embedding.SparseAdam{}},
		"optimizer": {Dim: 4, Optimizer: embedding.Adagrad{}},
		"layout":    {Dim: 4, Optimizer: embedding.SparseAdam{}, Layout: embedding.Interleaved},
	} {
		tbl, err := embedding.NewNamed(a.Name(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := dump(t, tbl)
		err = embedding.LoadInto(context.Background(), dir, []*embedding.Table{tbl}, nil)
		if !errors.Is(err, embedding.ErrIncompatible) {
			t.Errorf("%s: LoadInto: %v, want ErrIncompatible", name, err)
		}
		sameDump(t, name+": unchanged", dump(t, tbl), before)
		tbl.Close()
	}
	tbl, err := embedding.NewNamed(a.Name(), embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{LR: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	if err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{tbl}, nil); err != nil {
		t.Fatal(err)
	}
	sameDump(t, "compatible", dump(t, tbl), want)
	if lr := tbl.Config().Optimizer.(embedding.SparseAdam).LR; lr != 1e-3 {
		t.Errorf("the saved optimizer parameters were not taken over: LR %v", lr)
	}
}

// checkpointFiles returns the manifest's path and the table file of a one-table checkpoint.
func checkpointFiles(t testing.TB, dir string) (string, string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "g*.t0.safetensors"))
	if len(m) != 1 {
		t.Fatalf("table files: %v", m)
	}
	return filepath.Join(dir, "manifest.json"), m[0]
}

func TestCheckpointCorrupt(t *testing.T) {
	dir := t.TempDir()
	a := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.Adagrad{}}, "c")
	train(t, a, rand.New(rand.NewPCG(1, 9)), 3, 20, 100)
	if err := embedding.Save(context.Background(), dir, a); err != nil {
		t.Fatal(err)
	}
	a.Close()
	man, tf := checkpointFiles(t, dir)
	goodMan, _ := os.ReadFile(man)
	goodTF, _ := os.ReadFile(tf)
	names := embedding.Names()
	edit := func(b []byte, f func([]byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	cases := map[string]struct{ man, tf []byte }{
		"truncated":        {goodMan, goodTF[:len(goodTF)-9]},
		"empty":            {goodMan, nil},
		"flipped data":     {goodMan, edit(goodTF, func(b []byte) []byte { b[len(b)-100] ^= 1; return b })},
		"header length":    {goodMan, edit(goodTF, func(b []byte) []byte { b[0], b[7] = 0xff, 0x7f; return b })},
		"header garbage":   {goodMan, edit(goodTF, func(b []byte) []byte { copy(b[8:], "{\"ids\":[1,2]"); return b })},
		"shape lie":        {goodMan, edit(goodTF, func(b []byte) []byte { return []byte(strings.Replace(string(b), `"shape":[`, `"shape":[9`, 1)) })},
		"wrong format":     {[]byte(strings.Replace(string(goodMan), "gorec-checkpoint", "gorec-checkpoinx", 1)), goodTF},
		"wrong version":    {[]byte(strings.Replace(string(goodMan), `"version": 2`, `"version": 3`, 1)), goodTF},
		"rows lie":         {[]byte(strings.Replace(string(goodMan), `"rows": `, `"rows": 1`, 1)), goodTF},
		"manifest garbage": {goodMan[:len(goodMan)/2], goodTF},
		"table twice": {edit(goodMan, func(b []byte) []byte {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			m["tables"] = append(m["tables"].([]any), m["tables"].([]any)[0])
			b, _ = json.Marshal(m)
			return b
		}), goodTF},
	}
	for name, c := range cases {
		os.WriteFile(man, c.man, 0o644)
		os.WriteFile(tf, c.tf, 0o644)
		tbls, err := embedding.Load(context.Background(), dir)
		if !errors.Is(err, embedding.ErrCorrupt) {
			t.Errorf("%s: Load: %v, want ErrCorrupt", name, err)
		}
		for _, x := range tbls {
			x.Close()
		}
		if got := embedding.Names(); !reflect.DeepEqual(got, names) {
			t.Errorf("%s: open tables %v after a failed load, want %v", name, got, names)
		}
	}
}

// TestCheckpointConsistentUnderTraining: every update steps all rows with gradient 1, so in a
// consistent snapshot every Adagrad sum equals the step counter.
func TestCheckpointConsistentUnderTraining(t *testing.T) {
	dir := t.TempDir()
	const n = 5000
	a := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{LR: 0.01}, BlockRows: 64}, "live")
	ids := make([]int64, n)
	g := make([]float32, 2*n)
	for i := range ids {
		ids[i] = int64(i * 7)
	}
	for i := range g {
		g[i] = 1
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if err := a.UpdateIDs(ids, g); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 6; i++ { // every other save staged
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := embedding.SaveWithOptions(context.Background(), sub, []*embedding.Table{a}, embedding.SaveOptions{Staged: i%2 == 1}); err != nil {
			t.Fatal(err)
		}
		checkUniformSum(t, sub)
	}
	stop.Store(true)
	wg.Wait()
}

// A staged save writes the same table file, byte for byte, as a save streaming under the lock
// (every optimizer, with admission counts).
func TestCheckpointStagedSameFile(t *testing.T) {
	for name, cfg := range roundTripConfigs {
		t.Run(name, func(t *testing.T) {
			tbl := newTable(t, cfg)
			if _, err := tbl.LookupIDs(seq(100)); err != nil {
				t.Fatal(err)
			}
			if cfg.Optimizer != (embedding.NoOptimizer{}) {
				train(t, tbl, rand.New(rand.NewPCG(3, 4)), 10, 40, 200)
			}
			if err := tbl.SetAdmission(2); err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.LookupIDs([]int64{5000, 5001}); err != nil {
				t.Fatal(err)
			}
			var files [2][]byte
			for i, staged := range []bool{false, true} {
				dir := t.TempDir()
				if err := embedding.SaveWithOptions(context.Background(), dir, []*embedding.Table{tbl}, embedding.SaveOptions{Staged: staged}); err != nil {
					t.Fatal(err)
				}
				m, err := filepath.Glob(filepath.Join(dir, "*.t0.safetensors"))
				if err != nil || len(m) != 1 {
					t.Fatalf("table files %v (%v)", m, err)
				}
				if files[i], err = os.ReadFile(m[0]); err != nil {
					t.Fatal(err)
				}
			}
			if len(files[0]) < 1000 || !bytes.Equal(files[0], files[1]) {
				t.Errorf("staged file: %d bytes, streamed: %d bytes, equal %v", len(files[1]), len(files[0]), bytes.Equal(files[0], files[1]))
			}
		})
	}
}

// A staged save's copy (here 128 MB of rows and states) is back with the system when the save
// returns.
func TestCheckpointStagedReturnsMemory(t *testing.T) {
	if procstat.ResidentKB() == 0 || raceEnabled {
		t.Skip("no /proc/self/status, or the race detector's shadow memory")
	}
	const n, dim = 1_000_000, 16
	tbl := newTable(t, embedding.Config{Dim: dim, Optimizer: embedding.Adagrad{}, Capacity: n})
	if err := tbl.UpdateIDs(seq(n), make([]float32, n*dim)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	debug.FreeOSMemory() // (the update's garbage)
	before := procstat.ResidentKB()
	if err := embedding.SaveWithOptions(context.Background(), dir, []*embedding.Table{tbl}, embedding.SaveOptions{Staged: true}); err != nil {
		t.Fatal(err)
	}
	after := procstat.ResidentKB()
	t.Logf("resident %d MiB -> %d MiB over a staged save of %d rows", before>>10, after>>10, n)
	if after-before > 32<<10 {
		t.Errorf("a staged save left %d MiB more resident, want under 32", (after-before)>>10)
	}
}

// checkUniformSum loads dir's checkpoint next to the open tables, checks that every Adagrad
// sum equals the step and returns the step.
func checkUniformSum(t *testing.T, dir string) int64 {
	t.Helper()
	tbls, err := embedding.LoadRenamed(context.Background(), dir, func(name string) string { return name + "/copy" })
	if err != nil {
		t.Fatal(err)
	}
	defer tbls[0].Close()
	d := dump(t, tbls[0])
	for _, v := range d.States["sum"] {
		if math.Float32frombits(v) != float32(d.Step) {
			t.Fatalf("a row's sum is %v at step %d: torn snapshot", math.Float32frombits(v), d.Step)
		}
	}
	return d.Step
}

// TestLoadIntoAllOrNothing: when the second table of a checkpoint cannot be loaded (another dim,
// or a corrupt file), the first one is not changed either.
func TestLoadIntoAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	a := newTable(t, embedding.Config{Dim: 4, Optimizer: embedding.SparseAdam{}}, "a")
	b := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}, "b")
	r := rand.New(rand.NewPCG(6, 1))
	train(t, a, r, 3, 10, 40)
	train(t, b, r, 3, 10, 40)
	if err := embedding.Save(context.Background(), dir, a, b); err != nil {
		t.Fatal(err)
	}
	train(t, a, r, 2, 10, 40)
	before := dump(t, a)
	b.Close()
	b3 := newTable(t, embedding.Config{Dim: 3, Optimizer: embedding.Adagrad{}}, "b")
	if err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{a, b3}, nil); !errors.Is(err, embedding.ErrIncompatible) {
		t.Errorf("LoadInto with an incompatible second table: %v", err)
	}
	sameDump(t, "first table after a failed load", dump(t, a), before)
	b3.Close()
	b2 := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.Adagrad{}}, "b")
	m, _ := filepath.Glob(filepath.Join(dir, "g*.t1.safetensors"))
	data, _ := os.ReadFile(m[0])
	data[len(data)-3] ^= 0x40
	os.WriteFile(m[0], data, 0o644)
	if err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{a, b2}, nil); !errors.Is(err, embedding.ErrCorrupt) {
		t.Errorf("LoadInto with a corrupt second table: %v", err)
	}
	sameDump(t, "first table after a corrupt load", dump(t, a), before)
	b2.Close()
	// SGD saved with momentum (a buffer per row), the table without: found before any swap
	// (the swap itself refused them, after the first table had been swapped).
	m0 := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1, Momentum: 0.9}}, "m")
	lookup(t, m0, 1)
	dir2 := t.TempDir()
	if err := embedding.Save(context.Background(), dir2, a, m0); err != nil {
		t.Fatal(err)
	}
	m0.Close()
	train(t, a, r, 1, 10, 40) // so that a swap of the first table would show
	before = dump(t, a)
	m1 := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}}, "m")
	if err := embedding.LoadInto(context.Background(), dir2, []*embedding.Table{a, m1}, nil); !errors.Is(err, embedding.ErrIncompatible) {
		t.Errorf("LoadInto of SGD with momentum into SGD without: %v, want ErrIncompatible", err)
	}
	sameDump(t, "first table after loading momentum into plain SGD", dump(t, a), before)
	for _, name := range embedding.Names() {
		if strings.HasPrefix(name, "gorec-load-") {
			t.Errorf("a failed load left table %q open", name)
		}
	}
}

// A load into a table reaches every handle of it: the configuration it takes over (here the
// saved ReadDefault) is the one each handle reads with, and readers running meanwhile share it
// safely (run under -race: the handle's configuration had been rewritten unsynchronised, and
// handles from Get kept the old one).
func TestLoadIntoReachesEveryHandle(t *testing.T) {
	dir := t.TempDir()
	src, err := embedding.NewNamed(t.Name(), embedding.Config{Dim: 2, ReadDefault: embedding.ReadInitial})
	if err != nil {
		t.Fatal(err)
	}
	lookup(t, src, 1)
	if err := embedding.Save(context.Background(), dir, src); err != nil {
		t.Fatal(err)
	}
	src.Close()
	dst := newTable(t, embedding.Config{Dim: 2}) // ReadZeros
	other, ok := embedding.Get(t.Name())
	if !ok {
		t.Fatal("Get")
	}
	var stop atomic.Bool
	done := startWorkers(1, func(int, *mrand.Rand) {
		for !stop.Load() {
			if r, _, err := other.ReadIDs([]int64{1, 42}); err == nil {
				r.Close()
			}
		}
	})
	for i := 0; i < 5; i++ {
		if err := embedding.LoadInto(context.Background(), dir, []*embedding.Table{dst}, nil); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	<-done
	a, _ := read(t, dst, 42)
	b, _ := read(t, other, 42)
	if !equalRows(a[0], b[0]) || (a[0][0] == 0 && a[0][1] == 0) {
		t.Fatalf("absent id 42 reads %v through the loading handle and %v through another; want the same initial row", a[0], b[0])
	}
}

// A name rename gives that no table may have is the caller's error, not a corrupt checkpoint.
func TestLoadRenamedBadName(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2})
	lookup(t, tbl, 1)
	dir := t.TempDir()
	if err := embedding.Save(context.Background(), dir, tbl); err != nil {
		t.Fatal(err)
	}
	names := embedding.Names()
	for _, bad := range []string{strings.Repeat("x", 256), "tab\tle"} { // ("" opens it unnamed)
		_, err := embedding.LoadRenamed(context.Background(), dir, func(string) string { return bad })
		if !errors.Is(err, embedding.ErrBadInput) || errors.Is(err, embedding.ErrCorrupt) {
			t.Errorf("rename to %q: %v, want ErrBadInput and not ErrCorrupt", bad, err)
		}
	}
	if got := embedding.Names(); !reflect.DeepEqual(got, names) {
		t.Errorf("open tables %v after the refused loads, want %v", got, names)
	}
}
