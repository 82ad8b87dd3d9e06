package blobstore

import (
	"strconv"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// version identifies the content of an object where the store says so: the
// ETag on S3 and Azure, the generation on GCS ("" when unknown, e.g.
// fileblob, whose size and modification time are checked instead).
func version(r *blob.Reader) string {
	var s3out s3.GetObjectOutput
	if r.As(&s3out) && s3out.ETag != nil {
		return *s3out.ETag
	}
	var gr *storage.Reader
	if r.As(&gr) && gr != nil && gr.Attrs.Generation != 0 {
		return "generation " + strconv.FormatInt(gr.Attrs.Generation, 10)
	}
	var az azblobblob.DownloadStreamResponse
	if r.As(&az) && az.ETag != nil {
		return string(*az.ETag)
	}
	return ""
}

// pinned returns reader options that make the store refuse (412) a read of
// another version than v: If-Match on S3 and Azure, a generation
// precondition on GCS.
func pinned(v string) *blob.ReaderOptions {
	if v == "" {
		return nil
	}
	return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
		var in *s3.GetObjectInput
		if as(&in) {
			in.IfMatch = &v
			return nil
		}
		var oh **storage.ObjectHandle
		if as(&oh) {
			if gen, ok := parseGeneration(v); ok {
				*oh = (*oh).If(storage.Conditions{GenerationMatch: gen})
			}
			return nil
		}
		var ao *azblobblob.DownloadStreamOptions
		if as(&ao) {
			etag := azcore.ETag(v)
			if ao.AccessConditions == nil {
				ao.AccessConditions = &azblobblob.AccessConditions{}
			}
			if ao.AccessConditions.ModifiedAccessConditions == nil {
				ao.AccessConditions.ModifiedAccessConditions = &azblobblob.ModifiedAccessConditions{}
			}
			ao.AccessConditions.ModifiedAccessConditions.IfMatch = &etag
		}
		return nil
	}}
}

func parseGeneration(v string) (int64, bool) {
	const p = "generation "
	if len(v) <= len(p) || v[:len(p)] != p {
		return 0, false
	}
	n, err := strconv.ParseInt(v[len(p):], 10, 64)
	return n, err == nil && n > 0
}
