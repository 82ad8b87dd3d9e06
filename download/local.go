package download

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
)

// doneMarker is where a download into a local directory records which
// object a finished HTTP or bucket file is (its URL and validators), so
// that the next run knows it is up to date without a digest.
func doneMarker(dir, rel string) string {
	return filepath.Join(dir, ".cache", "safetensors", "download", filepath.FromSlash(rel)+".done")
}

// localDone reports a file a previous run finished from the same object.
func localDone(dir, rel, object, dest string, size int64) bool {
	b, err := os.ReadFile(doneMarker(dir, rel))
	if err != nil || !bytes.Equal(b, []byte(object)) {
		return false
	}
	m, err := os.Stat(doneMarker(dir, rel))
	st, err2 := os.Stat(dest)
	return err == nil && err2 == nil && st.Mode().IsRegular() && st.Size() == size && !st.ModTime().After(m.ModTime())
}

// runLocal runs the targets of an HTTP or bucket download and marks each
// finished one.
func runLocal(ctx context.Context, cfg *config, res *Result, targets []*target) error {
	e := newEngine(cfg)
	err := e.run(ctx, targets)
	res.Moved, res.Resumed, res.readBack, res.direct = e.moved.Load(), resumed(targets), e.readBack.Load(), e.direct.Load()
	for _, t := range targets {
		if t.complete {
			if merr := writeSynced(doneMarker(cfg.localDir, t.rel), []byte(t.Object)); merr != nil && err == nil {
				err = merr
			}
		}
	}
	return err
}
