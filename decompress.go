package safetensors

import (
	"io"
	"sync"
)

// A Decompressor presents a compressed container as the original
// safetensors file it holds, with random access.
type Decompressor struct {
	// Name of the container format, for messages ("zstd", "grouped").
	Name string
	// Detect reports whether r (size bytes) is such a container; only I/O
	// failures are errors.
	Detect func(r io.ReaderAt, size int64) (bool, error)
	// Open returns a reader over the original bytes and their size.
	Open func(r io.ReaderAt, size int64, name string) (io.ReaderAt, int64, error)
}

var (
	decompressorsMu sync.RWMutex
	decompressors   []Decompressor
)

// RegisterDecompressor makes [Open] and [NewReader] read files in d's
// container transparently: the header and any tensor or slice come from
// the original file, decompressing only what they need. The package
// github.com/gosafetensors/safetensors/compressed registers seekable zstd,
// LZ4 and byte-grouped containers when it is imported (import _ is
// enough), as image/png registers itself with image.
func RegisterDecompressor(d Decompressor) {
	decompressorsMu.Lock()
	defer decompressorsMu.Unlock()
	decompressors = append(decompressors, d)
}

// WithoutDecompression reads a compressed container as it is stored (a
// grouped container is itself a valid safetensors file of chunks).
func WithoutDecompression() Option {
	return func(o *options) error { o.raw = true; return nil }
}

// Container returns the registered decompressor whose container r (size
// bytes) holds, or nil when none recognises it; only I/O failures are
// errors. [Open] and [NewReader] use it to read compressed files
// transparently; openers that detect formats themselves (package source)
// ask it too, so that there is one way a container is recognised.
func Container(r io.ReaderAt, size int64) (*Decompressor, error) {
	decompressorsMu.RLock()
	ds := decompressors
	decompressorsMu.RUnlock()
	for i := range ds {
		ok, err := ds[i].Detect(r, size)
		if err != nil {
			return nil, err
		}
		if ok {
			return &ds[i], nil
		}
	}
	return nil, nil
}

// decompressed returns the original file inside r when a registered
// decompressor recognises r, else r itself.
func decompressed(r io.ReaderAt, size int64, o options) (io.ReaderAt, int64, bool, error) {
	if o.raw {
		return r, size, false, nil
	}
	d, err := Container(r, size)
	if err != nil || d == nil {
		return r, size, false, err
	}
	ra, n, err := d.Open(r, size, o.name)
	return ra, n, err == nil, err
}
