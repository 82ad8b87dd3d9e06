package gcsstore

import (
	"testing"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"google.golang.org/api/option"
)

func TestPinAndAddress(t *testing.T) {
	c, err := storage.NewClient(t.Context(), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	oh := c.Bucket("b").Object("a/..__0x2f__x")
	as := func(i any) bool {
		if p, ok := i.(***storage.ObjectHandle); ok {
			*p = &oh
			return true
		}
		return false
	}
	if err := pin("generation 17", as); err != nil {
		t.Fatal(err)
	}
	pinned := oh
	if err := address(nil, "a/..__0x2f__x", as); err != nil || oh != pinned {
		t.Errorf("the same key readdressed: %v", err)
	}
	b, err := gcsblob.OpenBucket(t.Context(), gcp.NewAnonymousHTTPClient(gcp.DefaultTransport()), "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := address(b, "a/../x", as); err != nil || oh.ObjectName() != "a/../x" || oh.BucketName() != "b" {
		t.Errorf("readdressed to %q in %q: %v", oh.ObjectName(), oh.BucketName(), err)
	}
	if err := pin(`"etag"`, as); err == nil {
		t.Error("an ETag accepted as a generation")
	}
	for v, want := range map[string]int64{"generation 17": 17, "generation 0": 0, "generation x": 0, `"etag"`: 0} {
		if g, ok := parseGeneration(v); g != want || ok != (want > 0) {
			t.Errorf("%q: %d %v", v, g, ok)
		}
	}
	if hooks.Safe("a/../x") || hooks.Safe("a\nb") || hooks.Safe("x__0x2f__y") || !hooks.Safe("models/a b.safetensors") {
		t.Error("Safe")
	}
}
