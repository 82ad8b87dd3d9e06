// Package download puts models on disk: the files of a Hugging Face Hub
// repository into the Hugging Face cache (exactly as huggingface_hub lays
// it out, so transformers and huggingface_hub find them offline) or into
// a local directory, and the files of an HTTP directory or a bucket prefix
// into a local directory.
//
// Use it when tools need the model as local files (an engine, transformers,
// this module's commands offline). To read a model into memory once, use
// package load; to read a few tensors of a remote model, open it with
// package source — hf:// reads there look in the cache first.
//
// [Download] reads many byte ranges at once (files in parallel, ranges of
// a file in parallel), streaming each to its place in a preallocated
// partial file through a small buffer, so memory does not grow with the
// file or the chunk. A journal beside the partial records, durably, which
// bytes are on disk: a download killed at any moment continues from there,
// moving again less than a chunk per connection. Every Hub file is checked
// while its bytes arrive — an LFS file against its SHA-256, another
// against its git blob id, both from the Hub's listing — and a mismatch
// removes the partial and is a [*DigestError]. Nothing appears under its
// final name before it is complete and checked; in the cache, snapshot
// links and refs are written only once every selected file is.
//
// [Verify] checks again what is on disk, and every index against its
// shards. docs/download.md describes the layout, the journal and the
// guarantees.
package download
