package embedding_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

func Example() {
	users, err := embedding.NewNamed("example-users", embedding.Config{
		Dim:         2,
		Initializer: embedding.Constant{Value: 0.5},
		Optimizer:   embedding.SGD{LR: 0.1},
	})
	if err != nil {
		panic(err)
	}
	defer users.Close()

	// Training: look up (inserting new ids), then one optimizer step with the gradients.
	rows, _ := users.LookupIDs([]int64{1180210, 42, 1180210})
	fmt.Println(rows.Shape(), users.Len())
	_ = users.UpdateIDs([]int64{1180210, 42, 1180210}, []float32{1, 0, 1, 0, 1, 0}) // 1180210's are summed

	// Inference: read without inserting.
	r, found, _ := users.ReadIDs([]int64{1180210, 42, 7})
	v, _ := embedding.Rows(r)
	fmt.Println(v, found)
	// Output:
	// [3 2] 2
	// [[0.3 0.5] [0.4 0.5] [0 0]] [true true false]
}

func ExampleTable_Prefetch() {
	items, _ := embedding.New(embedding.Config{Dim: 3, Initializer: embedding.Constant{Value: 1}})
	defer items.Close()
	_, _ = items.LookupIDs([]int64{10, 11})

	p, _ := items.PrefetchIDs([]int64{10, 11, 12}) // read on a worker thread
	// ... other work ...
	rows, _ := p.Wait(context.Background())
	v, _ := embedding.Rows(rows)
	fmt.Println(v)
	_, err := p.Wait(context.Background())
	fmt.Println(errors.Is(err, embedding.ErrUnknownPrefetch))
	// Output:
	// [[1 1 1] [1 1 1] [0 0 0]]
	// true
}

func ExampleTable_Export() {
	t, _ := embedding.New(embedding.Config{
		Dim:         1,
		Initializer: embedding.Constant{Value: 1},
		Optimizer:   embedding.Adagrad{LR: 0.5},
	})
	defer t.Close()
	_ = t.UpdateIDs([]int64{3, 2}, []float32{2, 0})
	snap, _ := t.Export()
	defer snap.Close()
	ids, _ := cgotorch.ToSlice[int64](snap.IDs)
	rows, _ := embedding.Rows(snap.Rows)
	sum, _ := embedding.Rows(snap.States[0].Values)
	fmt.Println(ids, rows, snap.States[0].Name, sum, snap.Step)
	// Output:
	// [2 3] [[1] [0.5]] sum [[0] [4]] 1
}

// Rows straight into a buffer the caller reuses: no tensor, nothing allocated per call.
func ExampleTable_LookupInto() {
	t, _ := embedding.New(embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 0.5}})
	defer t.Close()
	buf := make([]float32, 3*t.Dim())
	for _, batch := range [][]int64{{1, 2, 3}, {3, 4, 5}} {
		if err := t.LookupInto(buf, batch); err != nil {
			panic(err)
		}
		fmt.Println(buf, t.Len())
	}
	found := make([]bool, 2)
	_ = t.ReadInto(buf[:4], found, []int64{5, 6}) // reads insert nothing
	fmt.Println(buf[:4], found, t.Len())
	// Output:
	// [0.5 0.5 0.5 0.5 0.5 0.5] 3
	// [0.5 0.5 0.5 0.5 0.5 0.5] 5
	// [0.5 0.5 0 0] [true false] 5
}

// A table streamed a chunk at a time, as one would push it to a serving store.
func ExampleTable_ExportEach() {
	t, _ := embedding.New(embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1}})
	defer t.Close()
	rows, _ := t.LookupIDs([]int64{30, 10, 20, 40, 50})
	rows.Close()
	_ = t.ExportEach(context.Background(), 2, func(c *embedding.ExportChunk) error {
		fmt.Println(c.Offset, c.Total, c.IDs, c.Rows) // valid during the call: copy what you keep
		return nil
	})
	// Output:
	// 0 5 [10 20] [1 1 1 1]
	// 2 5 [30 40] [1 1 1 1]
	// 4 5 [50] [1 1]
}

// A throwaway table needs no name: New's tables are in no registry.
func ExampleNew() {
	t, _ := embedding.New(embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 1}})
	defer t.Close()
	u, _ := embedding.New(embedding.Config{Dim: 2}) // another one: no name to clash
	defer u.Close()
	rows, _ := t.LookupIDs([]int64{7})
	v, _ := embedding.Rows(rows)
	fmt.Printf("%q %v\n", t.Name(), v)
	// Output:
	// "" [[1 1]]
}

// A few ids' rows and optimizer states, without exporting the table.
func ExampleTable_ReadState() {
	t, _ := embedding.New(embedding.Config{Dim: 1, Initializer: embedding.Constant{Value: 1},
		Optimizer: embedding.Adagrad{LR: 0.5}})
	defer t.Close()
	_ = t.UpdateIDs([]int64{3, 2}, []float32{2, 0})
	s, _ := t.ReadStateIDs([]int64{3, 9})
	defer s.Close()
	rows, _ := embedding.Rows(s.Rows)
	sum, _ := embedding.Rows(s.States[0].Values)
	found, _ := cgotorch.ToSlice[bool](s.Found)
	fmt.Println(rows, s.States[0].Name, sum, found)
	// Output:
	// [[0.5] [0]] sum [[4] [0]] [true false]
}

func ExampleNewNamed_nameTaken() {
	a, _ := embedding.NewNamed("example-shared", embedding.Config{Dim: 4})
	_, err := embedding.NewNamed("example-shared", embedding.Config{Dim: 4})
	fmt.Println(errors.Is(err, embedding.ErrNameTaken))
	b, ok := embedding.Get("example-shared")
	fmt.Println(ok, b.Dim())
	_ = a.Close() // closes the table for both handles, and frees the name
	_, err = b.LookupIDs([]int64{1})
	fmt.Println(errors.Is(err, embedding.ErrClosed))
	// Output:
	// true
	// true 4
	// true
}
