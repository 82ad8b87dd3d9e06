package queue

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// ErrEvent is wrapped by the error of a message that is not an event
// notification the worker understands (not JSON, a record without a
// bucket or key, a key that is not URL-encoded).
var ErrEvent = errors.New("queue: not a bucket event notification")

// Source says which kind of notification an Event came from.
type Source string

const (
	// S3: an S3 event notification (AWS, MinIO, Ceph, R2: the
	// {"Records": [...]} JSON).
	S3 Source = "s3"
	// GCS: a Google Cloud Storage Pub/Sub notification (the object
	// resource, with or without its Pub/Sub attributes).
	GCS Source = "gcs"
)

// Event is one object an event notification says was created: the
// version of it to audit.
type Event struct {
	Source Source
	// Name is the event's name as the store spells it
	// ("ObjectCreated:Put", "s3:ObjectCreated:CompleteMultipartUpload",
	// "OBJECT_FINALIZE").
	Name   string
	Bucket string
	// Key is the object's key, decoded (S3 sends it URL-encoded, with '+'
	// for a space).
	Key string
	// ETag is the object's ETag without quotes ("" if the event names
	// none); on GCS the object resource's etag.
	ETag string
	// VersionID is the S3 version of a versioned bucket; Generation the
	// GCS object generation (decimal). At most one is set.
	VersionID  string
	Generation string
	// Size is the object's size in bytes, -1 if the event does not say.
	Size int64
	// Sequencer orders the events of one S3 key (hexadecimal; "" on GCS).
	Sequencer string
}

// Version returns what names this version of the object in result keys:
// the S3 version ID or GCS generation if there is one, else the ETag
// ("" if the event names neither).
func (e *Event) Version() string {
	switch {
	case e.VersionID != "":
		return e.VersionID
	case e.Generation != "":
		return e.Generation
	}
	return e.ETag
}

// immutable reports whether Version names one write of the object that
// no later write can share (a version ID, a generation), unlike an ETag,
// which an upload of the same bytes (or of bytes with the same MD5)
// repeats.
func (e *Event) immutable() bool { return e.VersionID != "" || e.Generation != "" }

// maxEventBytes bounds a message the worker decodes.
const maxEventBytes = 1 << 20

// ParseEvents decodes the events of one message: an S3 event notification
// ({"Records": [...]}, as AWS sends to SNS, SQS, EventBridge and Lambda,
// and MinIO to NATS), a GCS notification (the JSON object resource that
// Pub/Sub carries as the message data, its attributes — eventType,
// bucketId, objectId, objectGeneration — in h, the NATS headers (names
// compared exactly), if a relay copied them there), or a Pub/Sub message as JSON ({"attributes": {...},
// "data": "BASE64"}, or a push request {"message": {...}}). Events of
// other kinds than object creation (removals, S3's s3:TestEvent,
// OBJECT_DELETE, OBJECT_METADATA_UPDATE) yield nothing and no error.
func ParseEvents(data []byte, h map[string][]string) ([]Event, error) {
	if len(data) > maxEventBytes {
		return nil, fmt.Errorf("%w: a message of %d bytes (at most %d)", ErrEvent, len(data), maxEventBytes)
	}
	attrs := map[string]string{}
	for _, k := range []string{"eventType", "bucketId", "objectId", "objectGeneration", "payloadFormat"} {
		if v := h[k]; len(v) > 0 && v[0] != "" {
			attrs[k] = v[0]
		}
	}
	if trimmed := bytes.TrimSpace(data); len(attrs) > 0 && (len(trimmed) == 0 || trimmed[0] != '{') {
		if len(trimmed) == 0 {
			return gcsEvents(nil, attrs) // payloadFormat NONE
		}
		return gcsEvents(trimmed, attrs) // the data still in base64
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	switch {
	case top["Records"] != nil:
		return s3Events(top["Records"])
	case top["message"] != nil: // a Pub/Sub push request
		var push struct {
			Message pubsubMessage `json:"message"`
		}
		if err := json.Unmarshal(data, &push); err != nil {
			return nil, fmt.Errorf("%w: Pub/Sub push request: %v", ErrEvent, err)
		}
		return push.Message.events()
	case top["attributes"] != nil && top["kind"] == nil:
		var m pubsubMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("%w: Pub/Sub message: %v", ErrEvent, err)
		}
		return m.events()
	case top["kind"] != nil || (top["bucket"] != nil && top["name"] != nil):
		return gcsEvents(data, attrs)
	case top["Event"] != nil || top["EventName"] != nil:
		return nil, nil // s3:TestEvent; a MinIO message without records
	}
	return nil, fmt.Errorf("%w: neither an S3 event (Records) nor a GCS object notification (bucket, name)", ErrEvent)
}

