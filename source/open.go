package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/torch"
)

// Option configures Open and OpenModel.
type Option func(*config) error

type config struct {
	remote     []remote.Option
	blob       []blobstore.Option
	subfolder  string
	hub        *remote.Hub
	torchKey   string
	torch      []torch.Option
	hubCache   *string // nil: the default cache; "": none
	maxHeader  int64   // 0: safetensors.DefaultMaxHeaderSize
	headerHint string  // ends the message of a header past maxHeader
	expand     *expandLimit
	onDecode   func(n int64)
}

func buildConfig(opts []Option) (config, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("source: %w: nil Option", ErrOption)
		}
		if err := o(&c); err != nil {
			return c, fmt.Errorf("%w (%w)", err, ErrOption)
		}
	}
	return c, nil
}

// WithRemote passes options to HTTP and Hub readers (timeouts, retries,
// concurrency, token). The Hub's own (remote.WithEndpoint,
// remote.WithOffline) configure the Hub hf:// locations are read through
// (unless [WithHub] gives one); an http(s) location refuses them
// (ErrOption).
func WithRemote(opts ...remote.Option) Option {
	return func(c *config) error { c.remote = append(c.remote, opts...); return nil }
}

// ErrHeaderLimit is wrapped by the error of a safetensors header (plain,
// compressed, or an index's shard) longer than [WithMaxHeaderSize] allows:
// the file was not judged, a service's bound on what one input may cost.
var ErrHeaderLimit = errors.New("source: safetensors header larger than the limit")

// WithMaxHeaderSize bounds the safetensors header a model may have, in
// bytes (decompressed, for a compressed file), checked from the 8-byte
// length before the header is read: parsing a header costs memory in
// proportion to it (about 10 times its length), whatever the file's size on
// the wire. The default is safetensors.DefaultMaxHeaderSize. hint, if not
// empty, ends the error's message (e.g. the flag that sets the limit).
func WithMaxHeaderSize(n int64, hint string) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("source: WithMaxHeaderSize(%d): want at least 1", n)
		}
		c.maxHeader, c.headerHint = n, hint
		return nil
	}
}

// ErrExpandedLimit is wrapped by the error of a compressed file whose
// original is larger than [WithMaxExpanded] allows: the file was not
// judged, a service's bound on the work one input may cost. The error
// also wraps compressed.ErrMaxSize.
var ErrExpandedLimit = errors.New("source: compressed file decompresses to more than the limit")

// ExpansionSlack is what any compressed file may decompress to beyond
// [WithMaxExpanded]'s ratio: small files (and their headers) compress far
// beyond any ratio weights reach.
const ExpansionSlack = 64 << 20

type expandLimit struct {
	max, ratio int64
	hint       string
}

// WithMaxExpanded bounds what a compressed file may decompress to: at most
// n bytes and, unless ratio is 0, at most ratio times its compressed size
// plus [ExpansionSlack]. The original's size is in the container's seek
// table or index, so a file past the bound is refused when it is opened,
// before any of it is decompressed (compressed.WithMaxSize), with an error
// wrapping [ErrExpandedLimit]; one within it decompresses (a whole-container
// check, compressed.ReaderAt.Verify, included) no more than the bound. hint,
// if not empty, ends the error's message (e.g. the flag that sets the
// limit). Weights compress 1.3 to 2 times; a few KiB of zeros may claim a GiB.
func WithMaxExpanded(n, ratio int64, hint string) Option {
	return func(c *config) error {
		if n < 1 || ratio < 0 {
			return fmt.Errorf("source: WithMaxExpanded(%d, %d): want a maximum of at least 1 and a ratio of 0 or more", n, ratio)
		}
		c.expand = &expandLimit{max: n, ratio: ratio, hint: hint}
		return nil
	}
}

// WithDecodeCounter calls f with the decompressed size of every frame or
// chunk of a compressed file decoded (compressed.WithDecodeCounter): what
// reading and checking compressed inputs cost. f may be called from several
// goroutines at once.
func WithDecodeCounter(f func(n int64)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("source: WithDecodeCounter(nil)")
		}
		c.onDecode = f
		return nil
	}
}

// bound is the largest original a compressed file of size bytes may have.
func (e *expandLimit) bound(size int64) int64 {
	if e.ratio == 0 || size > (math.MaxInt64-ExpansionSlack)/e.ratio {
		return e.max
	}
	return min(e.max, size*e.ratio+ExpansionSlack)
}

// expandedLimit marks a compressed original past the caller's bound.
func (c *config) expandedLimit(err error, size int64) error {
	if c.expand == nil || !errors.Is(err, compressed.ErrMaxSize) {
		return err
	}
	e := c.expand
	var why []string
	if e.ratio > 0 {
		why = append(why, fmt.Sprintf("the least of %d bytes and %d times its %d compressed bytes plus %d MiB", e.max, e.ratio, size, ExpansionSlack>>20))
	}
	if e.hint != "" {
		why = append(why, e.hint)
	}
	if len(why) == 0 {
		return fmt.Errorf("%w: %w", ErrExpandedLimit, err)
	}
	return fmt.Errorf("%w: %w (%s)", ErrExpandedLimit, err, strings.Join(why, "; "))
}

