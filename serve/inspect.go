package serve

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"path/filepath"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/inspect"
	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/source"
)

// dirModels are the files a local directory's model is opened from, in
// order: a directory names its model by these (as the opener's directory
// reading does), read here through the root.
var dirModels = []string{"model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json", "pytorch_model.bin"}

// openModel opens what a request names as tensors: a location through the
// opener (remote reads through the guarded client), a local path through
// the root, or an upload.
func (s *Server) openModel(ctx context.Context, q *request) (*source.Model, error) {
	var o *source.Object
	var err error
	switch {
	case q.file != nil:
		o, err = uploadObject(q)
	case source.KindOf(q.location) == source.LocalPath:
		o, err = s.openLocal(ctx, q.location)
	default:
		// Remote readers keep the context they are opened with.
		return source.OpenModel(ctx, q.location, s.srcOpts...)
	}
	if err != nil {
		return nil, err
	}
	m, err := o.Model(ctx, s.srcOpts...)
	if err != nil {
		o.Close()
		return nil, err
	}
	return m, nil
}

// openLocal opens a path under the root; a directory by its model file.
func (s *Server) openLocal(ctx context.Context, loc string) (*source.Object, error) {
	if s.root == nil {
		return nil, ErrForbiddenLocation
	}
	if st, err := s.root.Stat(filepath.Clean(loc)); err == nil && st.IsDir() {
		for _, name := range dirModels {
			p := filepath.Join(loc, name)
			if _, err := s.root.Stat(filepath.Clean(p)); err == nil {
				loc = p
				break
			}
		}
	}
	t := audit.Target{Location: loc}
	return t.Open(ctx, s.auditOpts...)
}

// inspect answers with what `inspect --json` prints for the request.
func (s *Server) inspect(w http.ResponseWriter, r *http.Request) {
	s.audit(w, r, func(ctx context.Context, q *request) { s.writeInspect(ctx, w, r, q) })
}

// writeInspect writes the inspect object for q, or the error.
func (s *Server) writeInspect(ctx context.Context, w http.ResponseWriter, r *http.Request, q *request) {
	rep, _, err := s.describe(ctx, q)
	if err != nil {
		s.fail(w, r, modelErrorStatus(err), "", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	rep.WriteJSON(&deadlineWriter{w: w, rc: http.NewResponseController(w), idle: s.cfg.limits.WriteIdleTimeout})
}

// describe opens and describes a model: the report `inspect --json`
// prints, and the description it came from.
func (s *Server) describe(ctx context.Context, q *request) (*inspect.Report, *inspect.Description, error) {
	m, err := s.openModel(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	d := inspect.Describe(m)
	name := redact.Location(q.location)
	if q.file != nil {
		name = q.name
	}
	return d.Report(name, inspect.ByName(d.Tensors)), d, nil
}

// modelErrorStatus: 404 for a location that does not exist, 502 for one
// that could not be read, 422 for content that is not a model (what makes
// the CLI exit 1).
func modelErrorStatus(err error) int {
	var se *remote.StatusError
	switch {
	case errors.Is(err, ErrForbiddenLocation):
		return http.StatusForbidden
	case errors.Is(err, fs.ErrNotExist), errors.As(err, &se) && se.StatusCode == http.StatusNotFound:
		return http.StatusNotFound
	case errors.Is(err, ErrForbiddenAddress):
		return http.StatusForbidden
	case errors.Is(err, source.ErrHeaderLimit), errors.Is(err, source.ErrExpandedLimit):
		return http.StatusRequestEntityTooLarge
	case source.IsIOError(err):
		return http.StatusBadGateway
	}
	return http.StatusUnprocessableEntity
}
