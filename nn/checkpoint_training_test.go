package nn_test

import (
	"errors"
	"io"
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
	if err := nn.SaveTrainingCheckpoint(dir, c.model, c.opt, embedding.SaveOptions{Staged: true}); err != nil {
		t.Fatal(err)
	}
	run()
	want := c.state(t)

	if err := nn.LoadTrainingCheckpoint(dir, c.model, c.opt, nil); err != nil {
		t.Fatal(err)
	}
	run()
	if got := c.state(t); got != want {
		t.Errorf("resumed from a training checkpoint:\n%s\nuninterrupted:\n%s", got, want)
	}

	if err := nn.LoadCheckpoint(dir, c.model); err != nil {
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
	if err := nn.SaveCheckpoint(modelOnly, c.model); err != nil {
		t.Fatal(err)
	}
	if err := nn.SaveTrainingCheckpoint(training, c.model, c.opt, embedding.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	sgd, err := nn.NewSGD(c.model.Parameters(), nn.SGDOptions{LR: 0.1, Momentum: 0.9})
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
		{"nil optimizer", func() error { return nn.LoadTrainingCheckpoint(training, c.model, nil, nil) }, embedding.ErrBadInput},
		{"no optimizer state", func() error { return nn.LoadTrainingCheckpoint(modelOnly, c.model, c.opt, nil) }, embedding.ErrIncompatible},
		{"another optimizer", func() error { return nn.LoadTrainingCheckpoint(training, c.model, sgd, nil) }, cgotorch.ErrInvalidArgument},
		{"file named optimizer", func() error {
			return nn.LoadTrainingCheckpoint(training, c.model, c.opt, map[string]func(io.Reader) error{"optimizer": noFile})
		}, embedding.ErrBadInput},
		{"file named rng", func() error {
			return nn.LoadCheckpointWith(training, c.model, map[string]func(io.Reader) error{"rng": noFile})
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
	save("SaveTrainingCheckpoint with a nil optimizer", nn.SaveTrainingCheckpoint(t.TempDir(), c.model, nil, embedding.SaveOptions{}))
	save("SaveCheckpointWith a file named optimizer", nn.SaveCheckpointWith(t.TempDir(), c.model,
		embedding.SaveOptions{Files: map[string]func(io.Writer) error{"optimizer": func(io.Writer) error { return nil }}}))
}
