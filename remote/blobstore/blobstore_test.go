package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	safetensors "github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/remote"
	_ "github.com/gosafetensors/safetensors/remote/blobstore/s3store"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// fakeS3 runs gofakes3 on 127.0.0.1 and points the AWS SDK's standard
// credential chain at fake static credentials.
type fakeS3 struct {
	backend *s3mem.Backend
	srv     *httptest.Server
}

func newFakeS3(t *testing.T) *fakeS3 {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_REGION": "us-east-1", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"),
	} {
		t.Setenv(k, v)
	}
	be := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	if err := be.CreateBucket("models"); err != nil {
		t.Fatal(err)
	}
	return &fakeS3{backend: be, srv: srv}
}

func (f *fakeS3) put(t *testing.T, key string, data []byte) {
	t.Helper()
	if _, err := f.backend.PutObject("models", key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeS3) url(key string) string {
	return "s3://models/" + key + "?endpoint=" + url.QueryEscape(f.srv.URL) + "&use_path_style=true&region=us-east-1"
}

// TestS3Header reads a real safetensors file through the AWS SDK: the
// header costs one read and every tensor matches.
func TestS3Header(t *testing.T) {
	s3 := newFakeS3(t)
	path := filepath.Join("..", "..", "testdata", "torch", "large_dims.safetensors")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s3.put(t, "dir/model.safetensors", data)
	ctx := context.Background()
	o, err := Open(ctx, s3.url("dir/model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.Size() != int64(len(data)) || o.ETag() == "" {
		t.Fatalf("size %d etag %q", o.Size(), o.ETag())
	}
	r, err := safetensors.NewReader(o, o.Size(), safetensors.WithName(o.Name()))
	if err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.Requests != 1 {
		t.Errorf("header cost %d reads", st.Requests)
	}
	local, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	for _, n := range local.Names() {
		lt, _ := local.Tensor(n)
		rt, _ := r.Tensor(n)
		want, _ := lt.Copy()
		got, err := rt.Copy()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("tensor %s: %v", n, err)
		}
	}
	if strings.Contains(o.Name(), "endpoint") {
		t.Errorf("name leaks the query: %s", o.Name())
	}
}

// TestS3RunsSiblingListChanged covers ReadRuns, siblings, listing a prefix
// and an object replaced between two reads.
func TestS3RunsSiblingListChanged(t *testing.T) {
	s3 := newFakeS3(t)
	data := randomBytes(200_000, 1)
	s3.put(t, "m/a.safetensors", data)
	s3.put(t, "m/b.safetensors", data[:1000])
	s3.put(t, "m/sub/c.bin", data[:10])
	s3.put(t, "other/x", data[:5])
	s3.put(t, "m/empty", nil)
	ctx := context.Background()
	o, err := Open(ctx, s3.url("m/a.safetensors"), WithPrefetch(100), WithCoalesceGap(0))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	// A column slice: 100 rows of 1000 bytes, 64 bytes each.
	bufs, offs := make([][]byte, 100), make([]int64, 100)
	for i := range bufs {
		bufs[i], offs[i] = make([]byte, 64), int64(1000+i*1000)
	}
	if err := o.ReadRuns(bufs, offs); err != nil {
		t.Fatal(err)
	}
	for i := range bufs {
		if !bytes.Equal(bufs[i], data[offs[i]:offs[i]+64]) {
			t.Fatalf("run %d differs", i)
		}
	}
	if st := o.Stats(); st.Requests != 101 || st.Bytes != 100+6400 {
		t.Errorf("stats %+v", st)
	}
	s, err := o.Sibling(ctx, "sub/c.bin")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(io.NewSectionReader(s, 0, s.Size())); err != nil || !bytes.Equal(b, data[:10]) {
		t.Fatalf("sibling: %v", err)
	}
	s.Close()
	for _, bad := range []string{"../other/x", "/m/b.safetensors", "s3://models/other/x", "a/../../x"} {
		if _, err := o.Sibling(ctx, bad); !errors.Is(err, remote.ErrInvalidPath) {
			t.Errorf("sibling %q: %v", bad, err)
		}
	}
	e, err := o.Sibling(ctx, "empty")
	if err != nil || e.Size() != 0 {
		t.Fatalf("empty object: %v", err)
	}
	list, err := List(ctx, s3.url("m/"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range list {
		keys = append(keys, it.Key)
	}
	if strings.Join(keys, " ") != "m/a.safetensors m/b.safetensors m/empty m/sub/c.bin" || list[0].Size != 200_000 {
		t.Fatalf("list: %v", list)
	}
	b, err := Open(ctx, list[1].URL)
	if err != nil || b.Size() != 1000 {
		t.Fatalf("open listed URL %s: %v", list[1].URL, err)
	}
	b.Close()
	if _, err := List(ctx, s3.url("m/"), WithMaxObjects(2)); err == nil {
		t.Error("list over the limit accepted")
	}
	// Replaced with other bytes of the same size: the ETag differs.
	s3.put(t, "m/a.safetensors", randomBytes(200_000, 2))
	if _, err := o.ReadAt(make([]byte, 100), 5000); !errors.Is(err, remote.ErrObjectChanged) {
		t.Fatalf("replaced object: %v", err)
	}
	if _, err := Open(ctx, s3.url("m/missing")); err == nil {
		t.Error("missing object opened")
	}
}

// TestFileBlob: a local directory through fileblob: reads, listing, a file
// rewritten or truncated after open.
func TestFileBlob(t *testing.T) {
	dir := t.TempDir()
	data := randomBytes(1<<20, 3)
	size := int64(len(data))
	p := filepath.Join(dir, "w.safetensors")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "z.bin"), data[:7], 0o644)
	ctx := context.Background()
	u := "file://" + filepath.ToSlash(p)
	o, err := Open(ctx, u, WithPrefetch(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	got := make([]byte, 30_000)
	if n, err := o.ReadAt(got, 20_000); n != 30_000 || err != nil || !bytes.Equal(got, data[20_000:50_000]) {
		t.Fatalf("ReadAt: %d %v", n, err)
	}
	if n, err := o.ReadAt(got, size-10_000); n != 10_000 || err != io.EOF || !bytes.Equal(got[:n], data[size-10_000:]) {
		t.Fatalf("ReadAt at the end: %d %v", n, err)
	}
	list, err := List(ctx, "file://"+filepath.ToSlash(dir)+"/")
	if err != nil || len(list) != 2 || list[0].Key != "w.safetensors" || list[1].Size != 7 {
		t.Fatalf("list: %v %v", list, err)
	}
	// Truncated behind our back: bytes not read yet are refused (what was
	// read is the object as opened, and still served).
	if err := os.Truncate(p, 600_000); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ReadAt(got[:100], 300_000); !errors.Is(err, remote.ErrObjectChanged) {
		t.Fatalf("truncated: %v", err)
	}
	// Rewritten with the same size: the modification time differs.
	os.WriteFile(p, randomBytes(1<<20, 4), 0o644)
	os.Chtimes(p, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if _, err := o.ReadAt(got[:100], 400_000); !errors.Is(err, remote.ErrObjectChanged) {
		t.Fatalf("rewritten: %v", err)
	}
}

func TestSplitURL(t *testing.T) {
	for in, want := range map[string][2]string{
		"s3://b/k/x.safetensors?region=eu-west-1": {"s3://b?region=eu-west-1", "k/x.safetensors"},
		"gs://b/":          {"gs://b", ""},
		"azblob://c/a%20b": {"azblob://c", "a b"},
		"file:///tmp/d/x":  {"file:///tmp/d", "x"},
		"file:///tmp/d/":   {"file:///tmp/d", ""},
		"file:///x":        {"file:///", "x"},
	} {
		b, k, err := SplitURL(in)
		if err != nil || b != want[0] || k != want[1] {
			t.Errorf("%s: %q %q %v", in, b, k, err)
		}
	}
	for _, in := range []string{"http://x/y", "s3://", "s3:///k", "file://host/x", "file:rel", "s3://u:p@b/k", "s3://b/k#f"} {
		if _, _, err := SplitURL(in); !errors.Is(err, remote.ErrInvalidURL) {
			t.Errorf("%s: %v", in, err)
		}
	}
	if _, err := Open(context.Background(), "s3://b/"); !errors.Is(err, remote.ErrInvalidURL) {
		t.Errorf("bucket URL opened as an object: %v", err)
	}
	for i, o := range []Option{WithPrefetch(0), WithConcurrency(0), WithCoalesceGap(-1), WithMaxObjects(0)} {
		if _, err := Open(context.Background(), "file:///tmp/x", o); err == nil {
			t.Errorf("option %d accepted", i)
		}
	}
}

// TestEndlessListing: a server that answers every page with no keys and a
// fresh continuation token cannot keep a listing going forever.
func TestEndlessListing(t *testing.T) {
	newFakeS3(t) // the credential environment
	var pages atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := pages.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>t%d</NextContinuationToken></ListBucketResult>`, n)
	}))
	defer srv.Close()
	_, err := List(context.Background(), "s3://b/p/?endpoint="+url.QueryEscape(srv.URL)+"&use_path_style=true&region=us-east-1")
	if err == nil || !strings.Contains(err.Error(), "does not end its listing") {
		t.Fatalf("endless listing: %v", err)
	}
	if n := pages.Load(); n > 1200 {
		t.Fatalf("%d pages requested", n)
	}
}
