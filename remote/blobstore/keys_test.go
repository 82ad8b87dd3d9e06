package blobstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// hostileKeys are keys that gocloud's s3blob rewrites (or that a URL
// cannot carry as they are): each must be listed and read under its real
// name, never confused with another object.
var hostileKeys = []string{
	"up/a/../b.bin",      // "../": s3blob sent "a/..__0x2f__b.bin"
	"up/../../etc/x",     // climbs above the prefix in name only
	"up/new\nline.bin",   // a control character
	"up/tab\there",       // another
	"up/double//slash",   // "//"
	"up/ünï/çødé.bin",    // non-ASCII
	"up/dir/",            // a trailing '/': an object, not a prefix
	"up/x__0x2f__y",      // what s3blob's unescaping lists as "up/x/y"
	"up/x/y",             // ... the object it would then read instead
	"up/q?uery#frag%20",  // URL syntax in a key
	"up/ sp ace ",        // spaces
	"up/percent%2Fslash", // a literal %2F
}

// TestHostileKeys lists and reads every hostile key through the real AWS
// SDK against gofakes3: one distinct body per key proves each read got its
// own object.
func TestHostileKeys(t *testing.T) {
	s3 := newFakeS3(t)
	body := map[string][]byte{}
	for i, k := range hostileKeys {
		body[k] = []byte(fmt.Sprintf("object %d: %q", i, k))
		s3.put(t, k, body[k])
	}
	ctx := context.Background()
	pool, err := NewPool(WithPrefetch(8))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var listed []string
	for o, err := range pool.Objects(ctx, s3.url("up/")) {
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
		listed = append(listed, o.Key)
		if strings.HasSuffix(o.URL, "/") || strings.Contains(o.URL, "\n") {
			t.Errorf("%q: URL %q ends in '/' or holds a raw newline", o.Key, o.URL)
		}
		obj, err := pool.Open(ctx, o.URL)
		if err != nil {
			t.Errorf("%q: open %s: %v", o.Key, o.URL, err)
			continue
		}
		got, err := io.ReadAll(io.NewSectionReader(obj, 0, obj.Size()))
		obj.Close()
		if err != nil || !bytes.Equal(got, body[o.Key]) {
			t.Errorf("%q: read %q, %v; want %q", o.Key, got, err, body[o.Key])
		}
		if obj.Key() != o.Key {
			t.Errorf("%q: object key %q", o.Key, obj.Key())
		}
	}
	want := slices.Clone(hostileKeys)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("listed %q\nwant   %q", listed, want)
	}
	// The object URL of a key ending in '/' opens the object; the prefix
	// URL of the same name lists.
	if _, err := Open(ctx, s3.url("up/dir/")); err == nil {
		t.Error("a URL ending in '/' opened as an object")
	}
}

// TestObjectURLRoundTrip: SplitURL gives back every key objectURL wrote,
// byte for byte, invalid UTF-8 included.
func TestObjectURLRoundTrip(t *testing.T) {
	keys := append(slices.Clone(hostileKeys), "bad\xffutf8", "/leading", "a\x00nul", "end.", "..")
	for _, base := range []string{"s3://b?region=x&endpoint=http%3A%2F%2F127.0.0.1%3A1", "s3://b", "file:///tmp/d"} {
		for _, k := range keys {
			u := objectURL(base, k)
			b, key, err := SplitURL(u)
			if strings.HasPrefix(base, "file:") {
				// The directory of the path is the bucket: the same file.
				if strings.HasSuffix(k, "/") || strings.Contains(k, "//") || strings.HasPrefix(k, "/") {
					continue // no file has such a name
				}
				bu, _ := url.Parse(b)
				if err != nil || strings.TrimSuffix(bu.Path, "/")+"/"+key != "/tmp/d/"+k {
					t.Errorf("%q in %s: URL %q splits to %q %q %v", k, base, u, b, key, err)
				}
			} else if err != nil || key != k || b != base {
				t.Errorf("%q in %s: URL %q splits to %q %q %v", k, base, u, b, key, err)
			}
			if strings.HasSuffix(strings.SplitN(u, "?", 2)[0], "/") {
				t.Errorf("%q: object URL %q ends in '/'", k, u)
			}
		}
	}
}

// TestDuplicatedPages: a server that sends a page twice (with a new
// continuation token) has each key audited once; one that goes back in key
// order is refused, since the listing could not be shown complete.
func TestDuplicatedPages(t *testing.T) {
	newFakeS3(t)
	pages := [][]string{{"p/a", "p/b"}, {"p/c", "p/d"}, {"p/c", "p/d"}, {"p/d", "p/e"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := 0
		fmt.Sscanf(r.URL.Query().Get("continuation-token"), "t%d", &i)
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>`)
		for _, k := range pages[i] {
			fmt.Fprintf(w, "<Contents><Key>%s</Key><Size>1</Size></Contents>", k)
		}
		if i+1 < len(pages) {
			fmt.Fprintf(w, "<IsTruncated>true</IsTruncated><NextContinuationToken>t%d</NextContinuationToken>", i+1)
		} else {
			fmt.Fprint(w, "<IsTruncated>false</IsTruncated>")
		}
		fmt.Fprint(w, "</ListBucketResult>")
	}))
	defer srv.Close()
	u := "s3://b/p/?endpoint=" + url.QueryEscape(srv.URL) + "&use_path_style=true&region=us-east-1"
	var keys []string
	for o, err := range Objects(context.Background(), u) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, " ") != "p/a p/b p/c p/d p/e" {
		t.Fatalf("keys %q", keys)
	}
	pages = [][]string{{"p/c", "p/d"}, {"p/a", "p/e"}}
	var err error
	for _, err = range Objects(context.Background(), u) {
		if err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "key order") {
		t.Fatalf("a listing out of key order: %v", err)
	}
}
