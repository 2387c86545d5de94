package nn_test

import (
	"bytes"
	"fmt"

	"github.com/gorec/gorec/cgotorch"
	"github.com/gorec/gorec/nn"
)

func ExampleSequential() {
	model := nn.NewSequential(
		nn.NewLinear(4, 8, true),
		&nn.ReLU{},
		nn.NewDropout(0.2),
		nn.NewLinear(8, 1, true),
	)
	for _, p := range model.Parameters() {
		fmt.Println(p.Name, p.Tensor.Shape())
	}
	model.Train(false) // evaluation mode, for every layer
	y := model.Forward(cgotorch.Randn([]int64{3, 4}))
	fmt.Println(y.Shape())
	// Output:
	// 0.weight [8 4]
	// 0.bias [8]
	// 3.weight [1 8]
	// 3.bias [1]
	// [3 1]
}

// Move a model to the GPU (where there is one) before creating its optimizer; To changes the
// parameters in place, so the model and its Parameters keep working.
func ExampleTo() {
	model := nn.NewSequential(nn.NewLinear(4, 2, true), &nn.ReLU{})
	device := cgotorch.CPU
	if cgotorch.CUDAAvailable() {
		device = cgotorch.CUDA(0)
	}
	if err := nn.To(model, device, cgotorch.KeepDType); err != nil {
		fmt.Println(err)
		return
	}
	opt, err := nn.NewSGD(model, nn.SGDOptions{LR: 0.1})
	if err != nil {
		fmt.Println(err)
		return
	}
	x, err := cgotorch.Randn([]int64{3, 4}).To(device, cgotorch.KeepDType)
	if err != nil {
		fmt.Println(err)
		return
	}
	model.Forward(x).Sum().Backward()
	fmt.Println(opt.Step(), model.Parameters()[0].Tensor.Device() == device)
	// Output:
	// <nil> true
}

// A model of your own: embed Container, add the children by name, write Forward.
type twoTower struct {
	nn.Container
	user, item *nn.Sequential
}

func newTwoTower() *twoTower {
	m := &twoTower{
		user: nn.NewSequential(nn.NewLinear(6, 4, true), &nn.Tanh{}),
		item: nn.NewSequential(nn.NewLinear(6, 4, true), &nn.Tanh{}),
	}
	m.Add("user", m.user)
	m.Add("item", m.item)
	return m
}

// Forward scores x = [user features | item features] by the dot product of the two towers.
func (m *twoTower) Forward(x *cgotorch.Tensor) *cgotorch.Tensor {
	u := m.user.Forward(x.Narrow(1, 0, 6))
	v := m.item.Forward(x.Narrow(1, 6, 6))
	return u.Mul(v).SumDim([]int64{1}, true)
}

func ExampleContainer() {
	m := newTwoTower()
	for _, p := range m.Parameters() {
		fmt.Println(p.Name)
	}
	fmt.Println(m.Forward(cgotorch.Randn([]int64{5, 12})).Shape())
	// Output:
	// user.0.weight
	// user.0.bias
	// item.0.weight
	// item.0.bias
	// [5 1]
}

// Fitting y = 3x + 2 with SGD and momentum: the pattern of a training step.
func ExampleNewSGD() {
	x := cgotorch.MustFromSlice([]float32{0, 1, 2, 3}, 4, 1)
	y := x.MulScalar(3).AddScalar(2)
	model := nn.NewSequential(nn.NewLinear(1, 1, true))
	opt, err := nn.NewSGD(model, nn.SGDOptions{LR: 0.05, Momentum: 0.9})
	if err != nil {
		panic(err)
	}
	loss := nn.MSE(nn.ReduceMean)
	for step := 0; step < 300; step++ {
		opt.ZeroGrad()
		loss(model.Forward(x), y).Backward()
		if err := opt.Step(); err != nil {
			panic(err)
		}
	}
	l := model.At(0).(*nn.Linear)
	w, _ := l.Weight.Item()
	b, _ := l.Bias.Item()
	fmt.Printf("w=%.2f b=%.2f\n", w, b)
	// Output: w=3.00 b=2.00
}

// A classifier trained with Adam, every step in a scope that frees its temporaries; the model
// and the optimizer (with its state) are created outside the scope.
func ExampleNewAdam() {
	cgotorch.ManualSeed(0)
	x := cgotorch.MustFromSlice([]float32{0, 0, 0, 1, 1, 0, 1, 1}, 4, 2)
	classes := cgotorch.MustFromSlice([]int64{0, 1, 1, 0}) // xor
	model := nn.NewSequential(nn.NewLinear(2, 16, true), &nn.ReLU{}, nn.NewLinear(16, 2, true))
	o := nn.DefaultAdamOptions()
	o.LR = 0.05
	opt, err := nn.NewAdam(model, o)
	if err != nil {
		panic(err)
	}
	loss := nn.CrossEntropy(nn.ReduceMean)
	for step := 0; step < 200; step++ {
		cgotorch.WithScope(func(*cgotorch.Scope) {
			opt.ZeroGrad()
			loss(model.Forward(x), classes).Backward()
			if err := opt.Step(); err != nil {
				panic(err)
			}
		})
	}
	pred, _ := cgotorch.ToSlice[int64](model.Forward(x).Argmax(1, false))
	fmt.Println(pred)
	// Output: [0 1 1 0]
}

func ExampleSaveState() {
	a := nn.NewSequential(nn.NewLinear(3, 2, true), nn.NewBatchNorm1d(2))
	var buf bytes.Buffer
	if err := nn.SaveState(&buf, a); err != nil {
		panic(err)
	}
	b := nn.NewSequential(nn.NewLinear(3, 2, true), nn.NewBatchNorm1d(2))
	if err := nn.LoadState(&buf, b); err != nil {
		panic(err)
	}
	same, _ := a.At(0).(*nn.Linear).Weight.Eq(b.At(0).(*nn.Linear).Weight).All().Item()
	fmt.Println(same == 1)

	// A file for another architecture is refused, and b is left as it was.
	buf.Reset()
	_ = nn.SaveState(&buf, nn.NewSequential(nn.NewLinear(3, 4, true)))
	fmt.Println(nn.LoadState(&buf, b) != nil)
	// Output:
	// true
	// true
}
