// Package azurestore serves azblob:// URLs for package blobstore through
// gocloud.dev/blob/azureblob and the Azure SDK: reads send If-Match with
// the ETag seen at open. gocloud rewrites some blob names before sending
// them and its request cannot be changed, so a listed name that gocloud
// would not send unchanged (holding '\', '"', '#', '%', '?', control
// characters, "../", an escape-like "__0x" sequence, or ending in '/') is
// reported as unreadable rather than read. Import it for its side effect:
//
//	import _ "github.com/gosafetensors/safetensors/remote/blobstore/azurestore"
//
// URL parameters and credentials are azureblob's (AZURE_STORAGE_ACCOUNT,
// AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, the default Azure
// credential chain).
package azurestore

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// for gocloud

	"github.com/gosafetensors/safetensors/remote/blobstore/internal/cloudbridge"
	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

func init() { driver.Register("azblob", cloudbridge.Opener(hooks)) }

var hooks = cloudbridge.Hooks{
	Open: func(ctx context.Context, u *url.URL, _ driver.Config) (*blob.Bucket, error) {
		return blob.OpenBucket(ctx, u.String())
	},
	Version: func(r *blob.Reader) string {
		var az azblobblob.DownloadStreamResponse
		if r.As(&az) && az.ETag != nil {
			return string(*az.ETag)
		}
		return ""
	},
	Pin: pin,
	RawKey: func(o *blob.ListObject) (string, bool) {
		var it container.BlobItem
		if !o.As(&it) || it.Name == nil {
			return "", false
		}
		return *it.Name, true
	},
	Safe: safe,
}

func pin(v string, as func(any) bool) error {
	var ao *azblobblob.DownloadStreamOptions
	if !as(&ao) {
		return errors.New("azurestore: azureblob gave no download options to pin the ETag")
	}
	etag := azcore.ETag(v)
	if ao.AccessConditions == nil {
		ao.AccessConditions = &azblobblob.AccessConditions{}
	}
	if ao.AccessConditions.ModifiedAccessConditions == nil {
		ao.AccessConditions.ModifiedAccessConditions = &azblobblob.ModifiedAccessConditions{}
	}
	ao.AccessConditions.ModifiedAccessConditions.IfMatch = &etag
	return nil
}

// safe reports whether azureblob sends key unchanged: none of the
// characters it escapes, no "../", no trailing '/', and nothing its
// unescaping would read as an escape sequence.
func safe(key string) bool {
	for _, c := range key {
		if c < 32 || c == 127 || strings.ContainsRune(`\"#%?`, c) {
			return false
		}
	}
	return !strings.Contains(key, "../") && !strings.HasSuffix(key, "/") && !strings.Contains(key, "__0x")
}
