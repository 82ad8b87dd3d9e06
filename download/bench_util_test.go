package download

import (
	"fmt"
	"io"
	"net/http"
)

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func httpRange(url string, off, end int64) (*http.Request, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, end-1))
	return req, nil
}

func copyBody(w io.Writer, resp *http.Response) (int64, error) {
	if resp.StatusCode != http.StatusPartialContent {
		return 0, fmt.Errorf("%s: %s", resp.Request.URL, resp.Status)
	}
	return io.Copy(w, resp.Body)
}

// withoutHashing turns the digest checks off: benchmarks only, to measure
// what hashing costs.
func withoutHashing() Option { return func(c *config) error { c.noHash = true; return nil } }

// withoutSync turns fdatasync of the data off: benchmarks only, to tell
// the disk's share of a download's time from the network's.
func withoutSync() Option { return func(c *config) error { c.noSync = true; return nil } }

// withEarlyDirect writes the bytes that arrive early with O_DIRECT too
// and reads them back from the disk (the engine before they went through
// the page cache): benchmarks only, to compare the two in one run.
func withEarlyDirect() Option { return func(c *config) error { c.earlyDirect = true; return nil } }
