package cgotorch

import (
	"errors"
	"testing"
)

func TestGradLifecycle(t *testing.T) {
	x := MustFromSlice([]float32{1, 2, 3}).SetRequiresGrad(true)
	if x.Grad() != nil {
		t.Fatal("gradient before backward")
	}
	if err := Try(func() { x.Backward() }); !errors.Is(err, ErrTorch) {
		t.Fatalf("backward of a non-scalar: %v", err)
	}
	ones := Ones([]int64{3})
	x.BackwardWith(ones, false) // d(sum x)/dx through an identity graph is not allowed on a leaf
	g := x.Grad()
	v, err := ToSlice[float32](g)
	if err != nil || v[0] != 1 || v[2] != 1 {
		t.Fatalf("grad %v %v", v, err)
	}
	x.ZeroGrad()
	if v, _ := ToSlice[float32](x.Grad()); v[1] != 0 {
		t.Fatalf("after zero grad %v", v)
	}
	d := x.Detach()
	if d.RequiresGrad() {
		t.Fatal("detached tensor requires grad")
	}
}

func TestNoGradRestores(t *testing.T) {
	if !gradModeEnabled() {
		t.Fatal("grad mode off at start")
	}
	NoGrad(func() {
		if gradModeEnabled() {
			t.Fatal("grad mode on inside NoGrad")
		}
		EnableGrad(func() {
			if !gradModeEnabled() {
				t.Fatal("grad mode off inside EnableGrad")
			}
		})
		if gradModeEnabled() {
			t.Fatal("EnableGrad did not restore")
		}
	})
	if !gradModeEnabled() {
		t.Fatal("NoGrad did not restore")
	}
	// A panic inside NoGrad still restores the mode.
	_ = Try(func() { NoGrad(func() { Zeros([]int64{-1}) }) })
	if !gradModeEnabled() {
		t.Fatal("NoGrad did not restore after a panic")
	}
}
