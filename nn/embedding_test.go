package nn_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// embCase is one case of testdata/embedding.json (gen_embedding.py): a torch.nn.Embedding or
// EmbeddingBag twin holding rows for table_ids, its output for ids and the dense gradient of
// loss = sum(out * coef) with respect to every row.
type embCase struct {
	Name     string      `json:"name"`
	Kind     string      `json:"kind"`
	Dim      int         `json:"dim"`
	TableIDs []int64     `json:"table_ids"`
	Rows     [][]float32 `json:"rows"`
	IDs      []int64     `json:"ids"`
	IDsShape []int64     `json:"ids_shape"`
	Offsets  []int64     `json:"offsets"`
	Mode     string      `json:"mode"`
	Weights  []float32   `json:"weights"`
	Padding  *int64      `json:"padding"`
	MaxNorm  *float64    `json:"max_norm"`
	Coef     []float32   `json:"coef"`
	Out      []float32   `json:"out"`
	OutShape []int64     `json:"out_shape"`
	Grad     [][]float32 `json:"grad"`
	After    [][]float32 `json:"rows_after"`
}

func loadEmbCases(t *testing.T) []embCase {
	t.Helper()
	b, err := os.ReadFile("testdata/embedding.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []embCase }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 10 {
		t.Fatalf("only %d cases", len(f.Cases))
	}
	return f.Cases
}

// Tolerances: outputs and gradients are sums of a few float32 products of exact binary
// fractions, so they agree to rounding; renormalised rows (a float32 norm and a division)
// to a few ulps.
const embTol = 1e-5

func near(a, b float32) bool { return math.Abs(float64(a-b)) <= embTol*(1+math.Abs(float64(b))) }

func closeSlices(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !near(got[i], want[i]) {
			t.Fatalf("%s[%d] = %v, want %v\n got %v\nwant %v", what, i, got[i], want[i], got, want)
		}
	}
}

