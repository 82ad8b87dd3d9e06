package queue

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// An AWS S3 notification as AWS documents it (event message structure
// version 2.1), with a key URL-encoded as AWS sends it: '+' for a space,
// percent escapes for the rest.
const awsEvent = `{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-west-2",
"eventTime":"1970-01-01T00:00:00.000Z","eventName":"ObjectCreated:Put",
"userIdentity":{"principalId":"AIDAJDPLRKLG7UEXAMPLE"},"requestParameters":{"sourceIPAddress":"127.0.0.1"},
"responseElements":{"x-amz-request-id":"C3D13FE58DE4C810","x-amz-id-2":"FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD"},
"s3":{"s3SchemaVersion":"1.0","configurationId":"testConfigRule",
"bucket":{"name":"amzn-s3-demo-bucket","ownerIdentity":{"principalId":"A3NL1KOZZKExample"},"arn":"arn:aws:s3:::amzn-s3-demo-bucket"},
"object":{"key":"models/My+Model%2B1/pytorch_model%5B0%5D.bin","size":1024,"eTag":"d41d8cd98f00b204e9800998ecf8427e",
"versionId":"096fKKXTRTtl3on89fVO.nfljtsv6qko","sequencer":"0055AED6DCD90281E5"}}},
{"eventSource":"aws:s3","eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"b"},"object":{"key":"gone"}}}]}`

// MinIO's NATS target sends the same records with "s3:" names and its own
// envelope.
const minioEvent = `{"EventName":"s3:ObjectCreated:Put","Key":"uploads/in/a b.bin","Records":[{"eventVersion":"2.0",
"eventSource":"minio:s3","awsRegion":"","eventName":"s3:ObjectCreated:Put",
"s3":{"s3SchemaVersion":"1.0","configurationId":"Config","bucket":{"name":"uploads","arn":"arn:aws:s3:::uploads"},
"object":{"key":"in%2Fa+b.bin","size":7,"eTag":"\"5d41402abc4b2a76b9719d911017c592\"","contentType":"application/octet-stream","sequencer":"17A0D1C3B4E5F6A7"}}}]}`

// A GCS object resource, as Pub/Sub carries it (payload format
// JSON_API_V1).
const gcsResource = `{"kind":"storage#object","id":"my-bucket/models/a.safetensors/1700000000000001",
"selfLink":"https://www.googleapis.com/storage/v1/b/my-bucket/o/models%2Fa.safetensors","name":"models/a.safetensors",
"bucket":"my-bucket","generation":"1700000000000001","metageneration":"1","contentType":"application/octet-stream",
"timeCreated":"2023-11-14T22:13:20.000Z","updated":"2023-11-14T22:13:20.000Z","storageClass":"STANDARD",
"size":"2048","md5Hash":"1B2M2Y8AsgTpgAmY7PhCfg==","crc32c":"AAAAAA==","etag":"CIGAgICAgICAARAB"}`

func TestParseS3Events(t *testing.T) {
	evs, err := ParseEvents([]byte(awsEvent), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1 (the removal is not audited): %+v", len(evs), evs)
	}
	want := Event{Source: S3, Name: "ObjectCreated:Put", Bucket: "amzn-s3-demo-bucket", Key: "models/My Model+1/pytorch_model[0].bin",
		ETag: "d41d8cd98f00b204e9800998ecf8427e", VersionID: "096fKKXTRTtl3on89fVO.nfljtsv6qko", Size: 1024, Sequencer: "0055AED6DCD90281E5"}
	if evs[0] != want {
		t.Fatalf("got  %+v\nwant %+v", evs[0], want)
	}
	if evs[0].Version() != want.VersionID || !evs[0].immutable() {
		t.Fatalf("version %q", evs[0].Version())
	}
	evs, err = ParseEvents([]byte(minioEvent), nil)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%+v %v", evs, err)
	}
	if e := evs[0]; e.Key != "in/a b.bin" || e.ETag != "5d41402abc4b2a76b9719d911017c592" || e.Size != 7 || e.Version() != e.ETag || e.immutable() {
		t.Fatalf("%+v", e)
	}
	// what S3 sends when a notification is configured, and removals only
	for _, msg := range []string{
		`{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2014-10-13T15:57:02.089Z","Bucket":"b","RequestId":"5582815E1AEA5ADF","HostId":"8cLeGAmw098X5cv4Zkwcmo8vvZa3eH3eKxsPzbB9wrR+YstdA6Knx4Ip8EXAMPLE"}`,
		`{"Records":[{"eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`,
		`{"Records":[]}`,
	} {
		if evs, err := ParseEvents([]byte(msg), nil); err != nil || len(evs) != 0 {
			t.Errorf("%s: %+v %v", msg, evs, err)
		}
	}
}

