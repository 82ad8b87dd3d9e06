package remote

import (
	"fmt"
	"net/http"
	"time"
)

// A validator is what proves that two responses carry bytes of one object:
// a read that needs more than one request is only as safe as it.
type validator int

const (
	// pinNone: nothing the server sent pins the object (no ETag and no
	// Last-Modified, a weak ETag, a Last-Modified too close to the Date).
	pinNone validator = iota
	// pinETag: a strong ETag, sent back as If-Match and compared on every
	// response.
	pinETag
	// pinLastModified: a Last-Modified that RFC 9110 §8.8.2.2 lets a
	// client deduce is strong (the response's Date is at least
	// [lastModifiedMargin] later), sent back as If-Unmodified-Since and
	// required, unchanged, on every response.
	pinLastModified
	// pinCommit: a Hugging Face Hub file read at a commit hash: its bytes
	// are content-addressed by the commit (and X-Linked-Etag, the LFS
	// object's sha256, is compared on every hop that reports it).
	pinCommit
)

// lastModifiedMargin is how much older than the response's Date a
// Last-Modified must be to pin an object. Last-Modified has a resolution of
// one second, so an object replaced within the second it was written keeps
// it; RFC 9110 §8.8.2.2 lets a client treat it as strong only when the Date
// is at least one second later, and a minute (RFC 2616's rule) leaves room
// for clock skew between the clock that stamped the file and the server's.
const lastModifiedMargin = 60 * time.Second

// isWeak reports a weak entity tag (W/"..."): it proves only that two
// representations are equivalent to the server, not that their bytes are.
func isWeak(etag string) bool { return len(etag) >= 2 && etag[:2] == "W/" }

// strongETag reports an entity tag usable as a strong validator: a quoted
// opaque tag without the weak prefix.
func strongETag(etag string) bool {
	return len(etag) >= 2 && etag[0] == '"' && etag[len(etag)-1] == '"'
}

// choosePin decides what pins the object from the first response.
func choosePin(h http.Header) (validator, string) {
	etag, lm, date := h.Get("ETag"), h.Get("Last-Modified"), h.Get("Date")
	if strongETag(etag) {
		return pinETag, ""
	}
	var sent string
	switch {
	case etag != "" && isWeak(etag):
		sent = fmt.Sprintf("only a weak ETag (%s), which says two versions are equivalent, not that their bytes are equal", etag)
	case etag != "":
		sent = fmt.Sprintf("a malformed ETag (%q)", etag)
	}
	if lm == "" {
		if sent == "" {
			return pinNone, "no ETag and no Last-Modified"
		}
		return pinNone, sent + ", and no Last-Modified"
	}
	if sent != "" {
		sent += ", and "
	}
	mod, err := http.ParseTime(lm)
	if err != nil {
		return pinNone, sent + fmt.Sprintf("an unparsable Last-Modified (%q)", lm)
	}
	if date == "" {
		return pinNone, sent + fmt.Sprintf("a Last-Modified (%s) but no Date to show it is older than the response", lm)
	}
	d, err := http.ParseTime(date)
	if err != nil {
		return pinNone, sent + fmt.Sprintf("a Last-Modified (%s) and an unparsable Date (%q)", lm, date)
	}
	if age := d.Sub(mod); age < lastModifiedMargin {
		return pinNone, sent + fmt.Sprintf("a Last-Modified (%s) only %v before its Date (%s): an object replaced within the same second keeps it", lm, age.Round(time.Second), date)
	}
	return pinLastModified, ""
}

// unvalidatedf returns the error for a read that needs another request of
// an object nothing pins.
func unvalidatedf(sent string) error {
	return fmt.Errorf("%w: the read needs another request, and the server sent %s, so that request could read a replaced object; "+
		"the server must send a strong ETag (\"...\", not W/\"...\") or a Last-Modified at least 60 s before its Date "+
		"(to read it anyway, trust the server: --trust-server, remote.WithTrustUnvalidated)",
		ErrNoValidator, sent)
}
