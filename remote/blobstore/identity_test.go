package blobstore

import (
	"testing"

	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestPinned(t *testing.T) {
	if pinned("") != nil {
		t.Error("empty version pinned")
	}
	in := &s3.GetObjectInput{}
	err := pinned(`"abc"`).BeforeRead(func(i any) bool {
		if p, ok := i.(**s3.GetObjectInput); ok {
			*p = in
			return true
		}
		return false
	})
	if err != nil || in.IfMatch == nil || *in.IfMatch != `"abc"` {
		t.Errorf("S3 If-Match: %v %v", in.IfMatch, err)
	}
	ao := &azblobblob.DownloadStreamOptions{}
	err = pinned(`"0x8D"`).BeforeRead(func(i any) bool {
		if p, ok := i.(**azblobblob.DownloadStreamOptions); ok {
			*p = ao
			return true
		}
		return false
	})
	if err != nil || ao.AccessConditions == nil || string(*ao.AccessConditions.ModifiedAccessConditions.IfMatch) != `"0x8D"` {
		t.Errorf("Azure If-Match: %v", err)
	}
	for v, want := range map[string]int64{"generation 17": 17, "generation 0": 0, "generation x": 0, `"etag"`: 0} {
		if g, ok := parseGeneration(v); g != want || ok != (want > 0) {
			t.Errorf("%q: %d %v", v, g, ok)
		}
	}
}
