package embedding_test

import (
	"reflect"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// ReadState gives a few ids' rows and optimizer states as Export gives them, zeros for ids not
// in the table, and inserts nothing.
func TestReadState(t *testing.T) {
	for name, opt := range map[string]embedding.Optimizer{
		"sgd-momentum": embedding.SGD{LR: 0.1, Momentum: 0.9},
		"rowwise":      embedding.RowWiseAdagrad{LR: 0.1},
		"adam":         embedding.SparseAdam{LR: 0.01},
		"sgd":          embedding.SGD{LR: 0.1},
	} {
		t.Run(name, func(t *testing.T) {
			tbl := newTable(t, embedding.Config{Dim: 3, Optimizer: opt})
			update(t, tbl, []int64{1, 2, 3}, 1, 2, 3, 4, 5, 6, 7, 8, 9)
			update(t, tbl, []int64{2}, 1, 1, 1) // (SGD momentum: rows 1 and 3 move on lazily)
			want := export(t, tbl)
			rs, err := tbl.ReadStateIDs([]int64{3, 99, 1})
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			found, err := cgotorch.ToSlice[bool](rs.Found)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(found, []bool{true, false, true}) || tbl.Len() != 3 {
				t.Errorf("found %v, %d ids: want [true false true], 3", found, tbl.Len())
			}
			rows, _ := embedding.Rows(rs.Rows)
			if !equalRows(rows[0], want.rows[3]) || !equalRows(rows[2], want.rows[1]) || !equalRows(rows[1], []float32{0, 0, 0}) {
				t.Errorf("rows %v, want %v, zeros, %v", rows, want.rows[3], want.rows[1])
			}
			if len(rs.States) != len(want.states) {
				t.Fatalf("%d states, want %d", len(rs.States), len(want.states))
			}
			for _, st := range rs.States {
				v, _ := embedding.Rows(st.Values)
				w := want.states[st.Name]
				if w == nil || !equalRows(v[0], w[3]) || !equalRows(v[2], w[1]) || !equalRows(v[1], make([]float32, len(w[1]))) {
					t.Errorf("state %q: %v, want %v, zeros, %v", st.Name, v, w[3], w[1])
				}
			}
		})
	}
}
