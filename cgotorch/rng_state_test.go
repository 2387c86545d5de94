package cgotorch_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gorec/gorec/cgotorch"
)

// rngDraws draws from the default generator as training does and returns the bits of the
// results: uniform samples, a dropout mask, and a short Randn (fewer than 16 values go through
// libtorch's serial normal sampler, which caches the second value of each Box-Muller pair in the
// generator: the state must carry that cache too).
func rngDraws(t *testing.T) []uint32 {
	t.Helper()
	var bits []uint32
	add := func(x *cgotorch.Tensor) {
		defer x.Close()
		v, err := cgotorch.ToSlice[float32](x)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range v {
			bits = append(bits, math.Float32bits(f))
		}
	}
	add(cgotorch.Rand([]int64{64}))
	ones := cgotorch.Ones([]int64{64})
	defer ones.Close()
	add(ones.Dropout(0.5, true))
	add(cgotorch.Randn([]int64{3}))
	return bits
}

func rngState(t *testing.T) *cgotorch.Tensor {
	t.Helper()
	s, err := cgotorch.RNGState()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stateBytes copies a state into Go memory, as a checkpoint writer would.
func stateBytes(t *testing.T, s *cgotorch.Tensor) []uint8 {
	t.Helper()
	v, err := cgotorch.ToSlice[uint8](s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func setRNGState(t *testing.T, s *cgotorch.Tensor) {
	t.Helper()
	if err := cgotorch.SetRNGState(s); err != nil {
		t.Fatal(err)
	}
}

// Take the state, draw, put the state back, draw again: the same bits; the draws after those
// follow as they did the first time, and differ from the first ones.
func TestRNGStateRoundTrip(t *testing.T) {
	cgotorch.ManualSeed(123)
	rngDraws(t) // leave the seed's initial state (and fill the normal cache)
	s := rngState(t)
	defer s.Close()
	if s.Dim() != 1 || s.DType() != cgotorch.Uint8 || s.Numel() == 0 || s.Device() != cgotorch.CPU {
		t.Fatalf("state: %d-D %v of %d elements on %v, want a non-empty 1-D uint8 CPU tensor",
			s.Dim(), s.DType(), s.Numel(), s.Device())
	}
	saved := stateBytes(t, s)

	first, second := rngDraws(t), rngDraws(t)
	if slices.Equal(first, second) {
		t.Fatal("two successive draws are equal")
	}
	setRNGState(t, s)
	if again := stateBytes(t, rngState(t)); !slices.Equal(again, saved) {
		t.Error("the state read back after SetRNGState differs from the one set")
	}
	if got := rngDraws(t); !slices.Equal(got, first) {
		t.Error("draws after restoring the state differ from those that followed it")
	}
	if got := rngDraws(t); !slices.Equal(got, second) {
		t.Error("the second draw after restoring differs from the second one that followed it")
	}
	if got := rngDraws(t); slices.Equal(got, first) || slices.Equal(got, second) {
		t.Error("a third draw repeats an earlier one")
	}
	if after := stateBytes(t, rngState(t)); slices.Equal(after, saved) {
		t.Error("drawing did not change the state")
	}
	// The tensor RNGState returned is a copy: drawing did not change it.
	if !slices.Equal(stateBytes(t, s), saved) {
		t.Error("the state tensor changed with the generator")
	}
}

// Setting a state taken elsewhere (another seed, a checkpoint's bytes) makes the next draws those
// that followed it; the generator keeps no reference to the tensor.
func TestSetRNGStateResumesSavedDraws(t *testing.T) {
	cgotorch.ManualSeed(1)
	s := rngState(t)
	checkpoint := stateBytes(t, s)
	want := rngDraws(t)

	cgotorch.ManualSeed(2)
	if other := rngDraws(t); slices.Equal(other, want) {
		t.Fatal("seeds 1 and 2 gave the same draws")
	}
	setRNGState(t, s)
	s.Close() // the generator copied the bytes
	if got := rngDraws(t); !slices.Equal(got, want) {
		t.Error("draws after SetRNGState are not those that followed the saved state")
	}

	// The same through Go memory, as a checkpoint restores it.
	cgotorch.ManualSeed(3)
	rngDraws(t)
	restored := cgotorch.MustFromSlice(checkpoint)
	defer restored.Close()
	setRNGState(t, restored)
	if got := rngDraws(t); !slices.Equal(got, want) {
		t.Error("draws after restoring the checkpoint's bytes differ")
	}
}

// badRNGState is a state SetRNGState refuses.
type badRNGState struct {
	name   string
	state  *cgotorch.Tensor
	closed bool // the error also wraps ErrClosed
}

// badRNGStates are states of every kind SetRNGState refuses, built from good (a valid state).
func badRNGStates(t *testing.T, good *cgotorch.Tensor) []badRNGState {
	t.Helper()
	n := good.Numel()
	closed := rngState(t)
	closed.Close()
	var released *cgotorch.Tensor
	cgotorch.WithScope(func(*cgotorch.Scope) { released = rngState(t) })
	asFloat, err := good.To(cgotorch.CPU, cgotorch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	asInt64, err := good.To(cgotorch.CPU, cgotorch.Int64)
	if err != nil {
		t.Fatal(err)
	}
	zeros := cgotorch.Zeros([]int64{n}, cgotorch.WithDType(cgotorch.Uint8))
	// every other byte of [good good]: 1-D, the right length, not contiguous
	strided := cgotorch.Stack([]*cgotorch.Tensor{good, good}, 1).Narrow(1, 0, 1).Squeeze(1)
	return []badRNGState{
		{"nil", nil, true},
		{"closed", closed, true},
		{"released by its scope", released, true},
		{"float32", asFloat, false},
		{"int64", asInt64, false},
		{"2-D", good.Reshape(2, n/2), false},
		{"one byte short", good.Narrow(0, 0, n-1), false},
		{"one byte long", cgotorch.Cat([]*cgotorch.Tensor{good, zeros.Narrow(0, 0, 1)}, 0), false},
		{"empty", cgotorch.Zeros([]int64{0}, cgotorch.WithDType(cgotorch.Uint8)), false},
		{"not contiguous", strided, false},
		{"right size, invalid contents (zeros)", zeros, false},
		// torch.set_rng_state refuses it too: "Invalid mt19937 state"
		{"right size, invalid contents (0xff)", cgotorch.Full([]int64{n}, 255, cgotorch.WithDType(cgotorch.Uint8)), false},
	}
}

// Bad states are errors wrapping ErrInvalidArgument and leave the generator as it was.
func TestSetRNGStateBadInputs(t *testing.T) {
	cgotorch.ManualSeed(5)
	good := rngState(t)
	defer good.Close()
	setRNGState(t, good)
	want := rngDraws(t)

	for _, c := range badRNGStates(t, good) {
		setRNGState(t, good)
		err := cgotorch.SetRNGState(c.state)
		if !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an error wrapping ErrInvalidArgument", c.name, err)
		}
		if c.closed != errors.Is(err, cgotorch.ErrClosed) {
			t.Errorf("%s: errors.Is(%v, ErrClosed) = %v", c.name, err, !c.closed)
		}
		if got := rngDraws(t); !slices.Equal(got, want) {
			t.Errorf("%s: the failed SetRNGState changed the generator", c.name)
		}
	}
}

// CheckRNGState accepts what SetRNGState accepts and refuses what it refuses, with the same
// errors, and never changes the default generator.
func TestCheckRNGState(t *testing.T) {
	cgotorch.ManualSeed(7)
	other := rngState(t) // a valid state, not the generator's when it is checked
	defer other.Close()
	cgotorch.ManualSeed(8)
	good := rngState(t)
	defer good.Close()
	want := rngDraws(t)

	setRNGState(t, good)
	if err := cgotorch.CheckRNGState(other); err != nil {
		t.Errorf("a valid state: %v", err)
	}
	if got := rngDraws(t); !slices.Equal(got, want) {
		t.Error("checking a valid state changed the generator")
	}
	for _, c := range badRNGStates(t, good) {
		setRNGState(t, good)
		err := cgotorch.CheckRNGState(c.state)
		if !errors.Is(err, cgotorch.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an error wrapping ErrInvalidArgument", c.name, err)
		}
		if c.closed != errors.Is(err, cgotorch.ErrClosed) {
			t.Errorf("%s: errors.Is(%v, ErrClosed) = %v", c.name, err, !c.closed)
		}
		if set := cgotorch.SetRNGState(c.state); set == nil || (err != nil && set.Error() != strings.Replace(err.Error(), "check rng state", "set rng state", 1)) {
			t.Errorf("%s: CheckRNGState says %v, SetRNGState %v", c.name, err, set)
		}
		if got := rngDraws(t); !slices.Equal(got, want) {
			t.Errorf("%s: the failed check changed the generator", c.name)
		}
	}
}
