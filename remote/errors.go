package remote

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gosafetensors/safetensors"
	redactpkg "github.com/gosafetensors/safetensors/internal/redact"
)

var (
	// ErrObjectChanged reports that the remote object is not the one that was
	// opened: its ETag, Last-Modified or size differs, or the server refused
	// the pinned If-Match (412).
	ErrObjectChanged = errors.New("remote object changed while it was being read")
	// ErrProtocol reports a server that broke the range protocol: a 200 to a
	// range request, a Content-Range that does not match the request, a body
	// longer than the range, an unexpected encoding. Such responses are never
	// used as data.
	ErrProtocol = errors.New("server broke the HTTP range protocol")
	// ErrNoValidator reports a read that needs more than one request of an
	// object the server does not pin: no strong ETag and no Last-Modified
	// old enough to be strong (see docs/remote.md). Without one, an object
	// replaced between two requests by bytes of the same size would be
	// read as one object made of two. [WithTrustUnvalidated] lifts the
	// requirement for servers whose objects cannot change.
	ErrNoValidator = errors.New("server does not pin the object (no strong validator)")
	// ErrStalled reports a response that sent no bytes for the stall timeout.
	// Errors wrapping it also wrap context.DeadlineExceeded.
	ErrStalled = errors.New("stalled: no bytes received")
	// ErrOffline reports that HF_HUB_OFFLINE forbids network access.
	ErrOffline = errors.New("offline mode (HF_HUB_OFFLINE) forbids network access")
	// ErrInvalidPath reports a repository-relative path that could escape the
	// repository or is not a plain relative path.
	ErrInvalidPath = errors.New("invalid repository path")
	// ErrInvalidURL reports a location that is not a valid remote URL.
	ErrInvalidURL = errors.New("invalid remote URL")
	// ErrClosed reports a read from a closed File.
	ErrClosed = errors.New("remote file closed")
	// ErrOption reports an invalid option value (a nil Option included). It
	// is safetensors.ErrOption, the sentinel every package of the module
	// wraps.
	ErrOption = safetensors.ErrOption
)

// StatusError is an HTTP response with an unexpected status. The Hugging
// Face Hub explains its errors in the X-Error-Code (RepoNotFound, GatedRepo,
// RevisionNotFound, EntryNotFound, ...) and X-Error-Message headers.
type StatusError struct {
	URL        string // the URL that answered (credentials never included)
	StatusCode int    // e.g. 404
	Code       string // X-Error-Code, if any
	Message    string // X-Error-Message, if any
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if h := e.hint(); h != "" {
		b.WriteString(" - ")
		b.WriteString(h)
	}
	return b.String()
}

// hint says what to do about the most common Hub errors.
func (e *StatusError) hint() string {
	switch e.Code {
	case "RepoNotFound":
		return "no such repository, or it is private and no valid token was sent (set HF_TOKEN)"
	case "GatedRepo":
		return "the repository is gated: accept its conditions on the Hub and use a token (HF_TOKEN)"
	case "RevisionNotFound":
		return "no such revision (branch, tag or commit)"
	case "EntryNotFound":
		return "no such file at this revision"
	}
	switch e.StatusCode {
	case http.StatusUnauthorized:
		return "authentication required or token invalid (HF_TOKEN)"
	case http.StatusForbidden:
		return "access denied for this token"
	}
	return ""
}

// Is lets errors.Is(err, ErrObjectChanged) match a 412 Precondition Failed,
// which is how servers refuse a pinned If-Match.
func (e *StatusError) Is(target error) bool {
	return target == ErrObjectChanged && e.StatusCode == http.StatusPreconditionFailed
}

// Temporary reports whether the status is worth retrying (429 or a 5xx other
// than 501 and 505).
func (e *StatusError) Temporary() bool {
	switch {
	case e.StatusCode == http.StatusTooManyRequests, e.StatusCode == http.StatusRequestTimeout:
		return true
	case e.StatusCode == http.StatusNotImplemented, e.StatusCode == http.StatusHTTPVersionNotSupported:
		return false
	}
	return e.StatusCode >= 500 && e.StatusCode <= 599
}

// Error is the error of a failed read: the object, the byte range asked for
// and what went wrong. Err is a *StatusError, a sentinel of this package, a
// context error or the network error, and is what errors.Is and errors.As see.
type Error struct {
	Name string // the object, as given to Open (credentials removed)
	Off  int64  // first byte asked for, or -1
	Len  int64  // bytes asked for, or -1
	Op   string // "open", "read", "read runs"
	Err  error
}

func (e *Error) Error() string {
	cause := redactpkg.Unnamed(e.Err.Error(), e.Name) // named once, here
	if e.Off >= 0 && e.Len >= 0 && e.Op != "open" {
		return fmt.Sprintf("%s: %s bytes %d-%d: %s", e.Name, e.Op, e.Off, e.Off+e.Len-1, cause)
	}
	return fmt.Sprintf("%s: %s: %s", e.Name, e.Op, cause)
}

func (e *Error) Unwrap() error { return e.Err }

// protocolf returns an error wrapping ErrProtocol.
func protocolf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// changedf returns an error wrapping ErrObjectChanged.
func changedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrObjectChanged, fmt.Sprintf(format, args...))
}
