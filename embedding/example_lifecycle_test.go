package embedding_test

import (
	"context"
	"fmt"
	"os"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// A long-lived table forgets what it has not seen for a while, then gives the memory back.
func ExampleTable_Evict() {
	t, _ := embedding.NewNamed("example-evict", embedding.Config{Dim: 4, Optimizer: embedding.SGD{LR: 0.1}, TrackAccess: true})
	defer t.Close()
	grad := make([]float32, 3*4)
	for step, ids := range [][]int64{{1, 2, 3}, {1, 2, 4}, {1, 5, 6}} { // one update a step
		_ = t.UpdateIDs(ids, grad)
		fmt.Println("step", step+1, "rows", t.Len())
	}
	ev, _ := t.Evict(context.Background(), embedding.TTL(1), true) // last trained more than 1 step ago
	ids, _ := cgotorch.ToSlice[int64](ev.IDs)
	ev.Close()
	fmt.Println("evicted", ids, "left", t.Len())
	ev, _ = t.Evict(context.Background(), embedding.KeepFrequent(2), true) // ties keep the more recent, then the smaller id
	ids, _ = cgotorch.ToSlice[int64](ev.IDs)
	ev.Close()
	fmt.Println("evicted", ids, "left", t.Len())
	fmt.Println(t.Compact()) // the storage of freed rows goes back
	// Output:
	// step 1 rows 3
	// step 2 rows 4
	// step 3 rows 6
	// evicted [3] left 5
	// evicted [4 5 6] left 2
	// <nil>
}

// EvictIf takes any rule over a row's id, last step and frequency.
func ExampleTable_EvictIf() {
	t, _ := embedding.NewNamed("example-evict-if", embedding.Config{Dim: 2, TrackAccess: true})
	defer t.Close()
	_, _ = t.LookupIDs([]int64{10, 11, 12, 10, 10, 11}) // a training lookup counts each occurrence
	ev, _ := t.EvictIf(context.Background(), func(id, lastStep, frequency int64) bool { return frequency < 2 })
	defer ev.Close()
	ids, _ := cgotorch.ToSlice[int64](ev.IDs)
	fmt.Println(ids, t.Len())
	// Output:
	// [12] 2
}

// A checkpoint holds the tables' rows, optimizer states, metadata and step.
func ExampleSave() {
	dir, _ := os.MkdirTemp("", "gorec-example")
	defer os.RemoveAll(dir)
	t, _ := embedding.NewNamed("example-saved", embedding.Config{
		Dim:         2,
		Initializer: embedding.Constant{Value: 1},
		Optimizer:   embedding.Adagrad{LR: 0.5},
	})
	_ = t.UpdateIDs([]int64{7, 8}, []float32{1, 1, 0, 2})
	if err := embedding.Save(context.Background(), dir, t); err != nil {
		panic(err)
	}
	_ = t.Close() // (Load opens the tables under their saved names)

	loaded, err := embedding.Load(context.Background(), dir)
	if err != nil {
		panic(err)
	}
	u := loaded[0]
	defer u.Close()
	r, _, _ := u.ReadIDs([]int64{7, 8})
	v, _ := embedding.Rows(r)
	st, _ := u.Stats()
	fmt.Println(u.Name(), v, st.Step)
	// Output:
	// example-saved [[0.5 0.5] [1 0.5]] 1
}

// With admission, an id gets a row only at its k-th training lookup: rare ids cost nothing.
func ExampleTable_SetAdmission() {
	t, _ := embedding.NewNamed("example-admission", embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1}})
	defer t.Close()
	_ = t.SetAdmission(2)
	for _, batch := range [][]int64{{5, 6}, {5}} {
		r, _ := t.LookupIDs(batch)
		v, _ := embedding.Rows(r)
		fmt.Println(v, t.Len())
	}
	// Output:
	// [[0 0] [0 0]] 0
	// [[1 1]] 1
}

// Deltas ship a trainer's changes to a replica (a server, say) without copying the table.
func ExampleTable_Delta() {
	cfg := embedding.Config{Dim: 1, Initializer: embedding.Constant{Value: 1}, Optimizer: embedding.SGD{LR: 1}}
	trainer, _ := embedding.NewNamed("example-trainer", cfg)
	defer trainer.Close()
	replica, _ := embedding.NewNamed("example-replica", cfg)
	defer replica.Close()
	ship := func() {
		d, _ := trainer.Delta(true) // the changes since the last mark, and a new mark
		_ = replica.ApplyDelta(d)
		fmt.Println("shipped", len(d.IDs), "rows,", len(d.Deleted), "deletions")
	}
	_ = trainer.UpdateIDs([]int64{1, 2, 3}, []float32{1, 1, 1})
	ship() // the first delta: the whole table
	_ = trainer.UpdateIDs([]int64{2}, []float32{0.5})
	_, _ = trainer.DeleteIDs([]int64{3})
	ship()
	r, found, _ := replica.ReadIDs([]int64{1, 2, 3})
	v, _ := embedding.Rows(r)
	fmt.Println(v, found)
	// Output:
	// shipped 3 rows, 0 deletions
	// shipped 1 rows, 1 deletions
	// [[0] [-0.5] [0]] [true true false]
}
