package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"fmt"
	"reflect"
)

// DType is the element type of a tensor.
type DType int8

// The element types (libtorch's numbering).
const (
	Uint8    DType = C.CT_UINT8
	Int8     DType = C.CT_INT8
	Int16    DType = C.CT_INT16
	Int32    DType = C.CT_INT32
	Int64    DType = C.CT_INT64
	Float16  DType = C.CT_FLOAT16
	Float32  DType = C.CT_FLOAT32
	Float64  DType = C.CT_FLOAT64
	Bool     DType = C.CT_BOOL
	BFloat16 DType = C.CT_BFLOAT16
)

var dtypeNames = map[DType]string{
	Uint8: "uint8", Int8: "int8", Int16: "int16", Int32: "int32", Int64: "int64",
	Float16: "float16", Float32: "float32", Float64: "float64", Bool: "bool", BFloat16: "bfloat16",
}

var dtypeSizes = map[DType]int{
	Uint8: 1, Int8: 1, Int16: 2, Int32: 4, Int64: 8,
	Float16: 2, Float32: 4, Float64: 8, Bool: 1, BFloat16: 2,
}

func (d DType) String() string {
	if s, ok := dtypeNames[d]; ok {
		return s
	}
	return fmt.Sprintf("DType(%d)", int8(d))
}

// Size is the size of one element in bytes (0 for an unknown DType).
func (d DType) Size() int { return dtypeSizes[d] }

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == Float16 || d == Float32 || d == Float64 || d == BFloat16
}

// Element is a Go type that can be copied into and out of tensors: float32, float64, int64,
// int32, uint8 (byte) and bool, or a type defined on one of them.
type Element interface {
	~float32 | ~float64 | ~int64 | ~int32 | ~uint8 | ~bool
}

// dtypeOf gives the DType matching the Go element type T, by its underlying type (a type
// switch would see a defined type such as `type score float32` as none of them).
func dtypeOf[T Element]() DType {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Int64:
		return Int64
	case reflect.Int32:
		return Int32
	case reflect.Uint8:
		return Uint8
	default:
		// reflect.Bool is the only kind left: Element is closed.
		return Bool
	}
}
