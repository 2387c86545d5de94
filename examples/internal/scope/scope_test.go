package scope

import (
	"errors"
	"testing"

	"github.com/gorec/gorec/cgotorch"
)

func TestRun(t *testing.T) {
	want := errors.New("f failed")
	if err := Run(func() error { return want }); err != want {
		t.Errorf("got %v, want f's error", err)
	}
	err := Run(func() error {
		cgotorch.Zeros([]int64{2, 3}).MM(cgotorch.Zeros([]int64{2, 3})) // shapes do not fit
		return nil
	})
	var te *cgotorch.Error
	if !errors.As(err, &te) {
		t.Errorf("got %v, want the *cgotorch.Error of the panic", err)
	}
	var kept *cgotorch.Tensor
	if err := Run(func() error { kept = cgotorch.Ones([]int64{1}); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Item(); !errors.Is(err, cgotorch.ErrClosed) {
		t.Errorf("a tensor created in Run is usable afterwards: %v", err)
	}
}
