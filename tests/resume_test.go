package tests

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/gorec/gorec/embedding"
	"github.com/gorec/gorec/nn"
)

const (
	resumeAt   = 6  // the step the checkpoint is taken after
	resumeEnd  = 14 // steps in all
	maintainAt = 4  // every maintainAt steps: TTL eviction and compaction of the items
)

// run trains steps [from, to) with the maintenance, and returns the losses and how many items
// the evictions removed.
func (m *recModel) run(t *testing.T, from, to int) ([]float32, int) {
	t.Helper()
	var losses []float32
	evicted := 0
	for s := from; s < to; s++ {
		losses = append(losses, m.step(t, s))
		if s%maintainAt == maintainAt-1 {
			evicted += m.maintain(t)
		}
	}
	return losses, evicted
}

// A trainer stops after step 6 with a training checkpoint (staged, as a trainer that keeps
// serving would take it, with the learning-rate scheduler's state as a file of its own); a new
// trainer (new tables under the same names, new dense layers, new optimizer and scheduler)
// loads it and goes on. Its losses and its final model (dense state, every table's rows,
// optimizer states, steps, access metadata, admission counts and learning rates) are those of
// the run that never stopped, to the bit.
func TestResumeFromTrainingCheckpoint(t *testing.T) {
	dir := t.TempDir()
	first := newRecModel(t, "resume-")
	first.run(t, 0, resumeAt)
	files := map[string]func(io.Writer) error{"scheduler": first.sched.SaveState}
	if err := nn.SaveTrainingCheckpoint(context.Background(), dir, first, first.opt, embedding.SaveOptions{Staged: true, Files: files}); err != nil {
		t.Fatal(err)
	}
	want, evicted := first.run(t, resumeAt, resumeEnd)
	wantDigest := first.digest(t)

	// The run did what the test is about: tables grown past their capacity, ids waiting for
	// admission, items evicted after the checkpoint.
	if n := first.tables[2].Len(); n <= 16 {
		t.Errorf("the tags table holds %d ids, no more than its capacity of 16", n)
	}
	if _, counted, err := first.tables[0].Admission(); err != nil || counted == 0 {
		t.Errorf("no user id waiting for admission (%d, %v)", counted, err)
	}
	if evicted == 0 {
		t.Errorf("no item evicted after the checkpoint")
	}
	for _, tab := range first.tables {
		if err := tab.Close(); err != nil {
			t.Fatal(err)
		}
	}

	second := newRecModel(t, "resume-")
	load := map[string]func(io.Reader) error{"scheduler": second.sched.LoadState}
	if err := nn.LoadTrainingCheckpoint(context.Background(), dir, second, second.opt, load); err != nil {
		t.Fatal(err)
	}
	got, _ := second.run(t, resumeAt, resumeEnd)
	if !slices.Equal(got, want) {
		t.Errorf("losses after resuming:\n%v\nwithout stopping:\n%v", got, want)
	}
	if d := second.digest(t); d != wantDigest {
		t.Errorf("the resumed model differs from the one that never stopped (digest %s, want %s)", d, wantDigest)
	}
}

// The same resume from a checkpoint of the model alone (SaveCheckpoint: no optimizer state, no
// generator state) goes elsewhere: the test above would see a missing part.
func TestResumeFromModelCheckpointDiffers(t *testing.T) {
	dir := t.TempDir()
	first := newRecModel(t, "resume-model-")
	first.run(t, 0, resumeAt)
	if err := nn.SaveCheckpoint(context.Background(), dir, first); err != nil {
		t.Fatal(err)
	}
	want, _ := first.run(t, resumeAt, resumeEnd)
	for _, tab := range first.tables {
		if err := tab.Close(); err != nil {
			t.Fatal(err)
		}
	}
	second := newRecModel(t, "resume-model-")
	if err := nn.LoadCheckpoint(context.Background(), dir, second); err != nil {
		t.Fatal(err)
	}
	if got, _ := second.run(t, resumeAt, resumeEnd); slices.Equal(got, want) {
		t.Errorf("resuming without the optimizer's and the generator's state gave the same losses")
	}
}
