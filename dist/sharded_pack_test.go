package dist

import (
	"math"
	"testing"

	"github.com/gorec/gorec/cgotorch"
)

// Ids survive packing bit for bit, the extremes and negative ones included, and each keeps its
// row; header slots carry their value.
func TestPackRowsRoundTrip(t *testing.T) {
	ids := []int64{math.MinInt64, -1, 0, 1, 1<<22 - 1, 1 << 22, 1<<43 + 5, math.MaxInt64, -7}
	rows := cgotorch.Arange(0, float64(2*len(ids)), 1).View(int64(len(ids)), 2)
	defer rows.Close()
	// a header (3), then the ids in reverse order
	sent, slot := []int64{3}, []int64{0}
	for i := len(ids) - 1; i >= 0; i-- {
		sent, slot = append(sent, ids[i]), append(slot, int64(i))
	}
	packed, err := packRows(sent, slot, rows, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer packed.Close()
	got, err := unpackIDs(packed)
	if err != nil {
		t.Fatal(err)
	}
	for k := range sent {
		if got[k] != sent[k] {
			t.Errorf("slot %d: unpacked %d, sent %d", k, got[k], sent[k])
		}
	}
	data := make([]int64, len(ids))
	for k := range data {
		data[k] = int64(k + 1)
	}
	vals, err := unpackRows(packed, data, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer vals.Close()
	v, err := cgotorch.ToSlice[float32](vals)
	if err != nil {
		t.Fatal(err)
	}
	for k, i := range slot[1:] {
		if v[2*k] != float32(2*i) || v[2*k+1] != float32(2*i+1) {
			t.Errorf("row of slot %d: %v, want row %d", k+1, v[2*k:2*k+2], i)
		}
	}
}
