package embedding_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/gorec/gorec/embedding"
)

// Two saves into one directory at once: the second fails at once with ErrBadInput and changes
// nothing, the first completes and loads. Before the lock the second ran, and whichever
// finished first deleted the other's files as leftovers of a dead save.
func TestConcurrentSavesRefused(t *testing.T) {
	dir := t.TempDir()
	tbl := newTable(t, embedding.Config{Dim: 2, Optimizer: embedding.SGD{LR: 0.1}})
	update(t, tbl, []int64{1, 2}, 1, 2, 3, 4)
	want := dump(t, tbl)
	started, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- embedding.SaveWith(context.Background(), dir, []*embedding.Table{tbl}, map[string]func(io.Writer) error{
			"held": func(w io.Writer) error {
				close(started)
				<-release // the save is in progress until the test lets it go on
				_, err := w.Write([]byte("x"))
				return err
			},
		})
	}()
	<-started
	err := embedding.Save(context.Background(), dir, tbl)
	close(release)
	if !errors.Is(err, embedding.ErrBadInput) {
		t.Errorf("a second save while one is in progress: %v, want ErrBadInput", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first save: %v", err)
	}
	tbl.Close()
	loaded, err := embedding.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded[0].Close()
	sameDump(t, "after the refused save", dump(t, loaded[0]), want)
	// The lock went with the save: the next one goes through.
	if err := embedding.Save(context.Background(), dir, loaded[0]); err != nil {
		t.Errorf("a save after the first: %v", err)
	}
}
