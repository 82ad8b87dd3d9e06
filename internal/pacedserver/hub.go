package pacedserver

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// LFSThreshold is the size from which Hub serves a file as LFS: a redirect
// to content-addressed storage, with its SHA-256 as X-Linked-Etag.
const LFSThreshold = 10 << 10

// Hub lays files (keyed by repository path, "/model.safetensors") out as
// the Hugging Face Hub serves repository repo ("ORG/NAME") at commit (and
// at branch main): the repository API (/api/models/REPO/revision/REV, with
// sizes, git blob ids and LFS digests as ?blobs=true gives them), resolve
// URLs answering with X-Repo-Commit, small files directly with their git
// blob id as ETag, LFS files by a 302 to /cdn/SHA256 with X-Linked-Etag
// and X-Linked-Size. Every file's content is read once, to hash it.
func Hub(repo, commit string, files map[string]File) (map[string]File, error) {
	out := map[string]File{}
	var sibs []map[string]any
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f := files[name]
		path := strings.TrimPrefix(name, "/")
		sum, blob, err := digests(f)
		if err != nil {
			return nil, fmt.Errorf("pacedserver: hashing %s: %w", name, err)
		}
		sib := map[string]any{"rfilename": path, "size": f.Size, "blobId": blob}
		hdr := http.Header{"X-Repo-Commit": {commit}}
		var served File
		if f.Size >= LFSThreshold {
			pointer := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sum, f.Size)
			sib["blobId"] = gitBlob([]byte(pointer))
			sib["lfs"] = map[string]any{"sha256": sum, "size": f.Size, "pointerSize": len(pointer)}
			hdr.Set("X-Linked-Etag", `"`+sum+`"`)
			hdr.Set("X-Linked-Size", fmt.Sprint(f.Size))
			served = File{Redirect: "/cdn/" + sum, Header: hdr}
			cdn := f
			cdn.ETag = `"` + sum + `"`
			out["/cdn/"+sum] = cdn
		} else {
			served = f
			served.ETag = `"` + blob + `"`
			served.Header = hdr
		}
		sibs = append(sibs, sib)
		for _, rev := range []string{commit, "main"} {
			out["/"+repo+"/resolve/"+rev+"/"+path] = served
		}
	}
	api, err := json.Marshal(map[string]any{"id": repo, "sha": commit, "siblings": sibs})
	if err != nil {
		return nil, err
	}
	for _, rev := range []string{commit, "main"} {
		out["/api/models/"+repo+"/revision/"+rev] = File{Content: bytes.NewReader(api), Size: int64(len(api)), Header: http.Header{"Content-Type": {"application/json"}}}
	}
	return out, nil
}

func digests(f File) (sum, blob string, err error) {
	h, g := sha256.New(), sha1.New()
	fmt.Fprintf(g, "blob %d\x00", f.Size)
	if _, err := io.Copy(io.MultiWriter(h, g), io.NewSectionReader(f.Content, 0, f.Size)); err != nil {
		return "", "", err
	}
	return hex.EncodeToString(h.Sum(nil)), hex.EncodeToString(g.Sum(nil)), nil
}

func gitBlob(b []byte) string {
	g := sha1.New()
	fmt.Fprintf(g, "blob %d\x00", len(b))
	g.Write(b)
	return hex.EncodeToString(g.Sum(nil))
}
