// Package safetensors is the part of the safetensors file format
// (https://huggingface.co/docs/safetensors) that nn and embedding share: the header.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON, then the data section.
// The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// into the data section) and the optional key "__metadata__" to a map of strings. gorec pads the
// JSON with spaces to a multiple of 8 bytes, as the reference writer does, so that the data
// starts aligned. The tensors' bytes are little-endian, row-major, and cover the data section
// exactly, without holes or overlaps.
//
// Place lays tensors out back to back and encodes the header; ReadHeader decodes and checks
// one. How the data is moved is the caller's: nn.WriteSafetensors and ReadSafetensors stream
// whole tensors through an io.Writer or io.Reader, embedding writes and reads a table's regions
// chunk by chunk at their offsets, checksumming them.
package safetensors
