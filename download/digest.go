package download

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
)

// Digest is what a file's bytes must hash to.
type Digest struct {
	// Kind is "sha256" (an LFS file's SHA-256), "git-blob" (the SHA-1 of
	// "blob SIZE\x00" and the content: the git blob id of a regular file
	// of a repository) or "" (nothing to check against: HTTP and bucket
	// objects, pinned by their validators only).
	Kind string
	Hex  string // lowercase hex
}

func (d Digest) String() string {
	if d.Kind == "" {
		return "none"
	}
	return d.Kind + ":" + d.Hex
}

// newHash returns the hash that computes d for content of size bytes, or
// nil when there is nothing to check.
func (d Digest) newHash(size int64) hash.Hash {
	switch d.Kind {
	case "sha256":
		return sha256.New()
	case "git-blob":
		h := sha1.New()
		h.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
		return h
	}
	return nil
}

// DigestError reports bytes that do not hash to what the listing says:
// the download of File is refused and its partial removed.
type DigestError struct {
	File     string
	Expected Digest
	Actual   string // hex
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("%s: %s mismatch: expected %s, got %s (the partial download was removed)", e.File, e.Expected.Kind, e.Expected.Hex, e.Actual)
}

// Is makes errors.Is(err, ErrDigest) match.
func (e *DigestError) Is(target error) bool { return target == ErrDigest }

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// fileDigest hashes a local file with d's hash, reading it through buf.
func fileDigest(path string, d Digest, buf []byte) (string, int64, error) {
	f, err := openRead(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	h := d.newHash(st.Size())
	if h == nil {
		return "", st.Size(), nil
	}
	var off int64
	for off < st.Size() {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), st.Size()-off)], off)
		h.Write(buf[:n])
		off += int64(n)
		if err != nil && off < st.Size() {
			return "", 0, fmt.Errorf("%s: %w", path, err)
		}
	}
	return hexSum(h), st.Size(), nil
}
