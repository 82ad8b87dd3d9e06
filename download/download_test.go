package download

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gosafetensors/safetensors/hfcache"
	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/sharded"
)

// TestHubCacheLayout: a repository downloaded into the cache as
// huggingface_hub lays it out: blobs named by sha256 (LFS) or git blob id,
// snapshot entries as relative links into blobs, refs/main holding the
// commit, the commit's file list, CACHEDIR.TAG; the model opens from the
// snapshot with every byte as served.
func TestHubCacheLayout(t *testing.T) {
	h := newHubFixture(t, smallSpec(), pacedserver.Config{})
	cache := t.TempDir()
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithCacheDir(cache), WithConcurrency(4), WithChunkSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(cache, "models--org--model")
	snap := filepath.Join(repo, "snapshots", testCommit)
	if res.Commit != testCommit || res.Dir != snap {
		t.Fatalf("result commit %s dir %s", res.Commit, res.Dir)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err != nil || string(b) != testCommit {
		t.Fatalf("refs/main: %q %v", b, err)
	}
	for _, p := range h.paths() {
		data := h.content(t, p)
		rel := strings.TrimPrefix(p, "/")
		link := filepath.Join(snap, filepath.FromSlash(rel))
		want := gitBlob(data)
		if len(data) >= pacedserver.LFSThreshold {
			s := sha256.Sum256(data)
			want = hex.EncodeToString(s[:])
		}
		depth := strings.Count(rel, "/")
		if got := readLink(t, link); got != strings.Repeat("../", depth+2)+"blobs/"+want {
			t.Errorf("%s -> %s, want a relative link to blobs/%s", rel, got, want)
		}
		got, err := os.ReadFile(link)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes read through the link (%v), want the %d served", rel, len(got), err, len(data))
		}
	}
	if files := ls(t, filepath.Join(repo, "blobs")); len(files) != len(h.files) {
		t.Errorf("blobs/ holds %v: partial files left?", files)
	}
	c := &hfcache.Cache{Root: cache}
	r, _ := c.Repo("model", testRepo)
	tree, err := r.ReadTree(testCommit)
	if err != nil || len(tree) != len(h.files) || tree["config.json"].BlobID == "" || tree["model-00001-of-00003.safetensors"].LFSSHA256 == "" {
		t.Fatalf("tree: %v %v", tree, err)
	}
	if _, err := os.Stat(filepath.Join(cache, "CACHEDIR.TAG")); err != nil {
		t.Fatal(err)
	}
	m, err := sharded.Open(context.Background(), filepath.Join(snap, sharded.IndexName))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	// Again: everything is present, nothing moves.
	before := h.srv.Stats().Content
	res, err = Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 0 || !slices.ContainsFunc(res.Files, func(f File) bool { return f.Present }) {
		t.Fatalf("second download moved %d bytes", res.Moved)
	}
	if n := h.srv.Stats().Content - before; n > 2000 {
		t.Fatalf("second download read %d content bytes (the listing only)", n)
	}
}

func gitBlob(b []byte) string {
	h := Digest{Kind: "git-blob"}.newHash(int64(len(b)))
	h.Write(b)
	return hexSum(h)
}

// TestDigestMismatch: a server that flips one byte of one shard: the
// download fails naming the file and both digests, the partial is removed,
// and nothing is in snapshots/ (nor refs/).
func TestDigestMismatch(t *testing.T) {
	spec := smallSpec()
	files, err := spec.Model()
	if err != nil {
		t.Fatal(err)
	}
	shard := "/model-00002-of-00003.safetensors"
	h := startHub(t, files, pacedserver.Config{}, flipCDN(shard, 70_000))
	cache := t.TempDir()
	_, err = Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithCacheDir(cache), WithConcurrency(4), WithChunkSize(64<<10))
	var de *DigestError
	if !errors.As(err, &de) || !errors.Is(err, ErrDigest) {
		t.Fatalf("err %v, want a DigestError", err)
	}
	data := h.content(t, shard)
	sum := sha256.Sum256(data)
	if !strings.Contains(err.Error(), "model-00002-of-00003.safetensors") || de.Expected.Hex != hex.EncodeToString(sum[:]) || de.Actual == de.Expected.Hex || len(de.Actual) != 64 {
		t.Fatalf("error %q: want the file named, expected %x", err, sum)
	}
	repo := filepath.Join(cache, "models--org--model")
	for _, dir := range []string{"snapshots", "refs"} {
		if files := ls(t, filepath.Join(repo, dir)); len(files) != 0 {
			t.Errorf("%s/ holds %v", dir, files)
		}
	}
	for _, f := range ls(t, filepath.Join(repo, "blobs")) {
		if strings.HasPrefix(f, hex.EncodeToString(sum[:])) {
			t.Errorf("blobs/%s left", f)
		}
	}
}

