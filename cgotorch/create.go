package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Option configures a tensor factory.
type Option func(*tensorOptions)

// tensorOptions are a factory's settings, kept in Go types (no C type in the exported API).
type tensorOptions struct {
	dtype        DType
	device       Device
	requiresGrad bool
}

// WithDType sets the element type (default Float32).
func WithDType(d DType) Option { return func(o *tensorOptions) { o.dtype = d } }

// WithDevice sets the device (default CPU).
func WithDevice(d Device) Option { return func(o *tensorOptions) { o.device = d } }

// RequiresGrad makes the new tensor a leaf that records gradients.
func RequiresGrad() Option { return func(o *tensorOptions) { o.requiresGrad = true } }

func options(opts []Option) C.ct_options {
	o := tensorOptions{dtype: Float32, device: CPU}
	for _, f := range opts {
		f(&o)
	}
	c := C.ct_options{dtype: C.int32_t(o.dtype), device: o.device.c()}
	if o.requiresGrad {
		c.requires_grad = 1
	}
	return c
}

func cShape(shape []int64) (*C.int64_t, C.int32_t) {
	if len(shape) == 0 {
		return nil, 0
	}
	return (*C.int64_t)(unsafe.Pointer(&shape[0])), C.int32_t(len(shape))
}

func fill(op string, kind C.int32_t, value float64, shape []int64, opts []Option) *Tensor {
	var out C.ct_tensor
	p, n := cShape(shape)
	must(op, C.ct_tensor_new(&out, kind, C.double(value), p, n, options(opts)))
	runtime.KeepAlive(shape)
	return newTensor(out)
}

// Zeros returns a tensor of the given shape filled with 0.
func Zeros(shape []int64, opts ...Option) *Tensor {
	return fill("zeros", C.CT_FILL_ZEROS, 0, shape, opts)
}

// Ones returns a tensor of the given shape filled with 1.
func Ones(shape []int64, opts ...Option) *Tensor { return fill("ones", C.CT_FILL_ONES, 0, shape, opts) }

// Full returns a tensor of the given shape filled with value.
func Full(shape []int64, value float64, opts ...Option) *Tensor {
	return fill("full", C.CT_FILL_FULL, value, shape, opts)
}

// Rand returns uniform samples in [0, 1) (see ManualSeed).
func Rand(shape []int64, opts ...Option) *Tensor { return fill("rand", C.CT_FILL_RAND, 0, shape, opts) }

// Randn returns standard normal samples (see ManualSeed).
func Randn(shape []int64, opts ...Option) *Tensor {
	return fill("randn", C.CT_FILL_RANDN, 0, shape, opts)
}

// Empty returns an uninitialised tensor.
func Empty(shape []int64, opts ...Option) *Tensor {
	return fill("empty", C.CT_FILL_EMPTY, 0, shape, opts)
}

// Arange returns the values start, start+step, ... below end (default dtype Float32; pass
// WithDType(Int64) for indices).
func Arange(start, end, step float64, opts ...Option) *Tensor {
	var out C.ct_tensor
	must("arange", C.ct_tensor_arange(&out, C.double(start), C.double(end), C.double(step), options(opts)))
	return newTensor(out)
}

// FromSlice copies data into a new CPU tensor of the given shape (a 1-D tensor of len(data)
// when shape is omitted). It returns ErrInvalidArgument when the shape does not match the data.
// A nil or empty slice with a shape of zero elements gives an empty tensor.
func FromSlice[T Element](data []T, shape ...int64) (*Tensor, error) {
	if shape == nil {
		shape = []int64{int64(len(data))}
	}
	n, err := shapeNumel(shape)
	if err != nil {
		return nil, err
	}
	if n != int64(len(data)) {
		return nil, fmt.Errorf("%w: %d elements do not fill shape %v", ErrInvalidArgument, len(data), shape)
	}
	var ptr unsafe.Pointer
	if len(data) > 0 {
		ptr = unsafe.Pointer(&data[0])
	}
	t, err := fromData("from slice", ptr, len(data)*dtypeOf[T]().Size(), dtypeOf[T](), shape)
	runtime.KeepAlive(data)
	return t, err
}

// FromBytes copies data, the elements of a tensor of dtype dt and the given shape in the host's
// byte order, into a new CPU tensor: the form for dtypes with no Go element type (Float16,
// BFloat16, Int16, Int8). It returns ErrInvalidArgument for an unknown dtype or when len(data)
// is not the shape's element count times dt.Size().
func FromBytes(data []byte, dt DType, shape ...int64) (*Tensor, error) {
	n, err := shapeNumel(shape)
	if err != nil {
		return nil, err
	}
	if dt.Size() == 0 || n > int64(len(data)) || n*int64(dt.Size()) != int64(len(data)) {
		return nil, fmt.Errorf("%w: %d bytes do not hold shape %v of %v", ErrInvalidArgument, len(data), shape, dt)
	}
	var ptr unsafe.Pointer
	if len(data) > 0 {
		ptr = unsafe.Pointer(&data[0])
	}
	t, err := fromData("from bytes", ptr, len(data), dt, shape)
	runtime.KeepAlive(data)
	return t, err
}

// fromData is a new CPU tensor of dtype dt and shape holding a copy of the nbytes at ptr (the
// caller keeps them alive).
func fromData(op string, ptr unsafe.Pointer, nbytes int, dt DType, shape []int64) (*Tensor, error) {
	var out C.ct_tensor
	p, nd := cShape(shape)
	err := toError(op, C.ct_tensor_from_data(&out, ptr, C.size_t(nbytes), C.int32_t(dt), p, nd))
	runtime.KeepAlive(shape)
	if err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// shapeNumel is the number of elements of shape, with ErrInvalidArgument for a negative
// dimension or a count that overflows int64 (checked before each multiplication: a wrapped
// product could match the data's length). A zero dimension makes the count 0 whatever the others.
func shapeNumel(shape []int64) (int64, error) {
	n := int64(1)
	for _, s := range shape {
		if s < 0 {
			return 0, fmt.Errorf("%w: negative dimension in shape %v", ErrInvalidArgument, shape)
		}
		if s == 0 {
			n = 0
		}
	}
	if n == 0 {
		return 0, nil
	}
	for _, s := range shape {
		if n > math.MaxInt64/s {
			return 0, fmt.Errorf("%w: shape %v has more than 2^63-1 elements", ErrInvalidArgument, shape)
		}
		n *= s
	}
	return n, nil
}

// MustFromSlice is FromSlice for data the program itself built: it panics instead of returning
// an error.
func MustFromSlice[T Element](data []T, shape ...int64) *Tensor {
	t, err := FromSlice(data, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// Scalar returns a 0-dimensional tensor holding v.
func Scalar[T Element](v T) *Tensor { return MustFromSlice([]T{v}, []int64{}...) }
