package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/gosafetensors/safetensors/audit"
)

// Result is the document the worker writes for one object version: the
// fields of one element of `scan --json` (path, format, verdict, globals,
// dangerous_opcodes, problems, error) and where the object is and which
// version of it was audited. docs/queue.md documents the schema.
type Result struct {
	audit.ScanReport
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	// ETag (without quotes) and Version (S3 version ID, GCS generation)
	// are the event's: the version audited, or found changed.
	ETag    string `json:"etag,omitempty"`
	Version string `json:"version,omitempty"`
	// Size is the size the event announced (-1: none).
	Size int64 `json:"size"`
	// Changed says the object was no longer the version the event named
	// (replaced or deleted) when the worker read it: nothing of another
	// version was audited in its place; the verdict is "error".
	Changed bool `json:"changed,omitempty"`
	// Attempts is the delivery of the message that wrote this document
	// (1 for the first).
	Attempts int `json:"attempts"`
	// Event is the event's name; Sequencer its S3 sequencer.
	Event     string `json:"event,omitempty"`
	Sequencer string `json:"sequencer,omitempty"`
}

// marshal writes the document: the fields of the scan report first, as
// `scan --json` writes them (indented by two spaces), then the event's.
func (r *Result) marshal() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// final reports whether a stored result may stand for a new delivery of
// ev without reading the object again: a verdict on the content (or a
// change found) of the same object version. Errors are never final for a
// new attempt. A version named only by its ETag is the same version only
// for the same event (the sequencer S3 gives every write of a key): an
// upload of other bytes with the same MD5 must not inherit a verdict.
func (r *Result) final(ev *Event) bool {
	if r.Bucket != ev.Bucket || r.Key != ev.Key || r.ETag != ev.ETag || r.Version != ev.Version() {
		return false
	}
	if r.Verdict == audit.Error && !r.Changed {
		return false
	}
	return ev.immutable() || r.Sequencer == ev.Sequencer
}

// ResultKey returns the key, under the results prefix, of the document of
// one object version: BUCKET/KEY@VERSION.json with every byte of the
// bucket, the key and the version outside [A-Za-z0-9._-] percent-encoded
// ('/' included, so a key is one name and no ".." can lead out), VERSION
// the event's version ID, generation or ETag. A name that would be longer
// than 200 bytes keeps its first 100 and adds "~" and the SHA-256 of the
// whole (so names stay short for file systems and never collide; "~" is
// otherwise encoded). A redelivered event maps to the same key.
func ResultKey(ev *Event) string {
	v := ev.Version()
	if v == "" {
		v = "unversioned"
	}
	return escapeName(ev.Bucket) + "/" + escapeName(ev.Key) + "@" + escapeName(v) + ".json"
}

// invalidKey is the key of the result for a message that is not an event:
// by the SHA-256 of its bytes, so a redelivery rewrites the same document.
func invalidKey(data []byte) string {
	sum := sha256.Sum256(data)
	return "invalid-events/" + hex.EncodeToString(sum[:]) + ".json"
}

const maxName = 200

func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	e := b.String()
	if e == "." || e == ".." {
		return strings.Repeat("%2E", len(e))
	}
	if len(e) <= maxName {
		return e
	}
	cut := 100
	for i := cut - 2; i < cut; i++ { // do not split a %XX
		if e[i] == '%' {
			cut = i
		}
	}
	sum := sha256.Sum256([]byte(s))
	return e[:cut] + "~" + hex.EncodeToString(sum[:])
}
