package serve

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/inspect"
	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/internal/units"
)

//go:embed assets
var assets embed.FS

// The templates are parsed on first use, not at program start: the CLI's
// other commands do not pay for them.
var (
	pageTmpl  = sync.OnceValue(func() *template.Template { return template.Must(template.ParseFS(assets, "assets/page.html")) })
	loginTmpl = sync.OnceValue(func() *template.Template { return template.Must(template.ParseFS(assets, "assets/login.html")) })
)

// The viewer's limits on what one page lists.
const (
	maxPageScans = 200
	maxPageRows  = 5000
)

const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// page is what the viewer shows.
type page struct {
	Location   string // the location asked for
	Name       string // what is shown (location or upload name)
	Err        string
	Model      *pageModel
	InspectErr string
	Worst      audit.Verdict
	Scans      []pageScan
	More       int
}

type pageModel struct {
	Params, DTypes, Size, Format string
	Tensors                      string
	Rows                         []pageRow
	MoreRows                     int
	ByDType                      []pageDType
	Shards                       []pageShard
	Meta                         []pageMeta
	Warnings                     []string
}

type pageRow struct{ Kind, Depth, Label, What, Params, Bytes string }
type pageDType struct{ DType, Params, Share, Bytes string }
type pageShard struct{ Name, Tensors, Params, Bytes string }
type pageMeta struct{ Key, Value string }

type pageScan struct {
	Path, Format string
	Verdict      audit.Verdict
	Error        string
	Offending    []audit.Global
	Opcodes      []audit.Opcode
	Problems     []string
	Allowed      int
}

// viewer shows a model: GET / (a form), GET /?location=LOC, or POST / with
// a multipart upload (field "file").
func (s *Server) viewer(w http.ResponseWriter, r *http.Request) {
	var q *request
	// what the page shows of the location has no secrets (the form is
	// filled with it too: a signed URL must be given again)
	loc := r.URL.Query().Get("location")
	p := &page{Location: redact.Location(loc)}
	status := http.StatusOK
	switch {
	case r.Method == http.MethodPost:
		var err error
		q, status, err = s.readUpload(w, r)
		if err != nil {
			p.Err = err.Error()
			s.render(w, status, p)
			return
		}
		defer q.close()
		p.Name = q.name
	case loc != "":
		if err := s.locs.check(loc); err != nil {
			s.m.rejections.WithLabelValues("forbidden").Inc()
			p.Err = redact.Message(err.Error(), loc)
			s.render(w, http.StatusForbidden, p)
			return
		}
		q = &request{location: loc}
		p.Name = p.Location
	default:
		s.render(w, http.StatusOK, p)
		return
	}
	release, err := s.acquire(r.Context())
	if err != nil {
		if errors.Is(err, errOverload) {
			s.m.rejections.WithLabelValues("overload").Inc()
			w.Header().Set("Retry-After", "2")
		}
		p.Err = err.Error()
		s.render(w, http.StatusServiceUnavailable, p)
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(s.withScope(r.Context(), q), s.cfg.limits.AuditTimeout)
	defer cancel()
	if rep, d, err := s.describe(ctx, q); err != nil {
		p.InspectErr = redact.Message(err.Error(), loc)
	} else {
		p.Model = pageModelOf(rep, d.Tensors)
	}
	for rep := range s.scanReports(ctx, q) {
		p.Worst = max(p.Worst, rep.Verdict)
		if len(p.Scans) == maxPageScans {
			p.More++
			continue
		}
		p.Scans = append(p.Scans, pageScanOf(rep))
	}
	s.render(w, status, p)
}

// readUpload reads the "file" part of a multipart form into the spool.
func (s *Server) readUpload(w http.ResponseWriter, r *http.Request) (*request, int, error) {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.limits.MaxUploadBytes+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		s.m.rejections.WithLabelValues("bad_request").Inc()
		return nil, http.StatusBadRequest, fmt.Errorf("upload: want a multipart form with a file: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			s.m.rejections.WithLabelValues("bad_request").Inc()
			if isTimeout(err) {
				return nil, http.StatusRequestTimeout, errTooSlow
			}
			return nil, http.StatusBadRequest, errors.New("upload: the form has no file (field \"file\")")
		}
		if part.FormName() != "file" {
			continue
		}
		f, n, err := s.spool(w, part, -1)
		if err != nil {
			code, reason := uploadStatus(err)
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				code, reason, err = http.StatusRequestEntityTooLarge, "too_large", errTooLarge
			}
			s.m.rejections.WithLabelValues(reason).Inc()
			return nil, code, err
		}
		return &request{name: uploadName(part.FileName()), file: f, size: n}, http.StatusOK, nil
	}
}

