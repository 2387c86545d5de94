package safetensors

// DType is a tensor's element type as the header names it.
type DType string

// The element types gorec reads and writes.
const (
	F32  DType = "F32"
	F64  DType = "F64"
	I64  DType = "I64"
	I32  DType = "I32"
	Bool DType = "BOOL"
)

// Size is the number of bytes of one element, 0 for a dtype this package does not know.
func (d DType) Size() int64 {
	switch d {
	case F32, I32:
		return 4
	case F64, I64:
		return 8
	case Bool:
		return 1
	}
	return 0
}
