package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gosafetensors/safetensors/internal/redact"
)

// routes builds the mux: every endpoint but /healthz and /login behind the
// token.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern, endpoint string, auth bool, h http.HandlerFunc) {
		mux.Handle(pattern, s.wrap(endpoint, auth, h))
	}
	handle("GET /healthz", "healthz", false, s.healthz)
	handle("POST /login", "login", false, s.login)
	handle("GET /metrics", "metrics", true, promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}).ServeHTTP)
	handle("POST /v1/scan", "scan", true, s.scan)
	handle("GET /v1/inspect", "inspect", true, s.inspect)
	handle("POST /v1/inspect", "inspect", true, s.inspect)
	handle("GET /{$}", "viewer", true, s.viewer)
	handle("POST /{$}", "viewer", true, s.viewer)
	handle("GET /static/", "static", true, s.static)
	handle("/", "other", true, func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "bad_request", errors.New("no such endpoint"))
	})
	return mux
}

// statusWriter remembers the status and counts the body.
type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wrap adds what every endpoint has: security headers, authentication,
// metrics, one log line, and a 500 instead of a crash.
func (s *Server) wrap(endpoint string, auth bool, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: rw}
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cache-Control", "no-store")
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic", "endpoint", endpoint, "panic", fmt.Sprint(p))
				if w.status == 0 {
					s.fail(w, r, http.StatusInternalServerError, "", errors.New("internal error"))
				}
			}
			if w.status == 0 {
				w.status = http.StatusOK
			}
			d := time.Since(start)
			s.m.requests.WithLabelValues(endpoint, strconv.Itoa(w.status)).Inc()
			s.m.latency.WithLabelValues(endpoint).Observe(d.Seconds())
			attrs := []any{"method", r.Method, "endpoint", endpoint, "status", w.status,
				"duration_ms", d.Milliseconds(), "bytes_out", w.n, "remote", r.RemoteAddr}
			if loc := r.URL.Query().Get("location"); loc != "" {
				attrs = append(attrs, "location", redact.Location(loc))
			}
			if r.ContentLength > 0 {
				attrs = append(attrs, "bytes_in", r.ContentLength)
			}
			level := slog.LevelInfo
			if endpoint == "healthz" || endpoint == "metrics" {
				level = slog.LevelDebug
			}
			s.log.Log(r.Context(), level, "request", attrs...)
		}()
		if auth {
			ok, byCookie := s.authorized(r, endpoint == "viewer" || endpoint == "static")
			if !ok {
				s.m.rejections.WithLabelValues("unauthorized").Inc()
				if endpoint == "viewer" && r.Method == http.MethodGet {
					s.loginPage(w, "")
					return
				}
				hd.Set("WWW-Authenticate", `Bearer realm="safetensors"`)
				s.fail(w, r, http.StatusUnauthorized, "", errors.New("unauthorized: send Authorization: Bearer TOKEN"))
				return
			}
			if byCookie && r.Method != http.MethodGet && !sameOrigin(r) {
				s.fail(w, r, http.StatusForbidden, "forbidden", errors.New("cross-site request refused"))
				return
			}
		}
		h(w, r)
	})
}

// sameOrigin reports whether a request authenticated by the session
// cookie shows that it comes from the service's own page: Sec-Fetch-Site
// same-origin, or an Origin equal to the service's, and neither header
// saying otherwise. "null" (a sandboxed frame, a data: URL, a redirect
// from another origin) is another origin; a request with neither header
// is refused too (every browser that keeps the cookie sends one of them
// on a POST; other clients use the bearer token).
func sameOrigin(r *http.Request) bool {
	sites, origins := r.Header.Values("Sec-Fetch-Site"), r.Header.Values("Origin")
	if len(sites) > 1 || len(origins) > 1 {
		return false
	}
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	if site != "" && site != "same-origin" {
		return false
	}
	if origin != "" {
		return origin == "http://"+r.Host || origin == "https://"+r.Host
	}
	return site == "same-origin"
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error string `json:"error"`
}

// fail answers with a JSON error; reason, if not empty, counts a
// rejection.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, reason string, err error) {
	if reason != "" {
		s.m.rejections.WithLabelValues(reason).Inc()
	}
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "2")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(errorBody{Error: redact.Message(err.Error(), r.URL.Query().Get("location"))})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "draining")
		return
	}
	fmt.Fprintln(w, "ok")
}