func (s *Server) render(w http.ResponseWriter, status int, p *page) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	w.WriteHeader(status)
	if err := pageTmpl().Execute(w, p); err != nil {
		s.log.Warn("rendering the viewer", "error", err.Error())
	}
}

func pageScanOf(r *audit.ScanReport) pageScan {
	ps := pageScan{Path: r.Path, Format: r.Format.String(), Verdict: r.Verdict, Error: r.Error, Opcodes: r.DangerousOpcodes, Problems: r.Problems}
	for _, g := range r.Globals {
		if g.Verdict == audit.Allowed {
			ps.Allowed++
		} else {
			ps.Offending = append(ps.Offending, g)
		}
	}
	return ps
}

// pageModelOf lays out a model's report: totals like the Hub's ("8.03B
// params · BF16"), the tensor tree as `inspect --tree` groups it, dtypes,
// shards, metadata.
func pageModelOf(rep *inspect.Report, tensors []safetensors.TensorInfo) *pageModel {
	pm := &pageModel{
		Params:   units.Count(rep.TotalParameters),
		Size:     units.Bytes(rep.FileSize),
		Format:   rep.Format,
		Tensors:  units.Digits(int64(rep.TensorCount)),
		Warnings: rep.Warnings,
	}
	type dt struct {
		name          string
		params, bytes int64
	}
	var dts []dt
	for name, n := range rep.ParametersByDType {
		dts = append(dts, dt{name, n, rep.BytesByDType[name]})
	}
	slices.SortFunc(dts, func(a, b dt) int { return cmp.Or(cmp.Compare(b.params, a.params), strings.Compare(a.name, b.name)) })
	var names []string
	for _, d := range dts {
		names = append(names, d.name)
		share := "-"
		if rep.TotalParameters > 0 {
			share = strconv.FormatFloat(100*float64(d.params)/float64(rep.TotalParameters), 'f', 1, 64) + "%"
		}
		pm.ByDType = append(pm.ByDType, pageDType{d.name, units.Count(d.params), share, units.Bytes(d.bytes)})
	}
	pm.DTypes = strings.Join(names, " · ")
	for _, row := range inspect.Tree(tensors) {
		if len(pm.Rows) == maxPageRows {
			pm.MoreRows++
			continue
		}
		pr := pageRow{Depth: strconv.Itoa(row.Depth), Label: row.Label, Params: units.Count(row.Parameters), Bytes: units.Bytes(row.Bytes)}
		if row.Depth > 10 {
			pr.Depth = "deep"
		}
		switch {
		case row.Tensor != nil:
			pr.Kind, pr.What = "leaf", row.Tensor.DType.String()+" "+shapeString(row.Tensor.Shape)
		case row.Repeat > 0:
			pr.Kind, pr.What = "run", "each "+plural(int64(row.Tensors), "tensor")
		default:
			pr.Kind, pr.What = "group", plural(int64(row.Tensors), "tensor")
		}
		pm.Rows = append(pm.Rows, pr)
	}
	for _, sh := range rep.Shards {
		pm.Shards = append(pm.Shards, pageShard{sh.Name, units.Digits(int64(sh.Tensors)), units.Count(sh.Parameters), units.Bytes(sh.Bytes)})
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range rep.Metadata {
			if !yield(k) {
				return
			}
		}
	}) {
		pm.Meta = append(pm.Meta, pageMeta{k, rep.Metadata[k]})
	}
	return pm
}

func shapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return units.Digits(n) + " " + noun + "s"
}

// static serves the embedded style sheet.
func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	sub, _ := fs.Sub(assets, "assets")
	if r.URL.Path != "/static/style.css" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "max-age=3600")
	http.StripPrefix("/static/", http.FileServerFS(sub)).ServeHTTP(w, r)
}

// loginPage answers an unauthenticated browser with a form for the token.
func (s *Server) loginPage(w http.ResponseWriter, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	w.WriteHeader(http.StatusUnauthorized)
	loginTmpl().Execute(w, msg)
}

// login checks a token posted from the login page and sets a new session
// cookie (see [sessions]: random, signed, expiring; never the token).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.hasToken {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.limits.MaxJSONBodyBytes)
	tok := r.PostFormValue("token")
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) != 1 {
		s.m.rejections.WithLabelValues("unauthorized").Inc()
		s.loginPage(w, "wrong token")
		return
	}
	http.SetCookie(w, s.sessions.cookie(r.TLS != nil || s.cfg.secureCookie))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
