// Package load reads the tensors of a model into memory at the speed of
// the storage: every tensor, a filtered set, or one tensor-parallel rank's
// parts, from any location source.OpenModel takes (a local file or
// directory, an index, http(s), hf://, s3://, gs://, azblob://; single or
// sharded), with a fixed number of concurrent ranged reads in chunks,
// pipelined, each tensor delivered as soon as its bytes are in.
//
// Use it to load a whole model (or a rank's share of one) into memory you
// own: an inference engine's start-up, a GPU staging area, a benchmark of
// a node's storage. To look at a few tensors, or to work on a local file
// in place, open it with safetensors.Open (zero-copy mapping: nothing is
// read until touched), sharded.Open or source.OpenModel and read what you
// need: those cost one request per tensor or slice, and nothing up front.
//
// A [Loader] is planned once ([New] over an open Source, or [Open] on a
// location, which tunes the HTTP client and reader concurrency for
// parallel reads) and run with [Loader.Load] (a callback per tensor),
// [Loader.All] (an iterator) or [Loader.Discard] (read and drop, for
// benchmarks). Bytes go into a new slice per tensor, or into buffers the
// caller hands out through [WithDestination].
//
// Reads: every part's bytes are cut into chunks of at most the chunk size
// (16 MiB for remote objects, 1 MiB for local files by default; chunks
// span neighbouring tensors of one file, so small tensors cost no requests
// of their own), at most Concurrency of them in flight, each one ranged
// read (a multi-range read for the strided runs of a column split). Remote
// reads go through the readers' own rules: a remote.File pins the
// object's ETag with If-Match, checks every Content-Range against the
// bytes asked for and retries transient failures; a short read is an
// error, never data. A local file whose size or modification time changes
// during a load fails it with [ErrChanged]. Each chunk is checked to land
// at its place in its tensor, once ([ErrMisplaced]).
//
// Memory: the parts being read (at most Concurrency+1 chunks' worth of
// tensors are in progress at once; their buffers are the caller's once
// delivered) plus what the caller keeps; Discard uses (Concurrency+1) ×
// chunk bytes in all. Cancel the context to stop a load: reads in flight
// are abandoned (remote ones at once, local ones after their chunk).
//
// Tensor parallelism ([WithTensorParallel]): a rule table ([DefaultRules],
// [WithRules]) says which tensors split by rows (dimension 0), by columns
// (dimension 1) or along another dimension, and which are replicated. A
// rank reads only its range of the split dimension — one contiguous run
// for a row split, one run per row for a column split — so the bytes read
// by all ranks together are the model once plus (world-1) times the
// replicated tensors. The part is exactly what Tensor.Slice (and
// safetensors get --slice) returns for [Part.Selectors]. A dimension the
// world size does not divide is refused ([ErrUneven]) unless
// WithUneven(Chunk) asks for torch.chunk's parts.
package load
