package torch

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestZZTiming(t *testing.T) {
	dir := os.Getenv("ZZDIR")
	if dir == "" {
		t.Skip()
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range files {
		raw, _ := os.ReadFile(p)
		lines := strings.SplitN(string(raw), "\n", 2)
		lit := strings.TrimSpace(lines[1])
		lit = strings.TrimSuffix(strings.TrimPrefix(lit, "[]byte("), ")")
		s, err := strconv.Unquote(lit)
		if err != nil {
			t.Log(p, err)
			continue
		}
		b := []byte(s)
		start := time.Now()
		lim := fuzzLimits()
		for _, mode := range []pidMode{pidNone, pidZip, pidLegacy} {
			src := newSource(bytes.NewReader(b), 0, int64(len(b)), "f")
			m := newVM(src, lim, "f", mode, nil, nil)
			if v, err := m.run(); err == nil {
				c := &Checkpoint{}
				_ = c.build(v, map[*storageRef]*Storage{}, "f", lim)
			}
			src = newSource(bytes.NewReader(b), 0, int64(len(b)), "f")
			m = newVM(src, lim, "f", mode, nil, nil)
			m.scan = &scanSink{rep: &ScanReport{}, entry: "f"}
			_, _ = m.run()
		}
		r := bytes.NewReader(b)
		if c, err := open(r, int64(len(b)), lim); err == nil {
			for _, tn := range c.Tensors() {
				_, _ = tn.WriteTo(discard{})
			}
		}
		rep := &ScanReport{}
		if bytes.HasPrefix(b, []byte("PK")) {
			scanZip(r, int64(len(b)), lim, rep)
		} else {
			scanStream(r, int64(len(b)), lim, rep)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Logf("%s: %v (%d bytes)", filepath.Base(p), d, len(b))
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
