// Package safetensors is the part of the safetensors file format
// (https://huggingface.co/docs/safetensors) that nn and embedding share: the header.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON (UTF-8), then the data
// section. The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets into the data section) and the optional key "__metadata__" to a map of strings. The
// dtypes are the reference implementation's (DType: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16,
// F16, BF16, I32, U32, F32, F64, I64, U64). gorec pads the JSON with spaces to a multiple of 8
// bytes, as the reference writer does, so that the data starts aligned. The tensors' bytes are
// little-endian, row-major, and cover the data section exactly, without holes or overlaps.
//
// Place lays tensors out back to back, in the order given, and encodes the header (names and
// metadata must be valid UTF-8); ReadHeader decodes and checks one as strictly as the reference
// implementation's parser (huggingface/safetensors, tensor.rs: serde-derived, so field names
// are exact, all three are required, each appears once, and unknown fields of an entry are
// ignored), and refuses keys given twice, which encoding/json would silently resolve. How the data is moved is the caller's: nn.WriteSafetensors and ReadSafetensors stream
// whole tensors through an io.Writer or io.Reader, embedding writes and reads a table's regions
// chunk by chunk at their offsets, checksumming them.
package safetensors
