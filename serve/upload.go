package serve

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"
	"time"
)

// errTooLarge and errTooSlow end an upload; errSpool is the service's own
// failure to store one (its message names no server path: the details go
// to the log).
var (
	errTooLarge  = errors.New("upload larger than the service accepts")
	errTooSlow   = errors.New("upload too slow: the client paused or trickled")
	errSpool     = errors.New("the service could not store the upload: retry later")
	errSpoolFull = errors.New("the service has no space left to store the upload: retry later")
)

// spoolError replaces a failure of the spool (creating or writing the
// file) with an error that names no path, and logs the details.
func (s *Server) spoolError(err error) error {
	s.log.Error("spooling an upload", "error", err.Error())
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG) {
		return errSpoolFull
	}
	return errSpool
}

// spool copies an upload into an unlinked temporary file, never holding
// it in memory: at most max bytes, each read within the idle timeout, the
// whole at the minimum rate. The caller closes the file.
func (s *Server) spool(w http.ResponseWriter, body io.Reader, declared int64) (*os.File, int64, error) {
	lim := s.cfg.limits
	if declared > lim.MaxUploadBytes {
		return nil, 0, fmt.Errorf("%w: %d bytes declared, at most %d", errTooLarge, declared, lim.MaxUploadBytes)
	}
	f, err := os.CreateTemp(s.cfg.spoolDir, "safetensors-serve-*")
	if err != nil {
		return nil, 0, s.spoolError(err)
	}
	// unlinked at once: nothing is left behind, whatever happens next
	os.Remove(f.Name())
	rc := http.NewResponseController(w)
	start := time.Now()
	buf := make([]byte, 256<<10)
	uploaded := s.m.bytesRead.WithLabelValues("upload")
	var n int64
	for {
		rc.SetReadDeadline(time.Now().Add(lim.BodyIdleTimeout))
		k, rerr := body.Read(buf)
		if k > 0 {
			if n+int64(k) > lim.MaxUploadBytes {
				f.Close()
				return nil, 0, fmt.Errorf("%w: more than %d bytes", errTooLarge, lim.MaxUploadBytes)
			}
			if _, err := f.Write(buf[:k]); err != nil {
				f.Close()
				return nil, 0, s.spoolError(err)
			}
			n += int64(k)
			uploaded.Add(float64(k))
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			f.Close()
			if isTimeout(rerr) {
				return nil, 0, errTooSlow
			}
			return nil, 0, fmt.Errorf("reading the upload: %w", rerr)
		}
		if el := time.Since(start); el > lim.BodyIdleTimeout && float64(n) < float64(lim.MinUploadRate)*el.Seconds() {
			f.Close()
			return nil, 0, fmt.Errorf("%w: %d bytes in %s", errTooSlow, n, el.Round(time.Second))
		}
	}
	rc.SetReadDeadline(time.Time{})
	return f, n, nil
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// uploadStatus is the answer to a failed upload.
func uploadStatus(err error) (int, string) {
	switch {
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, errTooSlow):
		return http.StatusRequestTimeout, "slow"
	case errors.Is(err, errSpoolFull):
		return http.StatusInsufficientStorage, "spool"
	case errors.Is(err, errSpool):
		return http.StatusServiceUnavailable, "spool"
	}
	return http.StatusBadRequest, "bad_request"
}
