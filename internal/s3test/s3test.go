// Package s3test serves S3 buckets from memory on loopback (gofakes3), for
// the tests that read buckets through the real AWS SDK, with the SDK's
// environment pointed at test credentials and away from the machine's own
// (profiles, configuration files, instance metadata). Only tests import
// it.
package s3test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Env sets, for the test, the environment the AWS SDK reads: test
// credentials, a region, no profile, no configuration files, no instance
// metadata.
func Env(t testing.TB) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_REGION": "us-east-1", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_MAX_ATTEMPTS": "", "AWS_RETRY_MODE": "",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"),
	} {
		t.Setenv(k, v)
	}
}

// Server is an S3 endpoint on loopback whose buckets live in Backend.
type Server struct {
	*httptest.Server
	Backend *s3mem.Backend
	// S3 is the S3 protocol handler, for a test that puts its own handler
	// in front of it (Config.Handler).
	S3 http.Handler
}

// Start sets Env and serves the named buckets, empty, until the test ends.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	Env(t)
	s := &Server{Backend: s3mem.New()}
	s.S3 = gofakes3.New(s.Backend).Server()
	s.Server = httptest.NewServer(s.S3)
	t.Cleanup(s.Close)
	for _, b := range buckets {
		if err := s.Backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Put stores b as the object key of bucket.
func (s *Server) Put(t testing.TB, bucket, key string, b []byte) {
	t.Helper()
	if _, err := s.Backend.PutObject(bucket, key, map[string]string{}, bytes.NewReader(b), int64(len(b)), nil); err != nil {
		t.Fatal(err)
	}
}

// Query is the query of a bucket URL read through the server:
// "endpoint=...&use_path_style=true&region=us-east-1".
func (s *Server) Query() string {
	return "endpoint=" + url.QueryEscape(s.URL) + "&use_path_style=true&region=us-east-1"
}
