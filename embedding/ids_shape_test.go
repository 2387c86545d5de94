package embedding_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
)

// The table operations take ids of any shape, as Forward and nn.Embedding do: results have the
// ids' shape (+ [Dim] for rows), values and gradients the ids' shape + [Dim]. They used to
// refuse ids that were not one-dimensional.
func TestIDsOfAnyShape(t *testing.T) {
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 1}, Initializer: embedding.Constant{Value: 1}})
	flat := []int64{1, 2, 3, 4, 5, 6}
	ids, err := cgotorch.FromSlice(flat, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer ids.Close()
	shape := func(x *cgotorch.Tensor) []int64 { defer x.Close(); return x.Shape() }
	r, err := tbl.Lookup(ids)
	if err != nil {
		t.Fatalf("Lookup [2, 3]: %v", err)
	}
	if s := shape(r); !reflect.DeepEqual(s, []int64{2, 3, 2}) {
		t.Errorf("Lookup [2, 3]: shape %v, want [2 3 2]", s)
	}
	g, _ := cgotorch.FromSlice(filled(12, 0.5), 2, 3, 2)
	defer g.Close()
	if err := tbl.Update(ids, g); err != nil {
		t.Fatalf("Update [2, 3] with grads [2, 3, 2]: %v", err)
	}
	v, _ := cgotorch.FromSlice(filled(12, 3), 2, 3, 2)
	defer v.Close()
	if err := tbl.Write(ids, v); err != nil {
		t.Fatalf("Write [2, 3]: %v", err)
	}
	rows, found, err := tbl.Read(ids)
	if err != nil {
		t.Fatal(err)
	}
	if s, f := shape(rows), shape(found); !reflect.DeepEqual(s, []int64{2, 3, 2}) || !reflect.DeepEqual(f, []int64{2, 3}) {
		t.Errorf("Read [2, 3]: shapes %v and %v", s, f)
	}
	ix, err := tbl.Indices(ids, false)
	if err != nil {
		t.Fatal(err)
	}
	if s := shape(ix); !reflect.DeepEqual(s, []int64{2, 3}) {
		t.Errorf("Indices [2, 3]: shape %v", s)
	}
	p, err := tbl.Prefetch(ids)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := floats(t, pr); len(got) != 12 || got[0] != 3 || !reflect.DeepEqual(pr.Shape(), []int64{2, 3, 2}) {
		t.Errorf("Prefetch [2, 3]: %v of shape %v", got, pr.Shape())
	}
	pr.Close()
	rs, err := tbl.ReadState(ids)
	if err != nil {
		t.Fatal(err)
	}
	if s := rs.Rows.Shape(); !reflect.DeepEqual(s, []int64{2, 3, 2}) {
		t.Errorf("ReadState [2, 3]: shape %v", s)
	}
	rs.Close()
	if n, err := tbl.Delete(ids); err != nil || n != 6 {
		t.Errorf("Delete [2, 3]: %d, %v", n, err)
	}
}
