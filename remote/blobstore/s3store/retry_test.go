package s3store

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/gosafetensors/safetensors/internal/s3test"
	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

// failing is an S3 endpoint on loopback answering every request with a
// retryable 500, counting them.
func failing(t *testing.T) (*url.URL, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>down</Message></Error>`))
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse("s3://models/?endpoint=" + url.QueryEscape(srv.URL) + "&use_path_style=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	return u, &n
}

// TestRetryEnvironment: AWS_MAX_ATTEMPTS and AWS_RETRY_MODE, which the
// SDK ignores when a retryer is given, set the attempts and the mode of
// the retryer the client uses; invalid values are an error at open.
func TestRetryEnvironment(t *testing.T) {
	ctx := context.Background()
	t.Run("one attempt", func(t *testing.T) {
		s3test.Env(t)
		t.Setenv("AWS_MAX_ATTEMPTS", "1")
		u, n := failing(t)
		b, err := open(ctx, u, driver.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.NewRangeReader(ctx, "k", 0, 10, ""); err == nil {
			t.Fatal("read from a failing store")
		}
		if got := n.Load(); got != 1 {
			t.Fatalf("AWS_MAX_ATTEMPTS=1: %d requests", got)
		}
	})
	for _, tc := range []struct {
		attempts, mode string
		want           int
		adaptive       bool
	}{
		{"", "", 3, false},
		{"7", "", 7, false},
		{"", "adaptive", 3, true},
		{"5", "standard", 5, false},
	} {
		t.Run(tc.attempts+"/"+tc.mode, func(t *testing.T) {
			s3test.Env(t)
			t.Setenv("AWS_MAX_ATTEMPTS", tc.attempts)
			t.Setenv("AWS_RETRY_MODE", tc.mode)
			u, _ := failing(t)
			d, err := open(ctx, u, driver.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			r := d.(*bucket).client.Options().Retryer
			if r.MaxAttempts() != tc.want {
				t.Errorf("max attempts %d, want %d", r.MaxAttempts(), tc.want)
			}
			if _, ok := r.(*retry.AdaptiveMode); ok != tc.adaptive && tc.attempts == "" {
				t.Errorf("retryer %T, adaptive %v", r, tc.adaptive)
			}
		})
	}
	t.Run("profile", func(t *testing.T) { // max_attempts in ~/.aws/config
		s3test.Env(t)
		cfg := filepath.Join(t.TempDir(), "config")
		if err := os.WriteFile(cfg, []byte("[default]\nmax_attempts = 4\nretry_mode = standard\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_CONFIG_FILE", cfg)
		u, _ := failing(t)
		d, err := open(ctx, u, driver.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if got := d.(*bucket).client.Options().Retryer.MaxAttempts(); got != 4 {
			t.Errorf("max_attempts = 4 in the profile: %d", got)
		}
	})
	for _, env := range [][2]string{{"AWS_RETRY_MODE", "sometimes"}, {"AWS_MAX_ATTEMPTS", "-1"}, {"AWS_MAX_ATTEMPTS", "x"}} {
		t.Run(env[0]+"="+env[1], func(t *testing.T) {
			s3test.Env(t)
			t.Setenv(env[0], env[1])
			u, _ := failing(t)
			_, err := open(ctx, u, driver.Config{})
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), env[0]) {
				t.Fatalf("open: %v", err)
			}
		})
	}
}