// headerOptions are the safetensors reader's options for c.
func (c *config) headerOptions(name string) []safetensors.Option {
	opts := []safetensors.Option{safetensors.WithName(name), safetensors.WithoutDecompression()}
	if c.maxHeader > 0 {
		opts = append(opts, safetensors.WithMaxHeaderSize(c.maxHeader))
	}
	return opts
}

// headerLimit marks a header past the caller's limit.
func (c *config) headerLimit(err error) error {
	if c.maxHeader > 0 && errors.Is(err, safetensors.ErrHeaderTooLarge) {
		if c.headerHint != "" {
			return fmt.Errorf("%w (%d bytes; %s): %w", ErrHeaderLimit, c.maxHeader, c.headerHint, err)
		}
		return fmt.Errorf("%w (%d bytes): %w", ErrHeaderLimit, c.maxHeader, err)
	}
	return err
}

// WithBlob passes options to object-storage readers.
func WithBlob(opts ...blobstore.Option) Option {
	return func(c *config) error { c.blob = append(c.blob, opts...); return nil }
}

// WithHub reads hf:// locations through h (shared traffic counters and
// concurrency bound) instead of a Hub made from the environment.
func WithHub(h *remote.Hub) Option {
	return func(c *config) error {
		if h == nil {
			return errors.New("source: WithHub(nil)")
		}
		c.hub = h
		return nil
	}
}

// WithSubfolder looks for the model of a Hub repository in a subfolder.
func WithSubfolder(dir string) Option {
	return func(c *config) error {
		dir = strings.Trim(dir, "/")
		if dir != "" {
			if err := remote.ValidRepoPath(dir); err != nil {
				return fmt.Errorf("source: subfolder: %w", err)
			}
		}
		c.subfolder = dir
		return nil
	}
}

// WithCheckpointKey reads a PyTorch checkpoint's entry key (e.g.
// "state_dict", "model") as the model, as convert --key does.
func WithCheckpointKey(key string) Option {
	return func(c *config) error { c.torchKey = key; return nil }
}

// WithTorch passes options to torch.NewReader for the PyTorch checkpoints
// opened (torch.WithExpandedViews, torch.WithLimits); an invalid one is an
// error wrapping ErrOption.
func WithTorch(opts ...torch.Option) Option {
	return func(c *config) error {
		for _, o := range opts {
			if o == nil {
				return errors.New("source: WithTorch: nil torch.Option")
			}
		}
		c.torch = append(c.torch, opts...)
		return nil
	}
}

// Kind of location, from its spelling.
type Kind int

// Location kinds.
const (
	LocalPath Kind = iota
	HTTP
	Hub
	Bucket
)

// KindOf tells what kind of location s spells.
func KindOf(s string) Kind {
	switch {
	case strings.HasPrefix(s, "hf://"):
		return Hub
	case strings.HasPrefix(s, "http://"), strings.HasPrefix(s, "https://"):
		if remote.IsHubURL(s) {
			return Hub
		}
		return HTTP
	case blobstore.IsURL(s):
		return Bucket
	}
	return LocalPath
}

// IsPrefix reports whether loc names a folder of objects rather than one:
// a local directory, or a bucket URL ending in '/'.
func IsPrefix(loc string) bool {
	switch KindOf(loc) {
	case LocalPath:
		st, err := os.Stat(loc)
		return err == nil && st.IsDir()
	case Bucket:
		return strings.HasSuffix(loc, "/")
	}
	return false
}

// Open opens one file or object: a local path, an http(s) URL, a Hub
// file (hf://ORG/REPO[@REV]/PATH or a …/resolve/REV/FILE URL; a bare
// hf://ORG/REPO opens the repository's model file, its index when it has
// one), or a bucket object (s3://, gs://, azblob://, file://, mem://). Its
// format is detected once from its content. A local directory opens as an
// Object of Format Directory that holds no bytes. Failures to reach the
// bytes are *IOError.
func Open(ctx context.Context, loc string, opts ...Option) (*Object, error) {
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	switch KindOf(loc) {
	case Hub:
		return openHub(ctx, loc, &c)
	case HTTP:
		return openHTTP(ctx, loc, &c)
	case Bucket:
		return openBucket(ctx, loc, &c)
	}
	return openLocal(loc)
}