func newEmbTable(t testing.TB, name string, cfg embedding.Config) *embedding.Table {
	t.Helper()
	tbl, err := embedding.NewNamed(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	return tbl
}

func f32(t testing.TB, x *cgotorch.Tensor) []float32 {
	t.Helper()
	v, err := cgotorch.ToSlice[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// parityDevices are where the parity tests run: the CPU, and the first GPU when there is one
// (the table's rows, the ids, offsets, weights and the loss all on it).
func parityDevices() []cgotorch.Device {
	if cgotorch.CUDAAvailable() {
		return []cgotorch.Device{cgotorch.CPU, cgotorch.CUDA(0)}
	}
	return []cgotorch.Device{cgotorch.CPU}
}

// setup makes a table on dev (SGD, lr 1: a step gives rows - grad) holding the case's rows, the
// padding id left out (it must never be inserted).
func (c *embCase) setup(t *testing.T, suffix string, dev cgotorch.Device) *embedding.Table {
	tbl := newEmbTable(t, "nn-parity/"+c.Name+suffix+"/"+dev.String(), embedding.Config{Dim: c.Dim,
		Initializer: embedding.Zeros{}, Optimizer: embedding.SGD{LR: 1}, Device: dev})
	var ids []int64
	var vals []float32
	for r, id := range c.TableIDs {
		if c.Padding != nil && id == *c.Padding {
			continue
		}
		ids = append(ids, id)
		vals = append(vals, c.Rows[r]...)
	}
	if err := tbl.WriteIDs(ids, vals); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func (c *embCase) options(fused bool) nn.EmbeddingOptions {
	o := nn.EmbeddingOptions{Fused: fused}
	if c.Padding != nil {
		o.Padding, o.PaddingID = true, *c.Padding
	}
	if c.MaxNorm != nil {
		o.MaxNorm = *c.MaxNorm
	}
	return o
}

// forward runs the case through nn.Embedding or nn.EmbeddingBag, its inputs on the table's
// device.
func (c *embCase) forward(t *testing.T, tbl *embedding.Table, fused bool) (*cgotorch.Tensor, nn.Stepper) {
	dev := tbl.Config().Device
	ids := onDevice(t, cgotorch.MustFromSlice(c.IDs, c.IDsShape...), dev)
	switch c.Kind {
	case "embedding":
		e := nn.NewEmbedding(tbl, c.options(fused))
		return e.Forward(ids), e
	case "bag":
		mode := map[string]embedding.BagMode{"sum": embedding.Sum, "mean": embedding.Mean, "max": embedding.Max}[c.Mode]
		b := nn.NewEmbeddingBag(tbl, mode, c.options(fused))
		var off, w *cgotorch.Tensor
		if c.Offsets != nil {
			off = onDevice(t, cgotorch.MustFromSlice(c.Offsets), dev)
		}
		if c.Weights != nil {
			w = onDevice(t, cgotorch.MustFromSlice(c.Weights, c.IDsShape...), dev)
		}
		return b.ForwardWeighted(ids, off, w), b
	}
	t.Fatalf("kind %q", c.Kind)
	return nil, nil
}

func (c *embCase) backward(t *testing.T, out *cgotorch.Tensor, dev cgotorch.Device) {
	if out.Device().Type != dev.Type {
		t.Fatalf("output on %v, want %v", out.Device(), dev)
	}
	coef := onDevice(t, cgotorch.MustFromSlice(c.Coef, c.OutShape...), dev)
	out.Mul(coef).Sum().Backward()
}

func onDevice(t *testing.T, x *cgotorch.Tensor, dev cgotorch.Device) *cgotorch.Tensor {
	t.Helper()
	if dev.Type == cgotorch.DeviceCPU {
		return x
	}
	y, err := x.To(dev, cgotorch.KeepDType)
	if err != nil {
		t.Fatal(err)
	}
	x.Close()
	return y
}

// rowsNow reads the table's rows of the case's ids (not inserting).
func (c *embCase) rowsNow(t *testing.T, tbl *embedding.Table) [][]float32 {
	r, found, err := tbl.ReadIDs(c.TableIDs)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := embedding.Rows(r)
	for i, f := range found {
		if !f {
			rows[i] = nil
		}
	}
	return rows
}

func TestEmbeddingParityWithTorch(t *testing.T) {
	for _, dev := range parityDevices() {
		for _, c := range loadEmbCases(t) {
			t.Run(c.Name+"/"+dev.String(), func(t *testing.T) { c.checkParity(t, dev) })
		}
	}
}

// checkParity: output, pending gradients and the rows after one step equal the twin's.
func (c *embCase) checkParity(t *testing.T, dev cgotorch.Device) {
	tbl := c.setup(t, "", dev)
	before := tbl.Len()
	out, st := c.forward(t, tbl, false)
	if got := out.Shape(); fmt.Sprint(got) != fmt.Sprint(c.OutShape) {
		t.Fatalf("shape %v, want %v", got, c.OutShape)
	}
	closeSlices(t, "output", f32(t, out), c.Out)
	if tbl.Len() != before {
		t.Fatalf("Len %d -> %d: the padding id (or another) was inserted", before, tbl.Len())
	}
	c.backward(t, out, dev)
	// The pending gradient of each id is the twin's gradient of its row; ids without a
	// pending gradient have a zero one in the twin.
	ids, grads, err := tbl.PendingGrad()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := cgotorch.ToSlice[int64](ids)
	pg, _ := embedding.Rows(grads)
	pending := map[int64][]float32{}
	for i, id := range pid {
		pending[id] = pg[i]
	}
	for r, id := range c.TableIDs {
		g, ok := pending[id]
		if c.Padding != nil && id == *c.Padding && ok {
			t.Fatalf("the padding id has a pending gradient %v", g)
		}
		if !ok {
			g = make([]float32, c.Dim)
		}
		closeSlices(t, fmt.Sprintf("grad of row %d (id %d)", r, id), g, c.Grad[r])
	}
	// One SGD step with lr 1: every row becomes (its renormalised value) - grad.
	if err := st.Step(); err != nil {
		t.Fatal(err)
	}
	now := c.rowsNow(t, tbl)
	for r, id := range c.TableIDs {
		if c.Padding != nil && id == *c.Padding {
			if now[r] != nil {
				t.Fatalf("padding id inserted")
			}
			continue
		}
		want := make([]float32, c.Dim)
		for j := range want {
			want[j] = c.After[r][j] - c.Grad[r][j]
		}
		closeSlices(t, fmt.Sprintf("row %d after the step", r), now[r], want)
	}
}

// Fused mode gives the numbers of accumulate + Step, with nothing pending afterwards.
func TestEmbeddingParityFused(t *testing.T) {
	for _, dev := range parityDevices() {
		for _, c := range loadEmbCases(t) {
			t.Run(c.Name+"/"+dev.String(), func(t *testing.T) { c.checkFused(t, dev) })
		}
	}
}

func (c *embCase) checkFused(t *testing.T, dev cgotorch.Device) {
	tbl := c.setup(t, "/fused", dev)
	out, st := c.forward(t, tbl, true)
	closeSlices(t, "output", f32(t, out), c.Out)
	c.backward(t, out, dev)
	ids, _, err := tbl.PendingGrad()
	if err != nil || ids.Numel() != 0 {
		t.Fatalf("pending after a fused backward: %v %v", ids, err)
	}
	if err := st.Step(); err != nil { // nothing pending: no second step
		t.Fatal(err)
	}
	st2, _ := tbl.Stats()
	if st2.Step != 1 {
		t.Fatalf("step counter %d, want 1", st2.Step)
	}
	now := c.rowsNow(t, tbl)
	for r, id := range c.TableIDs {
		if c.Padding != nil && id == *c.Padding {
			continue
		}
		want := make([]float32, c.Dim)
		for j := range want {
			want[j] = c.After[r][j] - c.Grad[r][j]
		}
		closeSlices(t, fmt.Sprintf("row %d", r), now[r], want)
	}
}

// optimizers.md's pitfall: a dim-1 table, one id and a .sum() loss must move the row (a sparse
// gradient with one 1x1 entry of strides (0, 0) turned into zeros in this libtorch).
func TestEmbeddingDim1SingleIDSum(t *testing.T) {
	for _, fused := range []bool{false, true} {
		tbl := newEmbTable(t, fmt.Sprintf("nn-dim1/%v", fused), embedding.Config{Dim: 1, Initializer: embedding.Constant{Value: 0.5}, Optimizer: embedding.SGD{LR: 0.1}})
		e := nn.NewEmbedding(tbl, nn.EmbeddingOptions{Fused: fused})
		e.Forward(cgotorch.MustFromSlice([]int64{77})).Sum().Backward()
		if err := e.Step(); err != nil {
			t.Fatal(err)
		}
		r, _ := tbl.LookupIDs([]int64{77})
		if v := f32(t, r); !near(v[0], 0.4) {
			t.Fatalf("fused=%v: row %v, want 0.4", fused, v)
		}
	}
}

// Embedding -> Linear -> loss -> Backward -> one nn.Optimizer step through the Steppers: the
// looked-up rows move and no other row does, and the dense layer moves too.
func TestEmbeddingEndToEndStep(t *testing.T) {
	cgotorch.ManualSeed(3)
	tbl := newEmbTable(t, "nn-e2e", embedding.Config{Dim: 4, Initializer: embedding.Uniform{Low: -1, High: 1}, Optimizer: embedding.Adagrad{LR: 0.1}})
	if _, err := tbl.LookupIDs([]int64{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	before := exportRows(t, tbl)
	model := &embTower{emb: nn.NewEmbedding(tbl, nn.EmbeddingOptions{}), lin: nn.NewLinear(4, 1, true)}
	model.Add("emb", model.emb)
	model.Add("lin", model.lin)
	opt, err := nn.NewSGD(model, nn.SGDOptions{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if len(nn.Steppers(model)) != 1 {
		t.Fatalf("steppers %v", nn.Steppers(model))
	}
	w0 := f32(t, model.lin.Parameters()[0].Tensor)
	opt.ZeroGrad()
	ids := cgotorch.MustFromSlice([]int64{2, 5, 2, 9}, 2, 2) // 9 is new: inserted by the lookup
	model.Forward(ids).Sum().Backward()
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	after := exportRows(t, tbl)
	if len(after) != 7 {
		t.Fatalf("%d ids, want 7", len(after))
	}
	for id, row := range after {
		moved := fmt.Sprint(row) != fmt.Sprint(before[id])
		if looked := id == 2 || id == 5 || id == 9; looked != moved {
			t.Errorf("id %d: looked up %v, moved %v", id, looked, moved)
		}
	}
	if fmt.Sprint(f32(t, model.lin.Parameters()[0].Tensor)) == fmt.Sprint(w0) {
		t.Error("the dense layer did not move")
	}
	if st, _ := tbl.Stats(); st.Step != 1 {
		t.Errorf("table steps %d, want 1", st.Step)
	}
}

type embTower struct {
	nn.Container
	emb *nn.Embedding
	lin *nn.Linear
}

func (m *embTower) Forward(ids *nn.Tensor) *nn.Tensor {
	x := m.emb.Forward(ids)         // [2, 2, 4]
	x = x.SumDim([]int64{1}, false) // [2, 4]
	return m.lin.Forward(x)
}

func exportRows(t *testing.T, tbl *embedding.Table) map[int64][]float32 {
	t.Helper()
	s, err := tbl.Export()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, _ := cgotorch.ToSlice[int64](s.IDs)
	rows, _ := embedding.Rows(s.Rows)
	m := map[int64][]float32{}
	for i, id := range ids {
		m[id] = rows[i]
	}
	return m
}

// Evaluation mode: nothing inserted, unknown ids give the default row, no gradient.
func TestEmbeddingEvalMode(t *testing.T) {
	tbl := newEmbTable(t, "nn-eval", embedding.Config{Dim: 2, Initializer: embedding.Constant{Value: 7}, ReadDefault: embedding.ReadZeros})
	if err := tbl.WriteIDs([]int64{1}, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	e := nn.NewEmbedding(tbl, nn.EmbeddingOptions{})
	e.Train(false)
	out := e.Forward(cgotorch.MustFromSlice([]int64{1, 99, 1}))
	closeSlices(t, "eval output", f32(t, out), []float32{1, 2, 0, 0, 1, 2})
	if out.RequiresGrad() {
		t.Error("an evaluation output requires grad")
	}
	if tbl.Len() != 1 {
		t.Errorf("Len %d after an evaluation lookup, want 1", tbl.Len())
	}
	bag := nn.NewEmbeddingBag(tbl, embedding.Mean, nn.EmbeddingOptions{})
	bag.Train(false)
	closeSlices(t, "eval bag", f32(t, bag.Forward(cgotorch.MustFromSlice([]int64{1, 99}, 1, 2), nil)), []float32{0.5, 1})
	if tbl.Len() != 1 {
		t.Errorf("Len %d after an evaluation bag, want 1", tbl.Len())
	}
}

// Module math panics with a *cgotorch.Error (cgotorch.Try recovers it); the table's own
// methods return errors.
func TestEmbeddingErrorPolicy(t *testing.T) {
	tbl := newEmbTable(t, "nn-errors", embedding.Config{Dim: 2})
	e := nn.NewEmbedding(tbl, nn.EmbeddingOptions{})
	err := cgotorch.Try(func() { e.Forward(cgotorch.MustFromSlice([]float32{1})) })
	if !errors.Is(err, cgotorch.ErrInvalidArgument) {
		t.Fatalf("float ids: %v", err)
	}
	if _, err := tbl.Forward(cgotorch.MustFromSlice([]float32{1}), embedding.ForwardOptions{Train: true}); !errors.Is(err, embedding.ErrBadInput) {
		t.Fatalf("table forward, float ids: %v", err)
	}
	bag := nn.NewEmbeddingBag(tbl, embedding.Max, nn.EmbeddingOptions{})
	ids := cgotorch.MustFromSlice([]int64{1, 2})
	for name, f := range map[string]func(){
		"bad offsets": func() { bag.Forward(ids, cgotorch.MustFromSlice([]int64{1})) },
		"weights, max": func() {
			bag.ForwardWeighted(ids, cgotorch.MustFromSlice([]int64{0}), cgotorch.MustFromSlice([]float32{1, 1}))
		},
		"1-d, no offsets": func() { bag.Forward(ids, nil) },
	} {
		if err := cgotorch.Try(f); !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	out := e.Forward(ids)
	loss := out.Sum()
	tbl.Close()
	if err := cgotorch.Try(func() { e.Forward(ids) }); !errors.Is(err, cgotorch.ErrClosed) {
		t.Fatalf("closed table: %v", err)
	}
	if err := cgotorch.Try(loss.Backward); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("backward after close: %v", err)
	}
	e.ZeroGrad() // a closed table has nothing pending: no panic
	if err := e.Step(); !errors.Is(err, embedding.ErrClosed) {
		t.Fatalf("step after close: %v", err)
	}
}

// 2,000 training iterations that free nothing keep the live tensor handles bounded: the
// graphs (and the table references their nodes hold) are released by the cleanups.
func TestEmbeddingLoopWithoutFreesStaysBounded(t *testing.T) {
	defer cgotorch.SetGCThreshold(cgotorch.SetGCThreshold(1 << 20))
	tbl := newEmbTable(t, "nn-memory", embedding.Config{Dim: 8, Optimizer: embedding.SparseAdam{LR: 0.01}})
	e := nn.NewEmbedding(tbl, nn.EmbeddingOptions{})
	bag := nn.NewEmbeddingBag(tbl, embedding.Mean, nn.EmbeddingOptions{Fused: true})
	runtime.GC()
	base := cgotorch.LiveTensors()
	for i := 0; i < 2000; i++ {
		ids := cgotorch.MustFromSlice([]int64{int64(i % 50), int64(i % 7), 3, int64(i % 50)})
		e.Forward(ids).Sum().Backward()
		if err := e.Step(); err != nil {
			t.Fatal(err)
		}
		bag.Forward(ids, cgotorch.MustFromSlice([]int64{0, 1})).Sum().Backward()
	}
	deadline := time.Now().Add(20 * time.Second)
	for cgotorch.LiveTensors() > base+32 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := cgotorch.LiveTensors(); n > base+32 {
		t.Errorf("%d live tensors after 2,000 iterations and a collection (started at %d)", n, base)
	}
	if st, _ := tbl.Stats(); st.Step != 4000 || st.Len != 50 {
		t.Errorf("stats %+v, want 4000 steps and 50 ids", st)
	}
}
