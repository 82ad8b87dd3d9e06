// Package gcsstore serves gs:// URLs for package blobstore through
// gocloud.dev/blob/gcsblob and the Google Cloud Storage client: reads are
// pinned to the generation seen at open, and every listed key is read
// under its real name (gocloud's key escaping is bypassed by rewriting the
// request). Import it for its side effect:
//
//	import _ "github.com/gosafetensors/safetensors/remote/blobstore/gcsstore"
//
// URL parameters and credentials are gcsblob's (Application Default
// Credentials; STORAGE_EMULATOR_HOST for an emulator). The client and its
// connections are gcsblob's, shared by the process.
package gcsstore

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/gcsblob" // gs:// for gocloud

	"github.com/gosafetensors/safetensors/remote/blobstore/internal/cloudbridge"
	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

func init() { driver.Register("gs", cloudbridge.Opener(hooks)) }

var hooks = cloudbridge.Hooks{
	Open: func(ctx context.Context, u *url.URL, _ driver.Config) (*blob.Bucket, error) {
		return blob.OpenBucket(ctx, u.String())
	},
	Version: version,
	Pin:     pin,
	RawKey: func(o *blob.ListObject) (string, bool) {
		var a storage.ObjectAttrs
		if !o.As(&a) {
			return "", false
		}
		return a.Name, true
	},
	Address: address,
	// Safe says where gcsblob sends a key unchanged (used for the attributes
	// of an empty object): no newline or carriage return, no "../", nothing
	// its unescaping reads as an escape sequence.
	Safe: func(key string) bool {
		return !strings.ContainsAny(key, "\r\n") && !strings.Contains(key, "../") && !strings.Contains(key, "__0x")
	},
}

// version is "generation N", the GCS object version.
func version(r *blob.Reader) string {
	var gr *storage.Reader
	if r.As(&gr) && gr != nil && gr.Attrs.Generation != 0 {
		return "generation " + strconv.FormatInt(gr.Attrs.Generation, 10)
	}
	return ""
}

// pin adds a generation precondition.
func pin(v string, as func(any) bool) error {
	var oh **storage.ObjectHandle
	if !as(&oh) {
		return errors.New("gcsstore: gcsblob gave no object handle to pin the generation")
	}
	gen, ok := parseGeneration(v)
	if !ok {
		return errors.New("gcsstore: not a generation: " + v)
	}
	*oh = (*oh).If(storage.Conditions{GenerationMatch: gen})
	return nil
}

// address replaces gcsblob's object handle (for its escaped key) with one
// for the real key.
func address(b *blob.Bucket, raw string, as func(any) bool) error {
	var oh **storage.ObjectHandle
	if !as(&oh) {
		return errors.New("gcsstore: gcsblob gave no object handle")
	}
	if (*oh).ObjectName() == raw {
		return nil
	}
	var c *storage.Client
	if !b.As(&c) {
		return errors.New("gcsstore: gcsblob gave no client")
	}
	*oh = c.Bucket((*oh).BucketName()).Object(raw)
	return nil
}

func parseGeneration(v string) (int64, bool) {
	s, ok := strings.CutPrefix(v, "generation ")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}