type s3Record struct {
	EventSource string `json:"eventSource"`
	EventName   string `json:"eventName"`
	S3          struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key       *string         `json:"key"`
			Size      json.RawMessage `json:"size"`
			ETag      string          `json:"eTag"`
			VersionID string          `json:"versionId"`
			Sequencer string          `json:"sequencer"`
		} `json:"object"`
	} `json:"s3"`
}

func s3Events(raw json.RawMessage) ([]Event, error) {
	var recs []s3Record
	if err := json.Unmarshal(raw, &recs); err != nil {
		return nil, fmt.Errorf("%w: Records: %v", ErrEvent, err)
	}
	var evs []Event
	for i, r := range recs {
		if !strings.Contains(r.EventName, "ObjectCreated:") {
			continue
		}
		o := r.S3.Object
		if r.S3.Bucket.Name == "" || o.Key == nil || *o.Key == "" {
			return nil, fmt.Errorf("%w: record %d (%s): no bucket name or object key", ErrEvent, i, r.EventName)
		}
		// S3 encodes keys as an HTML form does: '+' is a space.
		key, err := url.QueryUnescape(*o.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: object key %q is not URL-encoded: %v", ErrEvent, i, *o.Key, err)
		}
		size, err := jsonSize(o.Size)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: size: %v", ErrEvent, i, err)
		}
		ev := Event{Source: S3, Name: r.EventName, Bucket: r.S3.Bucket.Name, Key: key, ETag: strings.Trim(o.ETag, `"`),
			VersionID: o.VersionID, Size: size, Sequencer: o.Sequencer}
		if ev.VersionID == "null" { // an object written before versioning was enabled
			ev.VersionID = ""
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// jsonSize reads a size given as a number (S3) or a decimal string (GCS);
// absent is -1.
func jsonSize(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return -1, nil
	}
	s := string(raw)
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s is not a size", raw)
	}
	return n, nil
}

type pubsubMessage struct {
	Attributes map[string]string `json:"attributes"`
	Data       []byte            `json:"data"` // base64 in JSON
}

func (m *pubsubMessage) events() ([]Event, error) {
	if m.Attributes == nil {
		m.Attributes = map[string]string{}
	}
	if len(m.Data) == 0 {
		return gcsEvents(nil, m.Attributes)
	}
	return gcsEvents(m.Data, m.Attributes)
}

// gcsObject is the part of the JSON API object resource the worker reads.
type gcsObject struct {
	Bucket     string          `json:"bucket"`
	Name       *string         `json:"name"`
	Generation json.RawMessage `json:"generation"`
	Size       json.RawMessage `json:"size"`
	ETag       string          `json:"etag"`
}

// generation is decimal digits.
// Compiled on first use: package initialisation runs in every CLI command.
var generation = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,20}$`) })

// gcsEvents reads a GCS notification: the object resource (data, may be
// nil with payloadFormat NONE) and the Pub/Sub attributes.
func gcsEvents(data []byte, attrs map[string]string) ([]Event, error) {
	if t := attrs["eventType"]; t != "" && t != "OBJECT_FINALIZE" {
		return nil, nil
	}
	ev := Event{Source: GCS, Name: "OBJECT_FINALIZE", Bucket: attrs["bucketId"], Key: attrs["objectId"], Generation: attrs["objectGeneration"], Size: -1}
	if data != nil {
		if data = bytes.TrimSpace(data); len(data) > 0 && data[0] != '{' {
			// a relay that kept Pub/Sub's base64
			dec, err := base64.StdEncoding.DecodeString(string(data))
			if err != nil {
				return nil, fmt.Errorf("%w: GCS notification data is neither JSON nor base64", ErrEvent)
			}
			data = dec
		}
		var o gcsObject
		if err := json.Unmarshal(data, &o); err != nil {
			return nil, fmt.Errorf("%w: GCS object resource: %v", ErrEvent, err)
		}
		if o.Bucket != "" {
			ev.Bucket = o.Bucket
		}
		if o.Name != nil {
			ev.Key = *o.Name
		}
		if len(o.Generation) > 0 {
			g := string(o.Generation)
			if unq, err := strconv.Unquote(g); err == nil {
				g = unq
			}
			ev.Generation = g
		}
		size, err := jsonSize(o.Size)
		if err != nil {
			return nil, fmt.Errorf("%w: GCS object resource: size: %v", ErrEvent, err)
		}
		ev.Size, ev.ETag = size, o.ETag
	}
	if ev.Bucket == "" || ev.Key == "" {
		return nil, fmt.Errorf("%w: GCS notification without a bucket or object name", ErrEvent)
	}
	if ev.Generation != "" && !generation().MatchString(ev.Generation) {
		return nil, fmt.Errorf("%w: GCS generation %q is not a number", ErrEvent, ev.Generation)
	}
	return []Event{ev}, nil
}
