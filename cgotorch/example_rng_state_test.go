package cgotorch_test

import (
	"fmt"
	"slices"

	"github.com/gorec/gorec/cgotorch"
)

// Save the generator's state with a checkpoint; restoring it makes the following random draws
// (here a dropout mask) the same as after the save.
func ExampleRNGState() {
	cgotorch.ManualSeed(42)
	state, err := cgotorch.RNGState()
	if err != nil {
		panic(err)
	}
	defer state.Close()
	fmt.Println(state.Dim(), state.DType())

	x := cgotorch.Ones([]int64{16})
	mask := func() []float32 {
		v, _ := cgotorch.ToSlice[float32](x.Dropout(0.5, true))
		return v
	}
	before := mask()
	fmt.Println("next mask equal:", slices.Equal(mask(), before))

	if err := cgotorch.SetRNGState(state); err != nil {
		panic(err)
	}
	fmt.Println("after restoring:", slices.Equal(mask(), before))
	// Output:
	// 1 uint8
	// next mask equal: false
	// after restoring: true
}
