// Package safetensors reads, validates, writes, memory-maps and slices files in
// the safetensors format used to share machine-learning model weights.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// UTF-8 JSON describing every tensor (dtype, shape and byte range) plus an
// optional "__metadata__" map of strings, padded with spaces, and then the raw
// little-endian tensor bytes, contiguous and without holes.
//
// Every byte of a file is treated as hostile until validated. Parsing follows
// the Hugging Face reference implementation check for check, in the same
// order, so the first error reported is the one the reference reports; it is
// stricter in one respect: duplicate JSON keys anywhere in the header are
// rejected, because two readers could otherwise disagree on which tensor a
// name means.
//
// Use [Open] to memory-map a local file (tensors are zero-copy views), and
// [NewReader] for any [io.ReaderAt] (tensors are read on demand). [ReadHeader]
// parses only the header. [NewWriter], [WriteFile] and [Marshal] produce files
// byte-identical to the reference writer.
//
// This package reads one safetensors file that you know is one. For a
// sharded model use package sharded; for whatever a user names (a
// directory, a URL, hf://ORG/REPO, a bucket, a PyTorch checkpoint, with the
// format decided by content) use source.OpenModel; the source package's
// documentation compares the four openers.
package safetensors
