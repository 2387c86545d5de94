package nn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

// newDropoutModel is ckptModel with a Dropout between the table and the head, so the steps
// draw from libtorch's generator.
func newDropoutModel(t *testing.T, name string) *ckptModel {
	t.Helper()
	c := newCkptModel(t, name)
	emb, head := c.model.At(0), c.model.At(1)
	c.model = nn.NewSequential(emb, nn.NewDropout(0.5), head)
	return c
}

// A training checkpoint resumes with the numbers of the uninterrupted run: the dense
// optimizer's moments and steps and the generator's state come back with the model. A model
// checkpoint alone, which has neither, resumes with other numbers.
func TestTrainingCheckpointResumesExactly(t *testing.T) {
	dir := t.TempDir()
	c := newDropoutModel(t, "train-ckpt")
	run := func() {
		for s := int64(0); s < 3; s++ {
			c.step(t, 1, 2, 3+s, 40+s)
		}
	}
	run()
	if err := nn.SaveTrainingCheckpoint(context.Background(), dir, c.model, c.opt, embedding.SaveOptions{Staged: true}); err != nil {
		t.Fatal(err)
	}
	run()
	want := c.state(t)

	if err := nn.LoadTrainingCheckpoint(context.Background(), dir, c.model, c.opt, nil); err != nil {
		t.Fatal(err)
	}
	run()
	if got := c.state(t); got != want {
		t.Errorf("resumed from a training checkpoint:\n%s\nuninterrupted:\n%s", got, want)
	}

	if err := nn.LoadCheckpoint(context.Background(), dir, c.model); err != nil {
		t.Fatal(err)
	}
	run()
	if c.state(t) == want {
		t.Errorf("resuming from the model alone gives the same numbers: the test cannot tell")
	}
}

