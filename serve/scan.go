package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/source"
)

// request is what a /v1/scan or /v1/inspect request names: a location,
// or an upload spooled to file.
type request struct {
	location string
	name     string   // the upload's name in reports
	file     *os.File // the upload
	size     int64
}

func (q *request) close() {
	if q.file != nil {
		q.file.Close()
	}
}

// jsonRequest is the body of a request with Content-Type application/json.
type jsonRequest struct {
	Location string `json:"location"`
}

// readRequest reads ?location=, a JSON body {"location": ...}, or else
// the body as the file itself (?name= names it in reports).
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (*request, int, string, error) {
	q := &request{location: r.URL.Query().Get("location")}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case q.location != "" || r.Method == http.MethodGet:
	case ct == "application/json":
		body := http.MaxBytesReader(w, r.Body, s.cfg.limits.MaxJSONBodyBytes)
		dec := json.NewDecoder(body)
		dec.DisallowUnknownFields()
		var jr jsonRequest
		if err := dec.Decode(&jr); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, http.StatusRequestEntityTooLarge, "too_large", fmt.Errorf("JSON body larger than %d bytes", mbe.Limit)
			}
			return nil, http.StatusBadRequest, "bad_request", fmt.Errorf("JSON body: %v (want {\"location\": \"...\"})", err)
		}
		if dec.More() {
			return nil, http.StatusBadRequest, "bad_request", errors.New("JSON body: more than one value")
		}
		q.location = jr.Location
	default:
		q.name = uploadName(r.URL.Query().Get("name"))
		f, n, err := s.spool(w, r.Body, r.ContentLength)
		if err != nil {
			code, reason := uploadStatus(err)
			return nil, code, reason, err
		}
		q.file, q.size = f, n
		return q, 0, "", nil
	}
	if q.location == "" {
		return nil, http.StatusBadRequest, "bad_request", errors.New("name a location (?location=LOC) or send the file as the body")
	}
	if err := s.locs.check(q.location); err != nil {
		return nil, http.StatusForbidden, "forbidden", err
	}
	return q, 0, "", nil
}

// uploadName keeps the last element of a client's file name, for
// reports only; it is never a path the service opens.
func uploadName(name string) string {
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	if name == "." || name == "/" || name == "" || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "upload"
	}
	return name
}

// uploadObject opens a spooled upload for the opener; it has no siblings.
func uploadObject(q *request) (*source.Object, error) {
	return source.NewObject(q.name, q.file, q.size, nil, nil)
}

// scan answers with exactly what `scan --json` prints for the request:
// an array, one report per file, streamed as the files are done.
func (s *Server) scan(w http.ResponseWriter, r *http.Request) {
	s.audit(w, r, func(ctx context.Context, q *request) {
		s.writeScan(ctx, w, q)
	})
}

// audit reads what a request names, admits it (503 when full) and runs it
// within the audit's time budget.
func (s *Server) audit(w http.ResponseWriter, r *http.Request, run func(context.Context, *request)) {
	q, code, reason, err := s.readRequest(w, r)
	if err != nil {
		s.fail(w, r, code, reason, err)
		return
	}
	defer q.close()
	release, err := s.acquire(r.Context())
	if err != nil {
		s.failAdmission(w, r, err)
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(s.withScope(r.Context(), q), s.cfg.limits.AuditTimeout)
	defer cancel()
	run(ctx, q)
}

// writeScan streams the scan array for q.
func (s *Server) writeScan(ctx context.Context, w http.ResponseWriter, q *request) {
	w.Header().Set("Content-Type", "application/json")
	out := &deadlineWriter{w: w, rc: http.NewResponseController(w), idle: s.cfg.limits.WriteIdleTimeout}
	aw := audit.NewScanWriter(out)
	for rep := range s.scanReports(ctx, q) {
		if err := aw.Write(rep); err != nil {
			return // the client went away
		}
		out.flush()
	}
	aw.Close()
}

// scanReports audits what the request names.
func (s *Server) scanReports(ctx context.Context, q *request) func(func(*audit.ScanReport) bool) {
	return func(yield func(*audit.ScanReport) bool) {
		if q.file != nil {
			rep := audit.ScanReader(ctx, q.name, q.file, q.size, s.auditOpts...)
			s.m.verdicts.WithLabelValues(rep.Verdict.String()).Inc()
			yield(rep)
			return
		}
		for rep := range audit.Scan(ctx, q.location, s.auditOpts...) {
			s.m.verdicts.WithLabelValues(rep.Verdict.String()).Inc()
			if !yield(rep) {
				return
			}
		}
	}
}

func (s *Server) failAdmission(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errOverload) {
		s.fail(w, r, http.StatusServiceUnavailable, "overload", err)
		return
	}
	s.fail(w, r, http.StatusServiceUnavailable, "", err) // the client went away
}

// deadlineWriter gives every write to a response its own deadline, so
// that a client that stops reading frees its slot.
type deadlineWriter struct {
	w    io.Writer
	rc   *http.ResponseController
	idle time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.rc.SetWriteDeadline(time.Now().Add(d.idle))
	return d.w.Write(p)
}

func (d *deadlineWriter) flush() { d.rc.Flush() }
