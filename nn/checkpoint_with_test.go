package nn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// ckptModel is a table and dense layers, trained a step at a time.
type ckptModel struct {
	table *embedding.Table
	model *nn.Sequential
	opt   *nn.Optimizer
}

func newCkptModel(t *testing.T, name string) *ckptModel {
	t.Helper()
	tab, err := embedding.NewNamed(name, embedding.Config{Dim: 4, Optimizer: embedding.Adagrad{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tab.Close() })
	cgotorch.ManualSeed(5)
	model := nn.NewSequential(nn.NewEmbedding(tab, nn.EmbeddingOptions{}), nn.NewLinear(4, 2, true))
	opt, err := nn.NewAdam(model, nn.DefaultAdamOptions())
	if err != nil {
		t.Fatal(err)
	}
	return &ckptModel{tab, model, opt}
}

func (c *ckptModel) step(t *testing.T, ids ...int64) {
	t.Helper()
	c.opt.ZeroGrad()
	c.model.Forward(cgotorch.MustFromSlice(ids)).Sum().Backward()
	if err := c.opt.Step(); err != nil {
		t.Fatal(err)
	}
}

// state is the model's dense values and its table's ids, rows and step.
func (c *ckptModel) state(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	for _, p := range nn.StateDict(c.model) {
		v, err := cgotorch.ToSlice[float32](p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, p.Name, v)
	}
	s, err := c.table.Export()
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := cgotorch.ToSlice[int64](s.IDs)
	rows, _ := cgotorch.ToSlice[float32](s.Rows)
	fmt.Fprintln(&b, ids, rows, s.Step)
	return b.String()
}

// checksums are the manifest's checksums of the table and extra files, by name.
func checksums(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Tables []struct {
			Name   string            `json:"name"`
			CRC32C map[string]uint32 `json:"crc32c"`
		} `json:"tables"`
		Files []struct {
			Name   string `json:"name"`
			CRC32C uint32 `json:"crc32c"`
		} `json:"files"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, e := range m.Tables {
		out["table "+e.Name] = e.CRC32C
	}
	for _, e := range m.Files {
		out["file "+e.Name] = e.CRC32C
	}
	return out
}

// A staged save with a file of the caller's writes what an unstaged one writes, plus the file,
// and LoadCheckpointWith gives both back.
func TestCheckpointWithStagedAndFiles(t *testing.T) {
	c := newCkptModel(t, "ckpt-with")
	c.step(t, 1, 2, 3)
	plain, staged := t.TempDir(), t.TempDir()
	if err := nn.SaveCheckpoint(context.Background(), plain, c.model); err != nil {
		t.Fatal(err)
	}
	vocab := []byte("apple\nbanana\n")
	o := embedding.SaveOptions{Staged: true, Files: map[string]func(io.Writer) error{
		"vocab": func(w io.Writer) error { _, err := w.Write(vocab); return err },
	}}
	if err := nn.SaveCheckpointWith(context.Background(), staged, c.model, o); err != nil {
		t.Fatal(err)
	}
	want := checksums(t, plain)
	got := checksums(t, staged)
	if got["file vocab"] == nil {
		t.Fatalf("the staged checkpoint has no vocab file: %v", got)
	}
	delete(got, "file vocab")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("staged checkpoint differs from the plain one: %v against %v", got, want)
	}
	saved := c.state(t)
	c.step(t, 3, 4)
	if c.state(t) == saved {
		t.Fatal("the step changed nothing")
	}
	var read []byte
	err := nn.LoadCheckpointWith(context.Background(), staged, c.model, map[string]func(io.Reader) error{
		"vocab": func(r io.Reader) (err error) { read, err = io.ReadAll(r); return err },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read, vocab) {
		t.Errorf("vocab read back as %q", read)
	}
	if c.state(t) != saved {
		t.Errorf("LoadCheckpointWith did not restore the model")
	}
}

// A failing load changes neither the tables nor the dense state, whichever part fails.
func TestCheckpointWithFailedLoadChangesNothing(t *testing.T) {
	c := newCkptModel(t, "ckpt-with-fail")
	c.step(t, 1, 2)
	dir := t.TempDir()
	o := embedding.SaveOptions{Files: map[string]func(io.Writer) error{
		"pos": func(w io.Writer) error { _, err := w.Write([]byte("17")); return err },
	}}
	if err := nn.SaveCheckpointWith(context.Background(), dir, c.model, o); err != nil {
		t.Fatal(err)
	}
	c.step(t, 2, 5)
	before := c.state(t)
	bad := errors.New("unreadable position")
	cases := []struct {
		files map[string]func(io.Reader) error
		want  error
	}{
		{map[string]func(io.Reader) error{"pos": func(io.Reader) error { return bad }}, bad},
		{map[string]func(io.Reader) error{"pos": func(io.Reader) error { return bad }}, embedding.ErrBadInput},
		{map[string]func(io.Reader) error{"absent": func(io.Reader) error { return nil }}, embedding.ErrIncompatible},
		{map[string]func(io.Reader) error{"dense": func(io.Reader) error { return nil }}, embedding.ErrBadInput},
	}
	for i, tc := range cases {
		if err := nn.LoadCheckpointWith(context.Background(), dir, c.model, tc.files); !errors.Is(err, tc.want) {
			t.Errorf("case %d: %v, want %v", i, err, tc.want)
		}
		if c.state(t) != before {
			t.Fatalf("case %d: a failed load changed the model", i)
		}
	}
	// A model whose dense layers do not fit the file fails with its table unchanged too.
	other := nn.NewSequential(nn.NewEmbedding(c.table, nn.EmbeddingOptions{}), nn.NewLinear(4, 3, true))
	tableBefore, _ := c.table.Export()
	if err := nn.LoadCheckpointWith(context.Background(), dir, other, nil); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("load into a model of another shape: %v", err)
	}
	if tableAfter, _ := c.table.Export(); tableAfter.Step != tableBefore.Step || c.state(t) != before {
		t.Errorf("a failed load into another model changed the table")
	}
}

// "dense" is the model's: a save with a file of that name fails and writes no checkpoint.
func TestCheckpointWithDenseNameTaken(t *testing.T) {
	c := newCkptModel(t, "ckpt-with-dense")
	dir := t.TempDir()
	o := embedding.SaveOptions{Files: map[string]func(io.Writer) error{"dense": func(io.Writer) error { return nil }}}
	if err := nn.SaveCheckpointWith(context.Background(), dir, c.model, o); !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("save with a file named dense: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused save left %d files", len(ents))
	}
}