// drawn is the next value libtorch's generator gives.
func drawn(t *testing.T) float32 {
	t.Helper()
	v, err := cgotorch.ToSlice[float32](cgotorch.Rand([]int64{1}))
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

// Every refused training checkpoint operation leaves the model, its table, the optimizer and
// the generator as they were.
func TestTrainingCheckpointErrorsChangeNothing(t *testing.T) {
	modelOnly, training := t.TempDir(), t.TempDir()
	c := newDropoutModel(t, "train-ckpt-errors")
	c.step(t, 1, 2, 3)
	if err := nn.SaveCheckpoint(context.Background(), modelOnly, c.model); err != nil {
		t.Fatal(err)
	}
	if err := nn.SaveTrainingCheckpoint(context.Background(), training, c.model, c.opt, embedding.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	sgd, err := nn.NewSGD(c.model, nn.SGDOptions{LR: 0.1, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	c.step(t, 4, 5)
	noFile := func(io.Reader) error { return nil }
	cases := []struct {
		name string
		load func() error
		kind error
	}{
		{"nil optimizer", func() error { return nn.LoadTrainingCheckpoint(context.Background(), training, c.model, nil, nil) }, embedding.ErrBadInput},
		{"no optimizer state", func() error { return nn.LoadTrainingCheckpoint(context.Background(), modelOnly, c.model, c.opt, nil) }, embedding.ErrIncompatible},
		{"another optimizer", func() error { return nn.LoadTrainingCheckpoint(context.Background(), training, c.model, sgd, nil) }, cgotorch.ErrInvalidArgument},
		{"file named optimizer", func() error {
			return nn.LoadTrainingCheckpoint(context.Background(), training, c.model, c.opt, map[string]func(io.Reader) error{"optimizer": noFile})
		}, embedding.ErrBadInput},
		{"file named rng", func() error {
			return nn.LoadCheckpointWith(context.Background(), training, c.model, map[string]func(io.Reader) error{"rng": noFile})
		}, embedding.ErrBadInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := c.state(t)
			cgotorch.ManualSeed(77)
			wantDraw := drawn(t)
			cgotorch.ManualSeed(77)
			if err := tc.load(); !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
			if drawn(t) != wantDraw {
				t.Errorf("the generator changed")
			}
			if got := c.state(t); got != want {
				t.Errorf("the model changed")
			}
		})
	}
	save := func(name string, err error) {
		if !errors.Is(err, embedding.ErrBadInput) {
			t.Errorf("%s: got %v, want ErrBadInput", name, err)
		}
	}
	save("SaveTrainingCheckpoint with a nil optimizer", nn.SaveTrainingCheckpoint(context.Background(), t.TempDir(), c.model, nil, embedding.SaveOptions{}))
	save("SaveCheckpointWith a file named optimizer", nn.SaveCheckpointWith(context.Background(), t.TempDir(), c.model,
		embedding.SaveOptions{Files: map[string]func(io.Writer) error{"optimizer": func(io.Writer) error { return nil }}}))
}

// rewriteCheckpointFile replaces the checkpoint file called name (its own or a caller's) in dir
// by edit's result and records its size and checksum in the manifest (made a version 1
// manifest, without a checksum of its own), so that the load gets past the manifest's checks
// to the file's reader.
func rewriteCheckpointFile(t *testing.T, dir, name string, edit func([]byte) []byte) {
	t.Helper()
	mpath := filepath.Join(dir, "manifest.json")
	raw, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]any
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range manifest["files"].([]any) {
		e := f.(map[string]any)
		if e["name"] != name {
			continue
		}
		found = true
		path := filepath.Join(dir, e["file"].(string))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b = edit(b)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		e["size"] = len(b)
		e["crc32c"] = crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	}
	if !found {
		t.Fatalf("no file %q in the manifest: %s", name, raw)
	}
	// A version 1 manifest, which carries no checksum of its own (docs/checkpoint.md).
	manifest["version"] = 1
	delete(manifest, "manifest_crc32c")
	if raw, err = json.Marshal(manifest); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mpath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkLoadFailsChangingNothing runs a load of c's checkpoint that must fail with an error
// wrapping kind, and checks that the model, its table, the optimizer and the generator are as
// they were.
func checkLoadFailsChangingNothing(t *testing.T, c *ckptModel, kind error, load func() error) {
	t.Helper()
	want := c.state(t)
	var wantOpt bytes.Buffer
	if err := c.opt.SaveState(&wantOpt); err != nil {
		t.Fatal(err)
	}
	cgotorch.ManualSeed(77)
	wantDraw := drawn(t)
	cgotorch.ManualSeed(77)
	if err := load(); !errors.Is(err, kind) {
		t.Fatalf("got %v, want an error wrapping %v", err, kind)
	}
	if drawn(t) != wantDraw {
		t.Errorf("the generator changed")
	}
	if got := c.state(t); got != want {
		t.Errorf("the model changed:\nbefore %s\nafter  %s", want, got)
	}
	var gotOpt bytes.Buffer
	if err := c.opt.SaveState(&gotOpt); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotOpt.Bytes(), wantOpt.Bytes()) {
		t.Errorf("the optimizer's state changed")
	}
}

// A generator state of the right length (and checksum) that libtorch refuses, as
// torch.set_rng_state refuses bytes of 0xff ("Invalid mt19937 state"), is refused while the
// checkpoint is read: the load fails with the model, its table, the optimizer and the
// generator as they were (the state used to be set last, after the rest had been copied in).
func TestTrainingCheckpointInvalidRNGStateChangesNothing(t *testing.T) {
	dir := t.TempDir()
	c := newDropoutModel(t, "train-ckpt-bad-rng")
	c.step(t, 1, 2, 3)
	if err := nn.SaveTrainingCheckpoint(context.Background(), dir, c.model, c.opt, embedding.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	rewriteCheckpointFile(t, dir, "rng", func(b []byte) []byte {
		for i := range b {
			b[i] = 0xff
		}
		return b
	})
	c.step(t, 4, 5, 6) // away from the saved state
	checkLoadFailsChangingNothing(t, c, cgotorch.ErrInvalidArgument, func() error {
		return nn.LoadTrainingCheckpoint(context.Background(), dir, c.model, c.opt, nil)
	})
}

// The dense and optimizer files of a checkpoint are read whole, as LoadStateFile reads its
// file: bytes after the safetensors data are malformed data (ErrFormat) and the load changes
// nothing.
func TestTrainingCheckpointRefusesTrailingBytes(t *testing.T) {
	for _, name := range []string{"dense", "optimizer"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := newDropoutModel(t, "train-ckpt-trailing-"+name)
			c.step(t, 1, 2, 3)
			if err := nn.SaveTrainingCheckpoint(context.Background(), dir, c.model, c.opt, embedding.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			rewriteCheckpointFile(t, dir, name, func(b []byte) []byte { return append(b, "after the data"...) })
			c.step(t, 4, 5, 6)
			checkLoadFailsChangingNothing(t, c, nn.ErrFormat, func() error {
				return nn.LoadTrainingCheckpoint(context.Background(), dir, c.model, c.opt, nil)
			})
		})
	}
}