// TestIncludeExclude: huggingface_hub's pattern rules select the files.
func TestIncludeExclude(t *testing.T) {
	h := newHubFixture(t, smallSpec(), pacedserver.Config{})
	cache := t.TempDir()
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 2)), WithCacheDir(cache),
		WithInclude("*.json", "sub/"), WithExclude("*index*"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range res.Files {
		got = append(got, f.Path)
	}
	if want := []string{"config.json", "sub/README.md"}; !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	if _, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 2)), WithCacheDir(cache), WithInclude("*.gguf")); !errors.Is(err, ErrNoFiles) {
		t.Fatalf("no match: %v", err)
	}
	res, err = Download(context.Background(), "hf://"+testRepo+"/sub", WithHub(h.hub(t, 2)), WithCacheDir(cache))
	if err != nil || len(res.Files) != 1 || res.Files[0].Path != "sub/README.md" {
		t.Fatalf("a folder of the repository: %+v %v", res, err)
	}
}

// TestResumeAfterCancel: a download stopped half way (its context
// cancelled) continues from what is on disk: the second run moves the
// bytes the first did not, plus at most one chunk per connection.
func TestResumeAfterCancel(t *testing.T) {
	const conc, chunk = 4, 64 << 10
	spec := pacedserver.ModelSpec{Hidden: 256, Intermediate: 512, Layers: 4, Vocab: 1024, Shards: 3}
	h := newHubFixture(t, spec, pacedserver.Config{Rate: 4 << 20})
	var total int64
	for _, p := range h.paths() {
		if h.files[p].Size >= pacedserver.LFSThreshold {
			total += h.files[p].Size
		}
	}
	cache := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for h.dataRead() < total/2 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err := Download(ctx, "hf://"+testRepo, WithHub(h.hub(t, conc)), WithCacheDir(cache), WithConcurrency(conc), WithChunkSize(chunk))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it cancelled", err)
	}
	first := h.dataRead()
	if first >= total {
		t.Fatalf("the first run read everything (%d bytes) before it was cancelled", first)
	}
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, conc)), WithCacheDir(cache), WithConcurrency(conc), WithChunkSize(chunk))
	if err != nil {
		t.Fatal(err)
	}
	second := h.dataRead() - first
	if limit := total - first + conc*chunk; second > limit {
		t.Fatalf("second run moved %d bytes; the first moved %d of %d: want at most %d", second, first, total, limit)
	}
	if res.Resumed == 0 {
		t.Fatal("nothing resumed")
	}
	t.Logf("first run %d of %d bytes, second %d (resumed %d)", first, total, second, res.Resumed)
	checkSnapshot(t, h, cache)
}

// checkSnapshot compares every file of the snapshot with what is served.
func checkSnapshot(t *testing.T, h *hubFixture, cache string) {
	t.Helper()
	snap := filepath.Join(cache, "models--org--model", "snapshots", testCommit)
	for _, p := range h.paths() {
		got, err := os.ReadFile(filepath.Join(snap, filepath.FromSlash(strings.TrimPrefix(p, "/"))))
		if err != nil || !bytes.Equal(got, h.content(t, p)) {
			t.Fatalf("%s differs from what was served (%v)", p, err)
		}
	}
}

// TestHashAsArrived: bytes that arrive in order are hashed from the
// buffer they arrived in, not read back from disk: with one connection,
// nothing is read back; a flipped byte is still caught that way.
func TestHashAsArrived(t *testing.T) {
	spec := smallSpec()
	files, err := spec.Model()
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, files, pacedserver.Config{})
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 1)), WithCacheDir(t.TempDir()), WithConcurrency(1), WithChunkSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	if res.readBack != 0 || res.Moved == 0 {
		t.Fatalf("one connection: %d bytes moved, %d read back to hash, want none", res.Moved, res.readBack)
	}
	res, err = Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithCacheDir(t.TempDir()), WithConcurrency(4), WithChunkSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("4 connections: %d bytes moved, %d read back to hash, %d written with O_DIRECT", res.Moved, res.readBack, res.direct)
	if directHere(t) && res.direct == 0 {
		t.Fatal("no byte written with O_DIRECT where the file system has it")
	}
	if res.readBack >= res.Moved {
		t.Fatalf("4 connections: %d of %d bytes read back to hash", res.readBack, res.Moved)
	}
	shard := "/model-00002-of-00003.safetensors"
	h = startHub(t, files, pacedserver.Config{}, flipCDN(shard, 70_000))
	_, err = Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 1)), WithCacheDir(t.TempDir()), WithConcurrency(1), WithChunkSize(64<<10))
	if !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), shard[1:]) {
		t.Fatalf("one connection, a flipped byte: %v", err)
	}
}

