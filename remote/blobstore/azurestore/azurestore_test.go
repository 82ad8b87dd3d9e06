package azurestore

import (
	"testing"

	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
)

func TestPinAndSafe(t *testing.T) {
	ao := &azblobblob.DownloadStreamOptions{}
	err := pin(`"0x8D"`, func(i any) bool {
		if p, ok := i.(**azblobblob.DownloadStreamOptions); ok {
			*p = ao
			return true
		}
		return false
	})
	if err != nil || ao.AccessConditions == nil || string(*ao.AccessConditions.ModifiedAccessConditions.IfMatch) != `"0x8D"` {
		t.Errorf("Azure If-Match: %v", err)
	}
	if err := pin("x", func(any) bool { return false }); err == nil {
		t.Error("pin without options succeeded")
	}
	for _, k := range []string{"a/../b", "a\\b", "q?x", "h#x", "p%20", "dir/", "x__0x2f__y", "nl\n", "del\x7f"} {
		if safe(k) {
			t.Errorf("%q taken as safe", k)
		}
	}
	for _, k := range []string{"models/model.safetensors", "ünï code", "a..b/c"} {
		if !safe(k) {
			t.Errorf("%q taken as unsafe", k)
		}
	}
}
