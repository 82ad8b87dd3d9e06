package audit_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/internal/s3test"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/source"
)

// fault is how a faultServer fails once its first response is sent.
type fault string

const (
	faultNone        fault = "none"
	faultReset       fault = "reset"       // the connection is reset after a budget of body bytes, then at once
	faultHangUp      fault = "hang up"     // later requests: the connection is closed before an answer (the client sees EOF)
	fault500         fault = "500"         // every later request answers 500
	faultChanged     fault = "changed"     // the object is replaced: a new ETag and other bytes
	faultNoValidator fault = "novalidator" // no ETag, no Last-Modified: nothing pins the object
)

// faultServer serves b as one object with a strong ETag and ranges, and
// fails as f says after its first response (for faultReset, after budget
// bytes of bodies in all).
func faultServer(t testing.TB, b []byte, f fault, budget int) *httptest.Server {
	var mu sync.Mutex
	requests, sent := 0, 0
	other := bytes.Repeat([]byte{0xA5}, len(b))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		n, left := requests, budget-sent
		mu.Unlock()
		body, etag := b, `"v1"`
		switch {
		case f == faultNoValidator:
			etag = ""
		case f == faultChanged && n > 1:
			body, etag = other, `"v2"`
		case f == fault500 && n > 1:
			http.Error(w, "the back end failed", http.StatusInternalServerError)
			return
		case f == faultHangUp && n > 1:
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		var out http.ResponseWriter = w
		if f == faultReset {
			out = &resetWriter{ResponseWriter: w, left: left, sent: func(k int) { mu.Lock(); sent += k; mu.Unlock() }}
		}
		http.ServeContent(out, r, "", time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// resetWriter writes up to left bytes of a body, then resets the
// connection (RST, not a clean close).
type resetWriter struct {
	http.ResponseWriter
	left int
	sent func(int)
}

func (w *resetWriter) Write(p []byte) (int, error) {
	if len(p) <= w.left {
		w.left -= len(p)
		w.sent(len(p))
		return w.ResponseWriter.Write(p)
	}
	n, _ := w.ResponseWriter.Write(p[:max(w.left, 0)])
	w.sent(n)
	conn, buf, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		buf.Flush()
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
	}
	panic(http.ErrAbortHandler)
}

// fastRemote retries twice, at once: the tests count requests, not time.
func fastRemote(prefetch int64) audit.Option {
	opts := []remote.Option{remote.WithRetries(2, time.Minute), remote.WithBackoff(time.Millisecond, time.Millisecond)}
	if prefetch > 0 {
		opts = append(opts, remote.WithPrefetch(prefetch))
	}
	return audit.WithSource(source.WithRemote(opts...))
}

// randomSafetensors writes a safetensors file of two U8 tensors of
// incompressible bytes, n bytes each.
func randomSafetensors(t testing.TB, path string, n int) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 2*n)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	b, err := safetensors.Marshal([]safetensors.TensorData{
		{Name: "a", DType: safetensors.U8, Shape: []int64{int64(n)}, Data: data[:n]},
		{Name: "b", DType: safetensors.U8, Shape: []int64{int64(n)}, Data: data[n:]},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A read that fails part-way — the connection reset, 500s after the
// retries, the object replaced, a server that pins nothing asked for a
// second response — is not a verdict about the content: scan says
// "error" and validate "unreadable", with the I/O error as the cause
// (source.IsIOError), for every kind of file and whatever the decoder made
// of the missing bytes. The same server without the fault gives the
// content's verdict, so the fault is what is being tested.
func TestReadFailuresAreNotVerdicts(t *testing.T) {
	dir := t.TempDir()
	randomST := filepath.Join(dir, "random.safetensors")
	randomSafetensors(t, randomST, 150_000)
	zst := filepath.Join(dir, "random.safetensors.zst")
	if _, err := compressed.CompressFile(context.Background(), randomST, zst, compressed.WithFrameSize(32<<10)); err != nil {
		t.Fatal(err)
	}
	type check int
	const (
		scan check = iota
		validateFull
	)
	for _, tc := range []struct {
		name     string
		file     string
		check    check
		prefetch int64  // the first response's length (0: the default 100,008 bytes)
		clean    string // the verdict or status without a fault
	}{
		{"safetensors", randomST, validateFull, 0, "ok"},
		{"compressed safetensors", zst, validateFull, 0, "ok"},
		{"zip checkpoint", torchDir + "large_dims.pt", scan, 0, "clean"},
		{"legacy checkpoint", torchDir + "tiny_transformer_legacy.bin", scan, 600, "clean"},
		{"tar checkpoint", "../testdata/crafted/tar_v7_polyglot_benign_member.pt", scan, 600, "invalid"},
		{"safetensors scanned", randomST, scan, 64, "clean"},
	} {
		b, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []fault{faultNone, faultReset, faultHangUp, fault500, faultChanged, faultNoValidator} {
			first := tc.prefetch
			if first == 0 {
				first = remote.DefaultPrefetch
			}
			srv := faultServer(t, b, f, int(first)+100) // a reset 100 bytes into the second response
			opt := fastRemote(tc.prefetch)
			var verdict, msg string
			var cause error
			switch tc.check {
			case scan:
				rs := scanAll(t, srv.URL+"/model.bin", opt)
				if len(rs) != 1 {
					t.Fatalf("%s, %s: %d reports", tc.name, f, len(rs))
				}
				verdict, msg, cause = rs[0].Verdict.String(), rs[0].Error, rs[0].Err
				if rs[0].Verdict == audit.Error && (len(rs[0].Problems) > 0 || len(rs[0].Globals) > 0) {
					t.Errorf("%s, %s: an error report with findings: %+v", tc.name, f, rs[0])
				}
			case validateFull:
				var rs []*audit.ValidateReport
				for r := range audit.Validate(context.Background(), srv.URL+"/model.safetensors", opt, audit.WithFull(true)) {
					rs = append(rs, r)
				}
				if len(rs) != 1 {
					t.Fatalf("%s, %s: %d reports", tc.name, f, len(rs))
				}
				verdict, cause = rs[0].Status.String(), rs[0].Err
				if rs[0].Error != nil {
					msg = *rs[0].Error
				}
				if rs[0].Status == audit.Unreadable && (rs[0].Variant != nil || rs[0].Offset != nil || rs[0].TensorCount != nil) {
					t.Errorf("%s, %s: an unreadable report says more: %+v", tc.name, f, rs[0])
				}
			}
			if f == faultNone {
				if verdict != tc.clean {
					t.Fatalf("%s without a fault: %s %s, want %s", tc.name, verdict, msg, tc.clean)
				}
				continue
			}
			want := map[check]string{scan: "error", validateFull: "unreadable"}[tc.check]
			if verdict != want || !source.IsIOError(cause) {
				t.Errorf("%s, %s: %s (%v) %s, want %s with an I/O error", tc.name, f, verdict, source.IsIOError(cause), msg, want)
				continue
			}
			why := map[fault]string{faultReset: "connection reset", faultHangUp: "EOF", fault500: "500", faultChanged: "", faultNoValidator: "no strong validator"}[f]
			if f == faultChanged && !errors.Is(cause, remote.ErrObjectChanged) {
				t.Errorf("%s, %s: %v does not wrap remote.ErrObjectChanged", tc.name, f, cause)
			}
			if f == faultNoValidator && !errors.Is(cause, remote.ErrNoValidator) {
				t.Errorf("%s, %s: %v does not wrap remote.ErrNoValidator", tc.name, f, cause)
			}
			if !strings.Contains(msg, why) {
				t.Errorf("%s, %s: the message does not say why (%q): %s", tc.name, f, why, msg)
			}
		}
	}
}

// A local file truncated while it is read is not a truncated file: what
// was not read was not checked. Read through a root (pread, as the
// service reads), scan and validate --full say so; a mapped file (the
// CLI's validate --full) faults on the lost pages, which is a failure to
// read (EIO), not a crash.
func TestLocalFileTruncatedWhileRead(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, torchDir+"large_dims.pt", filepath.Join(dir, "m.bin"))
	randomSafetensors(t, filepath.Join(dir, "m.safetensors"), 150_000)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// truncate arms a truncation of name to keep bytes at the reads'
	// first chance after after bytes were read.
	var truncated bool
	truncate := func(name string, after, keep int64) audit.Option {
		var read int64
		truncated = false
		return audit.WithReadCounter(func(n int) {
			if read += int64(n); read >= after && !truncated {
				truncated = true
				if err := os.Truncate(filepath.Join(dir, name), keep); err != nil {
					t.Error(err)
				}
			}
		})
	}
	copyFile(t, torchDir+"large_dims.pt", filepath.Join(dir, "m.bin"))
	rs := scanAll(t, "m.bin", audit.WithRoot(root), truncate("m.bin", 70_000, 20_000)) // once the central directory is read
	if !truncated || len(rs) != 1 || rs[0].Verdict != audit.Error || !source.IsIOError(rs[0].Err) || !strings.Contains(rs[0].Error, "changed while it was being read") {
		t.Errorf("scan of a file truncated underneath: %+v", rs[0])
	}
	randomSafetensors(t, filepath.Join(dir, "m.safetensors"), 150_000)
	for r := range audit.Validate(context.Background(), "m.safetensors", audit.WithRoot(root), audit.WithFull(true), truncate("m.safetensors", 12_448, 1000)) { // once the header is read
		if !truncated || r.Status != audit.Unreadable || !source.IsIOError(r.Err) || !strings.Contains(*r.Error, "changed while it was being read") {
			t.Errorf("validate --full of a file truncated underneath: %s %s", r.Status, *r.Error)
		}
	}

	// a sharded model's shards are mapped: the last shard is truncated
	// once the first tensor is read
	model, shards := safetensorsModel(t)
	last := filepath.Join(model, shards[len(shards)-1])
	var updates int
	progress := audit.WithProgress(func(string, int64) (func(int64), func()) {
		return func(int64) {
			if updates++; updates == 1 {
				if err := os.Truncate(last, 0); err != nil {
					t.Error(err)
				}
			}
		}, func() {}
	})
	for r := range audit.Validate(context.Background(), filepath.Join(model, "model.safetensors.index.json"), audit.WithFull(true), progress) {
		if updates == 0 || r.Status != audit.Unreadable || !source.IsIOError(r.Err) || !strings.Contains(*r.Error, "memory fault") {
			t.Errorf("validate --full of a mapped file truncated underneath: %s %s", r.Status, *r.Error)
		}
	}
}

// A bucket object whose reads fail after the first one — the store
// answers 500 (after the SDK's own retries), resets the connection, or
// the object is overwritten between two reads (If-Match fails) — is
// reported not checked, through the real AWS SDK against gofakes3.
func TestBucketReadFailuresAreNotVerdicts(t *testing.T) {
	b, err := os.ReadFile(torchDir + "large_dims.pt") // larger than the first read
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []fault{faultNone, fault500, faultReset, faultChanged} {
		srv := s3test.Start(t, "uploads")
		srv.Put(t, "uploads", "in/m.bin", b)
		var mu sync.Mutex
		gets := 0
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/m.bin") {
				gets++
			}
			n := gets
			mu.Unlock()
			if n > 1 {
				switch f {
				case fault500:
					w.WriteHeader(http.StatusInternalServerError)
					io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>the back end failed</Message></Error>`)
					return
				case faultReset:
					if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
						conn.(*net.TCPConn).SetLinger(0)
						conn.Close()
					}
					return
				case faultChanged:
					srv.Put(t, "uploads", "in/m.bin", bytes.Repeat([]byte{1}, len(b)))
				}
			}
			srv.S3.ServeHTTP(w, r)
		})
		loc := "s3://uploads/in/m.bin?" + srv.Query()
		rs := scanAll(t, loc)
		if len(rs) != 1 {
			t.Fatalf("%s: %d reports", f, len(rs))
		}
		r := rs[0]
		if f == faultNone {
			if r.Verdict != audit.Clean {
				t.Fatalf("without a fault: %s %s", r.Verdict, r.Error)
			}
			continue
		}
		t.Logf("%s: %s", f, r.Error)
		if r.Verdict != audit.Error || !source.IsIOError(r.Err) || len(r.Problems) != 0 {
			t.Errorf("%s: %s %v %s", f, r.Verdict, r.Problems, r.Error)
		}
		if f == faultChanged && !errors.Is(r.Err, remote.ErrObjectChanged) {
			t.Errorf("%s: %v does not wrap remote.ErrObjectChanged", f, r.Err)
		}
	}
}
