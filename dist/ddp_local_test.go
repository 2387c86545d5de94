package dist

// DataParallel's tests in one process (a group of one rank): the bucket plan, the options, and
// the embedding tables' place.

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

func oneRank(t *testing.T) *Group {
	t.Helper()
	g, err := New(Options{Rank: 0, WorldSize: 1, Store: FileStore(filepath.Join(t.TempDir(), "store")), Timeout: 10 * time.Second, Job: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func named(name string, n int64, dt cgotorch.DType) nn.NamedParameter {
	return nn.NamedParameter{Name: name, Tensor: cgotorch.Zeros([]int64{n}, cgotorch.WithDType(dt))}
}

// Buckets hold one dtype and at most the cap, in parameter order; a larger tensor is alone.
func TestBuckets(t *testing.T) {
	ps := []nn.NamedParameter{
		named("big", 100, cgotorch.Float32), // 400 bytes
		named("a", 10, cgotorch.Float32),
		named("d", 5, cgotorch.Float64),
		named("b", 10, cgotorch.Float32),
		named("c", 1, cgotorch.Float32),
	}
	var got [][]string
	for _, b := range buckets(ps, 80) {
		var names []string
		for i, m := range b.members {
			names = append(names, m.Name)
			if m.Tensor.DType() != b.dtype || b.numels[i] != m.Tensor.Numel() {
				t.Errorf("bucket member %q: dtype %v numel %d, bucket %v %d", m.Name, m.Tensor.DType(), m.Tensor.Numel(), b.dtype, b.numels[i])
			}
		}
		got = append(got, names)
	}
	if want := [][]string{{"big"}, {"a", "b"}, {"c"}, {"d"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("buckets %v, want %v", got, want)
	}
	if n := len(buckets(ps, DefaultBucketBytes)); n != 2 {
		t.Errorf("%d buckets under the default cap, want 2 (one per dtype)", n)
	}
}

// Bad options and arguments are refused.
func TestDataParallelOptions(t *testing.T) {
	g := oneRank(t)
	if _, err := NewDataParallel(g, mlp(1, 4), DataParallelOptions{BucketBytes: -1}); !errors.Is(err, ErrConfig) {
		t.Errorf("negative bucket size: %v, want %v", err, ErrConfig)
	}
	if _, err := NewDataParallel(nil, mlp(1, 4), DataParallelOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil group: %v, want %v", err, ErrInvalidArgument)
	}
	if _, err := NewDataParallel(g, nil, DataParallelOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil model: %v, want %v", err, ErrInvalidArgument)
	}
}

type tower struct {
	nn.Container
	emb *nn.Embedding
	lin *nn.Linear
}

// The tables of a model are its Steppers, not its Parameters: an optimizer made from the
// DataParallel steps them, and no bucket holds them; a parameter shared under two names is
// synchronized once.
func TestDataParallelTables(t *testing.T) {
	g := oneRank(t)
	tbl, err := embedding.NewNamed("ddp-tower", embedding.Config{Dim: 4, Optimizer: embedding.SGD{LR: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	m := &tower{emb: nn.NewEmbedding(tbl, nn.EmbeddingOptions{}), lin: nn.NewLinear(4, 1, true)}
	m.Add("emb", m.emb)
	m.Add("lin", m.lin)
	m.Add("shared", m.lin)
	ddp, err := NewDataParallel(g, m, DataParallelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range ddp.grads {
		for _, p := range b.members {
			names = append(names, p.Name)
		}
	}
	if want := []string{"lin.weight", "lin.bias"}; !reflect.DeepEqual(names, want) {
		t.Errorf("bucketed %v, want %v", names, want)
	}
	opt, err := nn.NewSGD(ddp, nn.SGDOptions{LR: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if len(opt.Steppers()) != 1 {
		t.Fatalf("the optimizer steps %d tables, want 1", len(opt.Steppers()))
	}
	ids := []int64{3}
	before, _, err := tbl.ReadIDs(ids)
	if err != nil {
		t.Fatal(err)
	}
	w := float64s(m.lin.Weight)
	opt.ZeroGrad()
	m.lin.Forward(m.emb.Forward(cgotorch.MustFromSlice(ids, 1))).Sum().Backward()
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	after, _, err := tbl.ReadIDs(ids)
	if err != nil {
		t.Fatal(err)
	}
	if maxDiff(float64s(before), float64s(after)) == 0 || maxDiff(w, float64s(m.lin.Weight)) == 0 {
		t.Error("the step left the table's row or the dense weights as they were")
	}
}

// A tensor operation that fails on this rank (a closed parameter) is an error wrapping
// ErrInvalidArgument, before any collective: the group stays usable.
func TestDataParallelLocalFailure(t *testing.T) {
	g := oneRank(t)
	m := mlp(1, 4)
	ddp, err := NewDataParallel(g, m, DataParallelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Forward(cgotorch.Randn([]int64{2, 8})).Sum().Backward()
	m.Parameters()[2].Tensor.Close()
	if err := ddp.SyncGradients(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("sync with a closed parameter: %v, want %v", err, ErrInvalidArgument)
	}
	if err := g.Barrier(); err != nil {
		t.Errorf("the group after a local failure: %v", err)
	}
}

// An optimizer made from the model of a DataParallel, which would step without the sync, is
// refused.
func TestDataParallelRefusesModelOptimizer(t *testing.T) {
	m := mlp(1, 4)
	ddp, err := NewDataParallel(oneRank(t), m, DataParallelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nn.NewAdam(m, nn.DefaultAdamOptions()); !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Errorf("an optimizer from the model: %v, want %v", err, cgotorch.ErrInvalidArgument)
	} else {
		t.Log(err)
	}
	if _, err := nn.NewAdam(ddp, nn.DefaultAdamOptions()); err != nil {
		t.Errorf("an optimizer from the DataParallel: %v", err)
	}
}