func openHTTP(ctx context.Context, loc string, c *config) (*Object, error) {
	f, err := remote.Open(ctx, loc, c.remote...)
	if err != nil {
		return nil, &IOError{Location: loc, Op: "open", Err: err}
	}
	o, err := newObject(f.Name(), f, f.Size(), f)
	if err != nil {
		f.Close()
		return nil, err
	}
	base, _ := url.Parse(loc)
	o.sibling = func(ctx context.Context, rel string) (*Object, error) {
		if err := remote.ValidRepoPath(rel); err != nil {
			return nil, err
		}
		u := base.ResolveReference(&url.URL{Path: rel})
		return openHTTP(ctx, u.String(), c)
	}
	return o, nil
}

// hubEnv are the variables a Hub made from the environment reads.
var hubEnv = []string{"HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_OFFLINE"}

// defaultHubs are the Hubs made from the environment, one per distinct
// environment: every location opened under one shares its concurrency
// bound and traffic counters, and a changed environment is seen.
var defaultHubs sync.Map // env snapshot -> *remote.Hub

func hubFor(c *config) (*remote.Hub, error) {
	if c.hub != nil {
		return c.hub, nil
	}
	if len(c.remote) > 0 {
		return remote.NewHub(c.remote...)
	}
	var key strings.Builder
	for _, k := range hubEnv {
		key.WriteString(os.Getenv(k))
		key.WriteByte(0)
	}
	if h, ok := defaultHubs.Load(key.String()); ok {
		return h.(*remote.Hub), nil
	}
	h, err := remote.NewHub()
	if err != nil {
		return nil, err
	}
	actual, _ := defaultHubs.LoadOrStore(key.String(), h)
	return actual.(*remote.Hub), nil
}

func openHub(ctx context.Context, loc string, c *config) (*Object, error) {
	ref, err := remote.ParseHubURL(loc)
	if err != nil {
		return nil, &IOError{Location: loc, Op: "open", Err: err}
	}
	if p := cachedHub(ref, c); p != "" { // hubcache.go
		return openLocal(p)
	}
	h, err := hubFor(c)
	if err != nil {
		return nil, &IOError{Location: loc, Op: "open", Err: err}
	}
	repo, err := h.Repo(ref)
	if err != nil {
		return nil, &IOError{Location: loc, Op: "open", Err: err}
	}
	file := ref.Path
	if file == "" || isFolder(file) {
		if file, err = pickHubModel(ctx, repo, path.Join(file, c.subfolder)); err != nil {
			return nil, err
		}
	}
	f, err := repo.Open(ctx, file)
	if err != nil {
		return nil, &IOError{Location: loc, Op: "open", Err: err}
	}
	o, err := newObject(f.Name(), f, f.Size(), f)
	if err != nil {
		f.Close()
		return nil, err
	}
	dir := path.Dir(file)
	o.sibling = func(ctx context.Context, rel string) (*Object, error) {
		if err := remote.ValidRepoPath(rel); err != nil {
			return nil, err
		}
		sf, err := repo.Open(ctx, path.Join(dir, rel))
		if err != nil {
			return nil, &IOError{Location: rel, Op: "open", Err: err}
		}
		so, err := newObject(sf.Name(), sf, sf.Size(), sf)
		if err != nil {
			sf.Close()
		}
		return so, err
	}
	return o, nil
}

// isFolder reports whether a path in a Hub repository names a folder: its
// last segment has no extension (model files always have one).
func isFolder(p string) bool { return !strings.Contains(path.Base(p), ".") }

// pickHubModel lists the repository (one request to the Hub's API, which
// pins the commit) and chooses the model file of folder ("" for the root)
// with [PickModel].
func pickHubModel(ctx context.Context, repo *remote.Repo, folder string) (string, error) {
	files, err := repo.Files(ctx)
	if err != nil {
		return "", &IOError{Location: repo.Ref().String(), Op: "list", Err: err}
	}
	prefix := ""
	if folder != "" && folder != "." {
		prefix = folder + "/"
	}
	var names []string
	for _, f := range files {
		if rest, ok := strings.CutPrefix(f, prefix); ok && !strings.Contains(rest, "/") {
			names = append(names, rest)
		}
	}
	where := repo.Ref().String()
	if prefix != "" {
		where += " (folder " + folder + ")"
	}
	name, err := PickModel(where, names)
	if err != nil {
		return "", err
	}
	return prefix + name, nil
}

func openBucket(ctx context.Context, loc string, c *config) (*Object, error) {
	b, err := blobstore.Open(ctx, loc, c.blob...)
	if err != nil {
		return nil, &IOError{Location: loc, Op: "open", Err: err}
	}
	return bucketObject(b)
}

func bucketObject(b *blobstore.Object) (*Object, error) {
	o, err := newObject(b.Name(), b, b.Size(), b)
	if err != nil {
		b.Close()
		return nil, err
	}
	o.sibling = func(ctx context.Context, rel string) (*Object, error) {
		sb, err := b.Sibling(ctx, rel)
		if err != nil {
			return nil, &IOError{Location: rel, Op: "open", Err: err}
		}
		return bucketObject(sb)
	}
	return o, nil
}
