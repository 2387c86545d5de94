package dist

import (
	"context"
	"errors"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// While a TrainPipeline holds rows fetched for a batch it has not trained yet, Write, Delete
// and Evict of the table fail with ErrBadInput and change nothing (before, the batch trained on
// rows the plain loop would not see); after Flush they run, and Close lets them run too.
func TestTrainPipelineHoldsItsTables(t *testing.T) {
	g := oneRank(t)
	cfg := trainConfigs["adagrad"]
	cfg.TrackAccess = true
	st, err := NewShardedTable(g, "users", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := newTrainModel(st)
	opt, err := nn.NewAdam(m, nn.AdamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lookups := func(b []sample) []Prefetch {
		ids, _, one := sampleIDs(b)
		l := prefetches(ids, one)
		for i := range l {
			l[i].Table = st
		}
		return l
	}
	loss := func(b []sample) (*cgotorch.Tensor, error) {
		x, _ := m.features(b)
		return x.Sum(), nil
	}
	changes := map[string]func() error{
		"write": func() error {
			return st.Write(cgotorch.MustFromSlice([]int64{1}), cgotorch.MustFromSlice(make([]float32, cfg.Dim), 1, int64(cfg.Dim)))
		},
		"delete": func() error { _, err := st.Delete(cgotorch.MustFromSlice([]int64{1})); return err },
		"evict": func() error {
			_, _, err := st.Evict(context.Background(), embedding.KeepRecent(0), false)
			return err
		},
	}
	for _, end := range []string{"flush", "close"} {
		// A TrainStep holds the rows of its step only while it runs: before, its release
		// without a hold left the count at -1, and the pipeline's hold at 0 refused nothing.
		if _, err := TrainStep(opt, lookups, loss, globalBatch(5)); err != nil {
			t.Fatal(err)
		}
		p, err := NewTrainPipeline(opt, lookups, loss, TrainPipelineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for b := 0; b < 2; b++ {
			if _, _, err := p.Progress(globalBatch(b)); err != nil {
				t.Fatal(err)
			}
		}
		before, err := st.Len()
		if err != nil || before == 0 {
			t.Fatalf("%d rows (%v)", before, err)
		}
		for name, change := range changes {
			if err := change(); !errors.Is(err, embedding.ErrBadInput) {
				t.Fatalf("%s while the pipeline holds rows: %v, want ErrBadInput", name, err)
			}
			if n, err := st.Len(); err != nil || n != before {
				t.Fatalf("after the refused %s: %d rows (%v), want %d", name, n, err, before)
			}
		}
		if end == "flush" {
			if _, trained, err := p.Flush(); err != nil || !trained {
				t.Fatalf("flush: %v", err)
			}
		} else {
			p.Close()
		}
		for _, name := range []string{"write", "delete", "evict"} {
			if err := changes[name](); err != nil {
				t.Fatalf("%s after %s: %v", name, end, err)
			}
		}
		if n, err := st.Len(); err != nil || n != 0 {
			t.Fatalf("after %s and the eviction: %d rows (%v), want 0", end, n, err)
		}
	}
}
