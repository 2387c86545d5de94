package dist

// A sharded table counts lookups as one table does: its rows' frequencies and its admissions
// are those of one table fed the union of the ranks' batches.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func init() { scenarios["counts"] = scenarioCounts }

const countsSteps = 6

// countsPaths are the ways the counting test trains, each through owners' lookups of its own:
// Lookup and Update; Forward and ForwardBag; an EmbeddingBagCollection (ForwardBags) and an
// EmbeddingCollection (ForwardEach) stepped by the plain loop, TrainStep or a TrainPipeline.
var countsPaths = []string{"lookup", "forward", "bags", "seq", "bags-step", "seq-step", "bags-pipe", "seq-pipe"}

// Training sharded tables on 2 and 3 ranks, on batches that repeat ids within a rank's slice
// and across the ranks', through every path whose owners look up ids (countsPaths), leaves
// after every step the frequencies (Metadata) and the admissions (which ids have a row, how
// many are counted) of one process's tables trained on the whole batches (a TrainPipeline's,
// which looks up a batch ahead, after the last one); an inference lookup counts nothing. With
// each rank's distinct ids counted once (the owners' lookups before counts travelled) it fails.
// Ranks that disagree on whether a table counts fail its lookups with ErrMismatch.
func TestShardedTableCountsAsOneTable(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			requirePassed(t, runSharded(t, "counts", world, 2*time.Minute))
		})
	}
}