// directHere says whether the test's temporary directory takes O_DIRECT.
func directHere(t *testing.T) bool {
	p := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(p, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	f := openDirect(p)
	if f == nil {
		return false
	}
	f.Close()
	return true
}

// TestReadBackDirect: bytes written with O_DIRECT, and bytes written
// through the page cache beside them, are read back for hashing exactly,
// for ranges that start and end anywhere.
func TestReadBackDirect(t *testing.T) {
	size := int64(5*directAlign + 123)
	tg, data := directPartial(t, size)
	e := &engine{}
	buf := alignedBuf(2 * directAlign)
	copy(buf, data[:2*directAlign])
	if err := tg.writeAt(e, buf, 0); err != nil { // direct
		t.Fatal(err)
	}
	if e.direct.Load() != 2*directAlign {
		t.Fatalf("%d bytes written with O_DIRECT, want %d", e.direct.Load(), 2*directAlign)
	}
	if err := tg.writeAt(e, data[2*directAlign:3*directAlign+5], 2*directAlign); err != nil { // unaligned length: buffered
		t.Fatal(err)
	}
	if err := tg.writeAt(e, data[3*directAlign+5:], 3*directAlign+5); err != nil { // unaligned offset: buffered
		t.Fatal(err)
	}
	hb := alignedBuf(2 * directAlign)
	for _, r := range [][2]int64{{0, size}, {1, size - 1}, {directAlign - 1, directAlign + 1}, {3*directAlign + 4, size}, {100, 3*directAlign + 7}, {size - 1, size}} {
		tg.h = sha256.New()
		if err := tg.readBack(context.Background(), hb, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(data[r[0]:r[1]])
		if got := tg.h.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("bytes %d-%d read back wrong", r[0], r[1])
		}
	}
}

// TestEarlyBytesCached: bytes that arrive before their predecessors are
// written through the page cache, from which the hasher reads them back
// (a copy, not a wait on the disk), while the next bytes to hash go with
// O_DIRECT; read back, both hash to the file's digest.
func TestEarlyBytesCached(t *testing.T) {
	size := int64(4 * directAlign)
	tg, data := directPartial(t, size)
	tg.h = sha256.New()
	e := &engine{}
	early := alignedBuf(2 * directAlign)
	copy(early, data[2*directAlign:])
	if err := tg.writeAt(e, early, 2*directAlign); err != nil {
		t.Fatal(err)
	}
	if n := e.direct.Load(); n != 0 || tg.cached.reach(2*directAlign) != size {
		t.Fatalf("early bytes: %d written with O_DIRECT, cached %v; want none, [%d, %d)", n, tg.cached.s, 2*directAlign, size)
	}
	next := alignedBuf(2 * directAlign)
	copy(next, data[:2*directAlign])
	if err := tg.writeAt(e, next, 0); err != nil {
		t.Fatal(err)
	}
	if n := e.direct.Load(); n != 2*directAlign {
		t.Fatalf("the next bytes to hash: %d written with O_DIRECT, want %d", n, 2*directAlign)
	}
	tg.h.Write(next) // as wrote does
	tg.hashed = 2 * directAlign
	if err := tg.readBack(context.Background(), alignedBuf(directAlign), tg.hashed, size); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	if got := tg.h.Sum(nil); !bytes.Equal(got, want[:]) {
		t.Fatal("early bytes read back wrong")
	}
}

// directPartial returns a target whose preallocated partial file of
// size bytes is open with and without O_DIRECT, and the bytes to write
// to it; it skips the test where the temporary directory has no
// O_DIRECT.
func directPartial(t *testing.T, size int64) (*target, []byte) {
	if !directHere(t) {
		t.Skip("no O_DIRECT in the temporary directory")
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	part := filepath.Join(t.TempDir(), "f.partial")
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := preallocate(f, size); err != nil {
		t.Fatal(err)
	}
	tg := &target{Name: "f", Part: part, Size: size, f: f, direct: openDirect(part)}
	t.Cleanup(tg.closeDirect)
	return tg, data
}

// alignedBuf returns n bytes starting at a multiple of directAlign.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	off := int(uintptr(unsafe.Pointer(&b[0])) % directAlign)
	if off != 0 {
		off = directAlign - off
	}
	return b[off : off+n]
}
