package embedding_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// hugeFloat is a finite float32 of magnitude 1e18 to 3.4e38: as a gradient it overflows every
// optimizer's step, or some; as a written value it is beyond Write's bound (2^64) or close to it.
func hugeFloat(r *rand.Rand) float32 {
	v := float32(math.Pow(10, 18+20.5*r.Float64()))
	if r.IntN(2) == 0 {
		v = -v
	}
	return v
}

// Property: random sequences of updates (some with huge gradients), writes (some of huge
// values), deletes, learning-rate changes and saves into one directory, for every optimizer
// in roundTripConfigs: an operation either succeeds or, refused, leaves the table as it was
// (ErrBadInput); every save succeeds, and the directory always loads with the contents of the
// last save. Before the overflow fix, an update with a huge gradient returned nil, and the next
// save left a directory that no longer loaded.
func TestCheckpointPropertyRandomOps(t *testing.T) {
	const ops = 150
	for name, cfg := range roundTripConfigs {
		r := rand.New(rand.NewPCG(33, uint64(len(name))))
		dir := t.TempDir()
		tbl := newTable(t, cfg, name)
		dim := cfg.Dim
		var saved *tableDump
		refused, loads := 0, 0
		randIDs := func() []int64 {
			ids := make([]int64, 1+r.IntN(6))
			for i := range ids {
				ids[i] = r.Int64N(24)
			}
			return ids
		}
		for op := 0; op < ops; op++ {
			before := dump(t, tbl)
			ids := randIDs()
			v := make([]float32, len(ids)*dim)
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			if r.IntN(4) == 0 {
				v[r.IntN(len(v))] = hugeFloat(r)
			}
			var err error
			what := ""
			switch k := r.IntN(10); {
			case k < 4:
				what, err = "update", tbl.UpdateIDs(ids, v) // refused without an optimizer
			case k < 6:
				what, err = "write", tbl.WriteIDs(ids, v)
			case k < 7:
				what = "delete"
				_, err = tbl.DeleteIDs(ids)
			case k < 8 && cfg.Optimizer != (embedding.NoOptimizer{}):
				what, err = "set lr", tbl.SetLR(0.01+0.1*r.Float64())
			default:
				what, err = "save", embedding.Save(context.Background(), dir, tbl)
				if err != nil {
					t.Fatalf("%s op %d: Save: %v", name, op, err)
				}
				d := dump(t, tbl)
				saved = &d
			}
			if err != nil {
				if !errors.Is(err, embedding.ErrBadInput) {
					t.Fatalf("%s op %d: %s: %v", name, op, what, err)
				}
				sameDump(t, name+": after a refused "+what, dump(t, tbl), before)
				refused++
			}
			if saved == nil || r.IntN(3) != 0 {
				continue
			}
			loaded, err := embedding.LoadRenamed(context.Background(), dir, func(s string) string { return s + "-loaded" })
			if err != nil {
				t.Fatalf("%s op %d (%s): Load: %v", name, op, what, err)
			}
			got := dump(t, loaded[0])
			loaded[0].Close()
			sameDump(t, name+": loaded after "+what, got, *saved)
			loads++
		}
		if refused == 0 || loads == 0 {
			t.Errorf("%s: %d operations refused, %d loads: the sequence tested nothing", name, refused, loads)
		}
	}
}
