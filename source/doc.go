// Package source opens whatever a user names as a model: a local file or
// directory, a sharded model's index, an http(s) URL, a Hugging Face Hub
// location (hf://ORG/REPO[@REV][/PATH] or a …/resolve/… URL) or a bucket
// object (s3://, gs://, azblob://, with the drivers the application
// imports), and reads it as tensors. Its format is decided once, by
// content, never by name ([Detect]): a safetensors file, plain or
// compressed; a sharded model (its index, local or remote); a PyTorch
// checkpoint, zip or legacy, read by the inert decoder of package torch as
// the safetensors file converting it would write (package convert), never
// executed. A folder's model is the file transformers would load
// ([PickModel]: safetensors first, then pytorch_model.bin, sharded or not),
// chosen from the directory's entries or the Hub's file list. Failures to
// reach the bytes are [*IOError]; bytes that are not a model are a
// [*ContentError] that says what they are instead (an HTML page, a Git LFS
// pointer, an incomplete download).
//
// # Which opener
//
// The module has four ways in; take the narrowest that fits:
//
//   - [safetensors.Open] maps one local safetensors file: zero-copy tensor
//     views, the cost of the header only. Use it when you know the file is
//     safetensors and local. [safetensors.NewReader] is the same over any
//     io.ReaderAt.
//   - [sharded.Open] opens a local sharded safetensors model (a directory or
//     its index) as one source, checked against its index; Split and Merge
//     copy its shards inside the kernel.
//   - remote.Open (then safetensors.NewReader) reads one file over HTTP
//     Range requests with full control of the HTTP client (retries,
//     concurrency, validators); remote.Hub resolves Hub locations.
//   - [OpenModel] (this package) takes any location in any of these forms
//     and any format, as the command line does: use it for input that
//     comes from a user. It returns a [Model], a safetensors.Source whose
//     fields say what was opened.
//
// [Open] stops earlier, at an [Object]: the bytes and their detected
// format, for callers that treat formats differently (scan, validate).
package source
