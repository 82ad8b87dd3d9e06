// Package remote reads files over HTTP Range requests and resolves Hugging
// Face Hub locations, with the standard library only.
//
// A [File] is an io.ReaderAt over one remote object. It never returns wrong
// bytes: every response must be a 206 whose Content-Range matches the request
// and the size learned when the file was opened, its body must be exactly as
// long as the range, and the object must provably not change between
// requests. What proves it is a strong validator of the first response: a
// strong ETag (sent back as If-Match), a Last-Modified at least a minute
// older than the response's Date (sent back as If-Unmodified-Since), or, for
// a Hub file, the commit it is read at. The validators are compared on every
// response. A server that sends none (no ETag, only a weak W/"..." one, a
// Last-Modified too recent to be strong) is read only as far as its first
// response goes: a read that needs another request is [ErrNoValidator],
// unless the caller trusts it ([WithTrustUnvalidated]). Anything else is an
// error. The first request fetches a prefix (100,008 bytes by default) that
// is kept, so the safetensors header of a file costs one request when it is
// smaller than that. docs/remote.md says what a server must send.
//
// Transient failures (429, 5xx, connection resets, timeouts, stalls) are
// retried with exponential backoff and jitter, bounded in count and total
// time. Errors are I/O errors: context.DeadlineExceeded stays visible to
// errors.Is, HTTP failures are a [*StatusError], a changed object is
// [ErrObjectChanged], an object nothing pins is [ErrNoValidator] and a server
// that breaks the range protocol is [ErrProtocol].
//
// [File.ReadRuns] reads many byte runs at once with multi-range requests
// (multipart/byteranges), so a column slice of a matrix costs a handful of
// requests; servers that do not support them are read with parallel single
// ranges instead.
//
// [Hub] resolves hf://ORG/REPO[@REV][/PATH] and .../resolve/REV/FILE URLs,
// pins the revision to the commit the Hub reports for the first file (or
// for the file list, [Repo.Files]), and opens every other file of the
// repository at that commit. Which file of a repository is its model is not
// this package's business: package source chooses, as transformers does.
//
// Object storage (s3://, gs://, azblob://) lives in the blobstore
// subpackage, so that importing this package compiles no cloud SDK.
//
// A [File] is bytes: read a safetensors file from it with
// safetensors.NewReader(f, f.Size()). To open a location a user gives
// (hf://ORG/REPO, a URL, a sharded or PyTorch model) with the format
// decided by content, use source.OpenModel, which reads through this
// package; the source package's documentation compares the openers.
package remote
