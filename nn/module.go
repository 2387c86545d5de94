package nn

import (
	"fmt"
	"strings"

	"github.com/gorec/gorec/cgotorch"
)

// Tensor abbreviates cgotorch.Tensor.
type Tensor = cgotorch.Tensor

// Module is a layer or a model: trainable parameters, the hash embedding tables' Steppers (when
// it is a SparseModule) and a train/eval mode. Its Forward is its own method, taking the inputs
// it needs: Linear.Forward(x), EmbeddingBag.Forward(ids, offsets), a model's Forward(batch).
// Layer is the Module of one tensor in and one out that Sequential chains. Compose modules with
// Sequential, or by embedding a Container in a struct of your own and writing its Forward.
// An optimizer made from a Module (NewAdam(model, ...)) trains all of it: its Parameters and
// its tables.
type Module interface {
	// Parameters lists the trainable tensors, named as PyTorch names them in a state dict
	// ("weight", "0.bias", "mlp.2.weight"), in a stable order.
	Parameters() []NamedParameter
	// Train switches training mode on (true) or evaluation mode on (false), recursively.
	Train(on bool)
	// ZeroGrad sets the accumulated gradients of the parameters to zero, recursively.
	ZeroGrad()
}

// Layer is a Module that is a function of one tensor: the layers of this package, and what
// Sequential chains.
type Layer interface {
	Module
	// Forward computes the module's output; like tensor math it panics on wrong shapes.
	Forward(x *Tensor) *Tensor
}

// NamedParameter is a tensor of a module's state with its dotted name: a trainable parameter
// (from Parameters) or a buffer (from Buffers). Tensor is the module's own tensor, not a copy:
// optimizers update it in place.
type NamedParameter struct {
	Name   string
	Tensor *Tensor
}

// BufferModule is implemented by modules with state that is saved but not trained (BatchNorm1d's
// running statistics). StateDict and SaveState include the buffers after the parameters.
type BufferModule interface {
	Buffers() []NamedParameter
}

// Stepper is state that an optimizer step updates besides its dense parameter groups: the
// extension point for the hash embedding tables, whose rows are updated by their own sparse
// rule at their own learning rate. An optimizer made from a model steps the model's Steppers:
// Optimizer.Step calls Step of each after updating the dense parameters, Optimizer.ZeroGrad
// calls ZeroGrad, Optimizer.SetLR and Scheduler call SetLR. ZeroGrad must be idempotent: a
// module that is its own Stepper also has it called by Module.ZeroGrad.
type Stepper interface {
	Step() error
	ZeroGrad()
	// LR is the learning rate; SetLR sets it (an error leaves it unchanged).
	LR() float64
	SetLR(lr float64) error
}

// SparseModule is implemented by modules whose state an optimizer updates through Steppers
// rather than through Parameters (Embedding, EmbeddingBag, Container). Steppers(m) collects
// them from a model.
type SparseModule interface {
	Steppers() []Stepper
}

// Buffers returns m's buffers (nil when m has none).
func Buffers(m Module) []NamedParameter {
	if b, ok := m.(BufferModule); ok {
		return b.Buffers()
	}
	return nil
}

// Steppers returns m's steppers (nil when m has none): what an optimizer made from m steps
// besides m's Parameters.
func Steppers(m Trainable) []Stepper {
	if s, ok := m.(SparseModule); ok {
		return s.Steppers()
	}
	return nil
}

// StateDict lists what SaveState writes: m's parameters followed by its buffers.
func StateDict(m Module) []NamedParameter {
	return append(m.Parameters(), Buffers(m)...)
}

// ZeroGradParams zeroes the gradients of ps (those that have one), for ZeroGrad methods.
func ZeroGradParams(ps []NamedParameter) {
	for _, p := range ps {
		p.Tensor.ZeroGrad()
	}
}

// Prefixed returns ps with their names prefixed by prefix and a dot, for composite modules.
func Prefixed(prefix string, ps []NamedParameter) []NamedParameter {
	out := make([]NamedParameter, len(ps))
	for i, p := range ps {
		out[i] = NamedParameter{Name: prefix + "." + p.Name, Tensor: p.Tensor}
	}
	return out
}

// Base holds the train/eval mode. Embed it in a module to get Train and Training; the zero
// value is in training mode, as PyTorch's modules start.
type Base struct {
	eval bool
}

// Train sets training mode (true) or evaluation mode (false).
func (b *Base) Train(on bool) { b.eval = !on }

