package safetensors

// DType is a tensor's element type as the header names it.
type DType string

// The element types of the format (the reference implementation's Dtype, by the names it
// writes). Every one is valid in a header; which ones a caller can turn into tensors is the
// caller's business (nn: all but U16, U32, U64 and the F8 types; embedding: F32 and I64).
const (
	Bool   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	F8E5M2 DType = "F8_E5M2"
	F8E4M3 DType = "F8_E4M3"
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	F64    DType = "F64"
	I64    DType = "I64"
	U64    DType = "U64"
)

// Size is the number of bytes of one element, 0 for a name that is not a dtype of the format
// (names are case-sensitive: "f32" is not one).
func (d DType) Size() int64 {
	switch d {
	case Bool, U8, I8, F8E5M2, F8E4M3:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case F64, I64, U64:
		return 8
	}
	return 0
}