func scenarioCounts(o Options) error {
	g, err := New(o)
	if err != nil {
		return err
	}
	defer g.Close()
	var errs []error // every path's (a comparison fails on every rank alike: the ranks go on)
	for _, path := range countsPaths {
		if err := countsRun(g, path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	return errors.Join(append(errs, countsDisagree(g))...)
}

// countsDisagree checks that a rank whose shard counts where its peers' do not (a threshold set
// on its shard alone) fails a training lookup on every rank with ErrMismatch, changing no shard.
func countsDisagree(g *Group) error {
	st, err := NewShardedTable(g, "counts-disagree", trainConfigs["adagrad"])
	if err != nil {
		return err
	}
	defer st.Close()
	if g.Rank() == 0 {
		if err := st.Shard().SetAdmission(2); err != nil {
			return err
		}
	}
	ids := cgotorch.MustFromSlice([]int64{trainID(1), trainID(2), trainID(1)})
	defer ids.Close()
	rows, err := st.Lookup(ids)
	if !errors.Is(err, ErrMismatch) {
		rows.Close()
		return fmt.Errorf("a lookup with rank 0 alone counting: %v, want ErrMismatch", err)
	}
	if n, err := st.Len(); err != nil || n != 0 {
		return fmt.Errorf("after the refused lookup: %d ids (%v), want 0", n, err)
	}
	return nil
}

// countsTable is what the counting paths call, on a sharded table or a local one.
type countsTable interface {
	nn.EmbeddingTable
	Lookup(ids *cgotorch.Tensor) (*cgotorch.Tensor, error)
	Read(ids *cgotorch.Tensor) (rows, found *cgotorch.Tensor, err error)
	Update(ids, grads *cgotorch.Tensor) error
	SetAdmission(k int) error
	Close() error
}

// countsRun trains a users table (admission at the third lookup, no access tracking) and an
// items table (access tracked; admission at the second lookup where each step looks it up
// once: a collection's features look a table up one by one in one process, together on the
// owners, so that an id admitted between two features would count otherwise) through path,
// sharded and in one process, and compares their counts.
func countsRun(g *Group, path string) error {
	items := itemsConfig
	items.TrackAccess = true
	itemsAdmission := 1
	if path == "lookup" || path == "forward" {
		itemsAdmission = 2
	}
	var sharded, local []countsTable
	defer func() {
		for _, t := range append(sharded, local...) {
			t.Close()
		}
	}()
	for k, cfg := range []embedding.Config{trainConfigs["adagrad"], items} {
		name := fmt.Sprintf("counts-%s-%d", path, k)
		st, err := NewShardedTable(g, name, cfg)
		if err != nil {
			return err
		}
		sharded = append(sharded, st)
		lt, err := embedding.New(cfg)
		if err != nil {
			return err
		}
		local = append(local, lt)
		for _, t := range []countsTable{st, lt} {
			if err := t.SetAdmission([]int{3, itemsAdmission}[k]); err != nil {
				return err
			}
		}
	}
	stepS, endS, err := countsTrainer(path, sharded, true)
	if err != nil {
		return err
	}
	stepL, endL, err := countsTrainer(path, local, false)
	if err != nil {
		return err
	}
	r, w := g.Rank(), g.WorldSize()
	per := trainBatch / w
	piped := path == "bags-pipe" || path == "seq-pipe"
	for step := range countsSteps {
		b := globalBatch(step)
		if err := stepS(b[r*per : (r+1)*per]); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if err := stepL(b); err != nil {
			return fmt.Errorf("step %d, one process: %w", step, err)
		}
		if !piped {
			if err := sameCounts(sharded, local); err != nil {
				return fmt.Errorf("after step %d: %w", step, err)
			}
		}
	}
	last := globalBatch(countsSteps)
	if err := endS(last[r*per : (r+1)*per]); err != nil {
		return err
	}
	if err := endL(last); err != nil {
		return err
	}
	if err := sameCounts(sharded, local); err != nil {
		return fmt.Errorf("at the end: %w", err)
	}
	return nil
}

// countsTrainer returns the training step of path over tables (users, items; sharded: through
// the sharded path, else the plain loop) and its end: a TrainPipeline's Flush, or an inference
// lookup, which must count nothing.
func countsTrainer(path string, tables []countsTable, sharded bool) (step, end func([]sample) error, err error) {
	users, items := tables[0], tables[1]
	train := embedding.ForwardOptions{Train: true}
	switch path {
	case "lookup":
		step = func(b []sample) error {
			ids, _, one := sampleIDs(b)
			return cgotorch.TryWithScope(func() error {
				for k, t := range tables {
					it := cgotorch.MustFromSlice([][]int64{one, ids}[k])
					rows, err := t.Lookup(it)
					if err != nil {
						return err
					}
					if err := t.Update(it, rows); err != nil {
						return err
					}
				}
				return nil
			})
		}
		end = func(b []sample) error {
			ids, _, one := sampleIDs(b)
			return cgotorch.TryWithScope(func() error {
				_, _, err := users.Read(cgotorch.MustFromSlice(one))
				if err == nil {
					_, _, err = items.Read(cgotorch.MustFromSlice(ids))
				}
				return err
			})
		}
		return step, end, nil
	case "forward":
		forward := func(b []sample, o embedding.ForwardOptions) error {
			ids, offs, one := sampleIDs(b)
			return cgotorch.TryWithScope(func() error {
				u, err := users.Forward(cgotorch.MustFromSlice(one), o)
				if err != nil {
					return err
				}
				v, err := items.ForwardBag(cgotorch.MustFromSlice(ids), cgotorch.MustFromSlice(offs), nil, embedding.Sum, o)
				if err != nil || !o.Train {
					return err
				}
				u.Sum().Add(v.Sum()).Backward()
				if err := users.Step(); err != nil {
					return err
				}
				return items.Step()
			})
		}
		step = func(b []sample) error { return forward(b, train) }
		end = func(b []sample) error { return forward(b, embedding.ForwardOptions{}) }
		return step, end, nil
	}
	m, err := newBagsModel(users, items, strings.HasPrefix(path, "seq"))
	if err != nil {
		return nil, nil, err
	}
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		return nil, nil, err
	}
	step = func(b []sample) error {
		opt.ZeroGrad()
		err := cgotorch.TryWithScope(func() error { l, err := m.loss(b); l.Backward(); return err })
		if err != nil {
			return err
		}
		return opt.Step()
	}
	end = func([]sample) error { return nil }
	switch {
	case !sharded || !strings.Contains(path, "-"): // the plain loop
	case strings.HasSuffix(path, "-step"):
		step = func(b []sample) error { _, err := TrainStep(opt, m.lookups, m.loss, b); return err }
	default: // a pipeline
		p, err := NewTrainPipeline(opt, m.lookups, m.loss, TrainPipelineOptions{})
		if err != nil {
			return nil, nil, err
		}
		step = func(b []sample) error { _, _, err := p.Progress(b); return err }
		end = func([]sample) error { _, _, err := p.Flush(); return err }
	}
	return step, end, nil
}

// sameCounts compares the counts of sharded tables with those of local ones (collective): the
// ids that have a row, their frequencies where access is tracked, and how many ids are counted
// for admission.
func sameCounts(sharded, local []countsTable) error {
	for k, t := range sharded {
		st, lt := t.(*ShardedTable), local[k].(*embedding.Table)
		ids, freq, err := shardedCounts(st)
		if err != nil {
			return err
		}
		var wantIDs, wantFreq []int64
		if st.cfg.TrackAccess {
			wantIDs, _, wantFreq, err = lt.Metadata()
		} else {
			wantIDs, err = exportedIDs(lt.Export)
		}
		if err != nil {
			return err
		}
		_, counted, err := st.Admission()
		if err != nil {
			return err
		}
		_, wantCounted, err := lt.Admission()
		if err != nil {
			return err
		}
		if !slices.Equal(ids, wantIDs) || !slices.Equal(freq, wantFreq) || counted != wantCounted {
			return fmt.Errorf("table %q: ids %v, frequencies %v, %d counted; one process: %v, %v, %d",
				st.name, ids, freq, counted, wantIDs, wantFreq, wantCounted)
		}
	}
	return nil
}

// shardedCounts returns the ids of st that have a row, ascending, and their frequencies (nil
// without access tracking), gathered from every shard (collective).
func shardedCounts(st *ShardedTable) (ids, freq []int64, err error) {
	if !st.cfg.TrackAccess {
		ids, err = exportedIDs(st.Export)
		return ids, nil, err
	}
	rows, err := gatherMeta(st)
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(rows, func(a, b rowMeta) int { return cmp.Compare(a.id, b.id) })
	for _, r := range rows {
		ids, freq = append(ids, r.id), append(freq, r.freq)
	}
	return ids, freq, nil
}

// exportedIDs returns the ids of a table's export (ascending).
func exportedIDs(export func() (*embedding.Snapshot, error)) ([]int64, error) {
	snap, err := export()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	return cgotorch.ToSlice[int64](snap.IDs)
}
