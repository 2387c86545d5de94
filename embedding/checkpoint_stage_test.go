package embedding

import (
	"reflect"
	"slices"
	"testing"

	"github.com/gorec/gorec/internal/ctable"
)

// A stager replays exactly the stream a save gives, also when the table outgrew the arenas it
// was sized for (rows past them get memory of their own).
func TestStagerReplaysTheSaveStream(t *testing.T) {
	for _, sized := range []int64{5000, 0} {
		tbl, err := New(Config{Dim: 3, Optimizer: SGD{LR: 0.1, Momentum: 0.9}, TrackAccess: true})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, 3000)
		for i := range ids {
			ids[i] = int64(i)*13 - 900
		}
		if err := tbl.UpdateIDs(ids, make([]float32, 3*len(ids))); err != nil {
			t.Fatal(err)
		}
		if err := tbl.SetAdmission(2); err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.LookupIDs([]int64{1 << 40, 1<<40 + 1}); err != nil { // two admission counts
			t.Fatal(err)
		}
		const chunk = 700
		var want []ctable.Chunk // deep copies of the direct stream
		if err := tbl.t.Save(chunk, func(c *ctable.Chunk) error {
			want = append(want, deepCopy(c))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s := newStager(sized, 3+3) // rows and the momentum state
		if err := tbl.t.Save(chunk, s.add); err != nil {
			t.Fatal(err)
		}
		var got []ctable.Chunk
		if err := s.replay(func(c *ctable.Chunk) error { got = append(got, deepCopy(c)); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(want) != 6 || !reflect.DeepEqual(got, want) { // 5 chunks of rows, 1 of counts
			t.Errorf("sized for %d rows: the replay differs from the save stream (%d chunks, %d direct)", sized, len(got), len(want))
		}
		tbl.Close()
	}
}

func deepCopy(c *ctable.Chunk) ctable.Chunk {
	d := *c
	d.IDs, d.Rows, d.Counts = slices.Clone(c.IDs), slices.Clone(c.Rows), slices.Clone(c.Counts)
	d.LastStep, d.Frequency, d.Stamp = slices.Clone(c.LastStep), slices.Clone(c.Frequency), slices.Clone(c.Stamp)
	d.States = nil
	for _, st := range c.States {
		d.States = append(d.States, slices.Clone(st))
	}
	return d
}
