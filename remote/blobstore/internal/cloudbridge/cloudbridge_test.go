package cloudbridge

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

// TestBridge reads and lists through memblob; keys the hooks call unsafe
// are listed with ErrUnreadableKey and never read.
func TestBridge(t *testing.T) {
	ctx := context.Background()
	mb := memblob.OpenBucket(nil)
	for k, v := range map[string]string{"p/a": "aaa", "p/empty": "", "p/un/../safe": "x", "q/z": "z"} {
		if err := mb.WriteAll(ctx, k, []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	open := Opener(Hooks{
		Open:    func(context.Context, *url.URL, driver.Config) (*blob.Bucket, error) { return mb, nil },
		Version: func(*blob.Reader) string { return "" },
		Pin:     func(string, func(any) bool) error { return nil },
		RawKey:  func(o *blob.ListObject) (string, bool) { return o.Key, true },
		Safe:    func(k string) bool { return !strings.Contains(k, "../") },
	})
	b, err := open(ctx, &url.URL{Scheme: "mem"}, driver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	page, err := b.ListPage(ctx, "p/", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range page.Objects {
		s := o.Key
		if errors.Is(o.Err, driver.ErrUnreadableKey) {
			s += " (unreadable)"
		}
		got = append(got, s)
	}
	if strings.Join(got, ",") != "p/a,p/empty,p/un/../safe (unreadable)" || page.Next != "" {
		t.Fatalf("listed %q next %q", got, page.Next)
	}
	r, err := b.NewRangeReader(ctx, "p/a", 1, 5, "")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if string(data) != "aa" || r.Size != 3 {
		t.Fatalf("read %q of %d", data, r.Size)
	}
	if r, err := b.NewRangeReader(ctx, "p/empty", 0, 10, ""); err != nil || r.Size != 0 {
		t.Fatalf("empty object: %v", err)
	}
	if _, err := b.NewRangeReader(ctx, "p/un/../safe", 0, 10, ""); !errors.Is(err, driver.ErrUnreadableKey) {
		t.Fatalf("unsafe key read: %v", err)
	}
	if _, err := b.ListPage(ctx, "p/un/../", "", 10); !errors.Is(err, driver.ErrUnreadableKey) {
		t.Fatalf("unsafe prefix listed: %v", err)
	}
}