// Training reports whether the module is in training mode.
func (b *Base) Training() bool { return !b.eval }

// Stateless is Base for modules without parameters (the activations): Parameters is empty and
// ZeroGrad does nothing.
type Stateless struct{ Base }

// Parameters returns nil.
func (Stateless) Parameters() []NamedParameter { return nil }

// ZeroGrad does nothing.
func (Stateless) ZeroGrad() {}

// NamedModule is a child of a Container.
type NamedModule struct {
	Name   string
	Module Module
}

// Container holds named child modules (of any Forward) and implements Module over them: Parameters, Buffers and Steppers concatenate the children's in the order they were added
// (each name prefixed by the child's), Train and ZeroGrad recurse. Embed it in a model struct,
// Add the children, and write Forward:
//
//	type Tower struct {
//		nn.Container
//		bottom, top *nn.Sequential
//	}
//
//	func NewTower() *Tower {
//		t := &Tower{bottom: nn.NewSequential(...), top: nn.NewSequential(...)}
//		t.Add("bottom", t.bottom)
//		t.Add("top", t.top)
//		return t
//	}
//
//	func (t *Tower) Forward(x *nn.Tensor) *nn.Tensor { return t.top.Forward(t.bottom.Forward(x)) }
type Container struct {
	Base
	children []NamedModule
}

// Add appends a child named name and returns it. It panics on an empty name, a name with a dot
// or a name already used: these are programming errors.
func (c *Container) Add(name string, m Module) Module {
	if name == "" || strings.Contains(name, ".") {
		panic(fmt.Sprintf("nn: invalid child name %q", name))
	}
	for _, ch := range c.children {
		if ch.Name == name {
			panic(fmt.Sprintf("nn: duplicate child name %q", name))
		}
	}
	if m == nil {
		panic(fmt.Sprintf("nn: nil module for child %q", name))
	}
	c.children = append(c.children, NamedModule{Name: name, Module: m})
	return m
}

// Children returns the children in the order they were added.
func (c *Container) Children() []NamedModule { return append([]NamedModule(nil), c.children...) }

// Parameters returns the children's parameters, names prefixed by the child's name.
func (c *Container) Parameters() []NamedParameter {
	var out []NamedParameter
	for _, ch := range c.children {
		out = append(out, Prefixed(ch.Name, ch.Module.Parameters())...)
	}
	return out
}

// Buffers returns the children's buffers, names prefixed by the child's name.
func (c *Container) Buffers() []NamedParameter {
	var out []NamedParameter
	for _, ch := range c.children {
		out = append(out, Prefixed(ch.Name, Buffers(ch.Module))...)
	}
	return out
}

// Steppers returns the children's steppers.
func (c *Container) Steppers() []Stepper {
	var out []Stepper
	for _, ch := range c.children {
		out = append(out, Steppers(ch.Module)...)
	}
	return out
}

// Train sets the mode of the container and of every child.
func (c *Container) Train(on bool) {
	c.Base.Train(on)
	for _, ch := range c.children {
		ch.Module.Train(on)
	}
}

// ZeroGrad zeroes the gradients of every child.
func (c *Container) ZeroGrad() {
	for _, ch := range c.children {
		ch.Module.ZeroGrad()
	}
}

// Sequential applies its children, Layers, in order; they are named "0", "1", ... as in
// PyTorch's nn.Sequential, so their state names match ("0.weight", "2.bias"). Add children with
// Append (a child added with the Container's Add must be a Layer too).
type Sequential struct {
	Container
}

// NewSequential returns a Sequential of ms.
func NewSequential(ms ...Layer) *Sequential {
	s := &Sequential{}
	for _, m := range ms {
		s.Append(m)
	}
	return s
}

// Append adds m as the next child (named after its position).
func (s *Sequential) Append(m Layer) *Sequential {
	s.Add(fmt.Sprint(len(s.children)), m)
	return s
}

// Len is the number of children.
func (s *Sequential) Len() int { return len(s.children) }

// At returns the i-th child.
func (s *Sequential) At(i int) Layer { return s.children[i].Module.(Layer) }

// Forward feeds x through the children in order.
func (s *Sequential) Forward(x *Tensor) *Tensor {
	for _, ch := range s.children {
		x = ch.Module.(Layer).Forward(x)
	}
	return x
}

var (
	_ Layer        = (*Sequential)(nil)
	_ BufferModule = (*Sequential)(nil)
	_ SparseModule = (*Sequential)(nil)
)