func TestParseGCSEvents(t *testing.T) {
	want := Event{Source: GCS, Name: "OBJECT_FINALIZE", Bucket: "my-bucket", Key: "models/a.safetensors", ETag: "CIGAgICAgICAARAB",
		Generation: "1700000000000001", Size: 2048}
	attrs := map[string][]string{"eventType": {"OBJECT_FINALIZE"}, "bucketId": {"my-bucket"}, "objectId": {"models/a.safetensors"},
		"objectGeneration": {"1700000000000001"}, "payloadFormat": {"JSON_API_V1"}}
	b64 := base64.StdEncoding.EncodeToString([]byte(gcsResource))
	for name, c := range map[string]struct {
		data  string
		attrs map[string][]string
		want  Event
	}{
		"resource":               {gcsResource, nil, want},
		"resource and headers":   {gcsResource, attrs, want},
		"base64 resource":        {b64, attrs, want},
		"pubsub message":         {`{"attributes":{"eventType":"OBJECT_FINALIZE","bucketId":"my-bucket","objectId":"models/a.safetensors","objectGeneration":"1700000000000001"},"data":"` + b64 + `","messageId":"1"}`, nil, want},
		"push request":           {`{"message":{"attributes":{"eventType":"OBJECT_FINALIZE"},"data":"` + b64 + `"},"subscription":"projects/p/subscriptions/s"}`, nil, want},
		"attributes only (NONE)": {"", attrs, Event{Source: GCS, Name: "OBJECT_FINALIZE", Bucket: "my-bucket", Key: "models/a.safetensors", Generation: "1700000000000001", Size: -1}},
	} {
		evs, err := ParseEvents([]byte(c.data), c.attrs)
		if err != nil || len(evs) != 1 || evs[0] != c.want {
			t.Errorf("%s: %+v %v", name, evs, err)
		}
	}
	for _, typ := range []string{"OBJECT_DELETE", "OBJECT_ARCHIVE", "OBJECT_METADATA_UPDATE"} {
		if evs, err := ParseEvents([]byte(gcsResource), map[string][]string{"eventType": {typ}}); err != nil || len(evs) != 0 {
			t.Errorf("%s: %+v %v", typ, evs, err)
		}
	}
}

func TestParseBadEvents(t *testing.T) {
	for _, msg := range []string{
		``, `not json`, `[]`, `{"Records": {}}`, `{"hello": "world"}`,
		`{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{}}}]}`,
		`{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"%zz"}}}]}`,
		`{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k","size":-4}}}]}`,
		`{"kind":"storage#object","bucket":"b","name":"n","generation":"x1"}`,
		`{"kind":"storage#object","bucket":"b"}`,
		`{"message":{"data":"!!!"}}`,
		`{"Records":[` + strings.Repeat(`{},`, maxEventBytes/3) + `{}]}`,
	} {
		if evs, err := ParseEvents([]byte(msg), nil); !errors.Is(err, ErrEvent) {
			t.Errorf("%.80s: %+v %v, want ErrEvent", msg, evs, err)
		}
	}
}

// Result keys are one name per bucket, key and version, whatever bytes the
// key holds; long names are shortened with a hash, and distinct events
// never share a key.
func TestResultKey(t *testing.T) {
	ev := func(bucket, key, etag, version string) *Event {
		return &Event{Bucket: bucket, Key: key, ETag: etag, VersionID: version}
	}
	if k := ResultKey(ev("uploads", "in/a b/../x.bin", "abc", "")); k != "uploads/in%2Fa%20b%2F..%2Fx.bin@abc.json" {
		t.Fatalf("%q", k)
	}
	if k := ResultKey(ev("b", "k", "abc", "v/1+=")); k != "b/k@v%2F1%2B%3D.json" {
		t.Fatalf("%q", k)
	}
	long := strings.Repeat("é", 400)
	seen := map[string]string{}
	for _, e := range []*Event{
		ev("b", "k", "e1", ""), ev("b", "k", "e2", ""), ev("b", "k", "e1", "v1"), ev("b", "k@e1", "", ""), ev("b", "k", "", ""),
		ev("b", "k%40e1", "", ""), ev("b", long, "e", ""), ev("b", long+"x", "e", ""), ev("b", "~", "e", ""), ev("b", ".", "e", ""),
		ev("b", "..", "e", ""), ev("c", "k", "e1", ""),
	} {
		k := ResultKey(e)
		if prev, dup := seen[k]; dup {
			t.Errorf("%+v and %s share the key %q", e, prev, k)
		}
		seen[k] = e.Key
		for seg := range strings.SplitSeq(k, "/") {
			if len(seg) > 255 || seg == "." || seg == ".." || seg == "" {
				t.Errorf("key %q has the name %q", k, seg)
			}
		}
	}
}
