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

// SetData swaps what a tensor holds (shape and dtype too) without making it another tensor: a
// leaf keeps requiring grad, backward then produces a gradient of the new shape and dtype, and
// setting the data of the handle Grad returns changes the gradient the tensor holds.
func TestSetData(t *testing.T) {
	x := MustFromSlice([]float32{1, 2, 3}).SetRequiresGrad(true)
	src := MustFromSlice([]float64{4, 5, 6, 7}, 2, 2)
	if err := x.SetData(src); err != nil {
		t.Fatal(err)
	}
	if got := x.Shape(); len(got) != 2 || got[0] != 2 || got[1] != 2 || x.DType() != Float64 || !x.RequiresGrad() {
		t.Fatalf("after set data: shape %v dtype %v requires grad %v", got, x.DType(), x.RequiresGrad())
	}
	if v, err := ToSlice[float64](x); err != nil || v[0] != 4 || v[3] != 7 {
		t.Fatalf("values %v %v", v, err)
	}
	x.Sum().Backward()
	if g, err := ToSlice[float64](x.Grad()); err != nil || len(g) != 4 || g[0] != 1 || g[3] != 1 {
		t.Fatalf("grad after set data %v %v", g, err)
	}
	if err := x.Grad().SetData(MustFromSlice([]float64{9, 8, 7, 6}, 2, 2)); err != nil {
		t.Fatal(err)
	}
	if g, err := ToSlice[float64](x.Grad()); err != nil || g[0] != 9 || g[3] != 6 {
		t.Fatalf("grad after setting its data %v %v", g, err)
	}
	// as PyTorch: "data set to a tensor that requires gradients must be floating point or complex"
	if err := x.SetData(MustFromSlice([]int64{1, 2})); !errors.Is(err, ErrTorch) {
		t.Fatalf("integer data for a tensor that requires grad: %v, want ErrTorch", err)
	}
	if x.DType() != Float64 {
		t.Fatalf("a refused set data changed the dtype to %v", x.DType())
	}
	var closed *Tensor
	if err := x.SetData(closed); !errors.Is(err, ErrClosed) {
		t.Fatalf("nil source: %v", err)
	}
	src.Close()
	if err := x.SetData(src); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed source: %v", err)
	}
	x.Close()
	if err := x.SetData(MustFromSlice([]float32{1})); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed target: %v", err)
	}
}
