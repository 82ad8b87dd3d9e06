package main

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/source"
)

// modelExts are the names worth checking in a directory or bucket prefix;
// other files are checked when their first bytes look like a checkpoint, a
// pickle, a tar archive or a safetensors file.
var modelExts = []string{".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".safetensors", ".zst", ".lz4"}

// expandTargets turns one command-line location into the locations to check:
// a file or object as it is (whatever its name), a local directory walked
// recursively (symbolic links not followed), a bucket prefix (ending in
// '/') listed. want, if not nil, picks the walked and listed names to
// check; by default every object of a bucket prefix is checked, and in a
// directory the files with a model's extension or a model's content.
func expandTargets(ctx context.Context, loc string, want func(name string) bool) ([]string, error) {
	if isBucketPrefix(loc) {
		objs, err := blobstore.List(ctx, loc)
		if err != nil {
			return nil, &source.IOError{Location: loc, Op: "list", Err: err}
		}
		var out []string
		for _, o := range objs {
			if want == nil || want(o.URL) {
				out = append(out, o.URL)
			}
		}
		return out, nil
	}
	if source.KindOf(loc) != source.LocalPath {
		return []string{loc}, nil
	}
	st, err := os.Stat(loc)
	if err != nil || !st.IsDir() {
		return []string{loc}, nil // opening it reports the error
	}
	var files []string
	err = filepath.WalkDir(loc, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return &source.IOError{Location: path, Op: "list", Err: err}
		}
		if d.IsDir() {
			return nil
		}
		// A symbolic link, FIFO or device named like a model is checked
		// (opening it follows the link or reports what it is), never
		// skipped in silence; only regular files are sniffed for content
		// (opening a FIFO would block).
		ok := false
		switch {
		case want != nil:
			ok = want(path)
		case d.Type().IsRegular():
			ok = slices.Contains(modelExts, strings.ToLower(filepath.Ext(path))) || looksLikeModel(path)
		default:
			ok = namedLikeModel(path)
		}
		if ok {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// namedLikeModel reports whether a name alone says it is a model file: a
// model extension or a sharded model's index.
func namedLikeModel(path string) bool {
	lower := strings.ToLower(path)
	return slices.Contains(modelExts, filepath.Ext(lower)) || strings.HasSuffix(lower, ".safetensors.index.json")
}

// looksLikeModel reports whether a local file's content is one the
// opener recognises (a checkpoint, a pickle with a PROTO opcode, a tar, a
// safetensors file, a compressed container). Protocol 0 and 1 pickles have
// no magic: they are found by name. A file that cannot be read is kept, so
// that checking it reports the error.
func looksLikeModel(path string) bool {
	format, ok := detectLocal(path)
	return !ok || (format != source.Unknown && format != source.Index)
}

// detectLocal detects a local file's format from its first bytes, as the
// opener does; ok is false when the file cannot be read.
func detectLocal(path string) (format source.Format, ok bool) {
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return source.Unknown, false // never open a FIFO or device to look
	}
	f, err := os.Open(path)
	if err != nil {
		return source.Unknown, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return source.Unknown, false
	}
	b := make([]byte, source.PrefixSize)
	n, _ := io.ReadFull(f, b)
	format, _ = source.Detect(b[:n], st.Size())
	return format, true
}

// isBucketPrefix reports whether loc names a bucket prefix: a bucket URL
// whose path ends in '/' (the query, if any, aside).
func isBucketPrefix(loc string) bool {
	if source.KindOf(loc) != source.Bucket {
		return false
	}
	p, _, _ := strings.Cut(loc, "?")
	return strings.HasSuffix(p, "/")
}
