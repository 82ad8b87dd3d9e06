package download

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/internal/safename"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore"
)

// Errors of the package; errors.Is matches them.
var (
	// ErrDigest reports bytes that do not hash to the digest the listing
	// gives (a [*DigestError] says which file and both digests).
	ErrDigest = errors.New("download: digest mismatch")
	// ErrNoFiles reports a selection (--include, --exclude, a path) that
	// matches no file.
	ErrNoFiles = errors.New("download: no file matches")
	// ErrLocation reports a location download cannot handle, or an HTTP or
	// bucket download without a local directory.
	ErrLocation = errors.New("download: unsupported location")
	// ErrUnsafeName reports a file selected for download whose name — chosen
	// by the server: a Hub listing's path, a bucket key, a shard an index
	// names — may not be written on the local disk: outside the folder, an
	// alias of another name, or where it changes what a tool does (a .git
	// folder, huggingface_hub's or this module's metadata). Such a download
	// fails before a byte is written, naming every such file; excluding them
	// downloads the rest. It is safename.ErrUnsafe (docs/download.md).
	ErrUnsafeName = safename.ErrUnsafe
)

// checkNames checks the names a download of loc would write together
// ([safename.CheckSet]), and, for a Hub download, that they can be
// requested (remote.ValidRepoPath): one error naming every file refused.
func checkNames(loc string, names []string, hub bool) error {
	err := safename.CheckSet(names)
	var errs []error
	if err != nil {
		errs = err.(interface{ Unwrap() []error }).Unwrap()
	}
	if hub {
		for _, n := range names {
			if safename.Check(n) == nil {
				if verr := remote.ValidRepoPath(n); verr != nil {
					errs = append(errs, fmt.Errorf("%w: cannot be requested: %w", ErrUnsafeName, verr))
				}
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &namesError{loc: redact.Location(loc), errs: errs}
}

// namesError lists the files a download refused, on one line.
type namesError struct {
	loc  string
	errs []error
}

func (e *namesError) Error() string {
	msgs := make([]string, len(e.errs))
	for i, err := range e.errs {
		msgs[i] = err.Error()
	}
	n, them := "1 file", "it"
	if len(e.errs) > 1 {
		n, them = fmt.Sprint(len(e.errs), " files"), "them"
	}
	return fmt.Sprintf("%s: %s selected cannot be written safely (exclude %s to download the rest): %s", e.loc, n, them, strings.Join(msgs, "; "))
}

func (e *namesError) Unwrap() []error { return e.errs }

// Result describes a finished download.
type Result struct {
	Location string
	// Commit is the commit a Hub download was made at ("" otherwise).
	Commit string
	// Dir is where the files are: the snapshot folder in the cache, or the
	// local directory.
	Dir   string
	Files []File
	// Bytes is the size of the files selected; Moved the bytes moved over
	// the network in this run; Resumed the bytes an earlier, interrupted
	// run had left on disk.
	Bytes, Moved, Resumed int64
	// Requests counts HTTP or object-store requests (retries included).
	Requests int64
	Duration time.Duration

	readBack int64 // bytes hashed by reading them back from disk (tests)
	direct   int64 // bytes written with O_DIRECT (tests)
}

// File is one file of a download.
type File struct {
	Path   string // in the repository, directory or prefix ('/'-separated)
	Size   int64
	Digest Digest // what its bytes were checked against
	Local  string // where it is now (in a snapshot: the link)
	// Present is true when the file was already complete on disk and
	// nothing was read.
	Present bool
}

// Download puts the files of a location on disk, reading ranges of them
// in parallel, resuming what an earlier run left, and checking every byte
// as it arrives.
//
//   - hf://[datasets/|spaces/]ORG/REPO[@REV][/PATH] (or a resolve URL on
//     the Hub's endpoint): the repository's files (those under PATH, those
//     [WithInclude] and [WithExclude] select), into the Hugging Face cache
//     exactly as huggingface_hub lays it out, or under [WithLocalDir]. LFS
//     files are checked against their SHA-256, others against their git
//     blob id, both from the Hub's listing.
//   - http(s)://HOST/DIR/ (a directory: [WithFiles], or its model) or
//     http(s)://HOST/FILE, into [WithLocalDir]; every range is pinned to
//     the object's strong validator (docs/remote.md).
//   - s3://, gs://, azblob://, file:// prefixes ending in '/' (every object
//     under it that the patterns select) or single objects, into
//     [WithLocalDir]; pinned to the version the store reports.
//
// A file is visible under its final name only once complete and checked;
// until then its bytes are in a partial file beside a journal of what is
// on disk, which the next run resumes. An error stops the download; files
// completed before it stay (in the cache, checked blobs), nothing else
// changes. When to use it: to have a model on disk for tools that read
// local files (transformers, an engine, this module's commands offline).
// To read a model once into memory, use package load; to read a few
// tensors, open the location with package source.
func Download(ctx context.Context, location string, opts ...Option) (*Result, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var res *Result
	switch {
	case remote.IsHubURL(location) && (strings.HasPrefix(location, "hf://") || cfg.hubHandles(location)):
		res, err = downloadHub(ctx, location, &cfg)
	case strings.HasPrefix(location, "http://") || strings.HasPrefix(location, "https://"):
		res, err = downloadHTTP(ctx, location, &cfg)
	case blobstore.IsURL(location):
		res, err = downloadBucket(ctx, location, &cfg)
	default:
		return nil, fmt.Errorf("%w: %s (want hf://, http(s):// or a bucket URL)", ErrLocation, location)
	}
	if res != nil {
		res.Location = location
		res.Duration = time.Since(start)
	}
	// No error names a URL with its query (a bucket URL's options, a
	// signed URL's signature): the SDKs' and net/http's quote them whole.
	return res, redact.Error(err, location)
}

// hubHandles reports whether a resolve-shaped URL is for the Hub.
func (c *config) hubHandles(location string) bool {
	if c.hub != nil {
		return c.hub.Handles(location)
	}
	h, err := remote.NewHub(c.remote...)
	return err == nil && h.Handles(location)
}
