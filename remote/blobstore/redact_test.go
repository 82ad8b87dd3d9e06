package blobstore

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
)

// TestErrorsRedacted: errors name the object without the URL's query or
// userinfo, and a request URL quoted by net/http loses its query.
func TestErrorsRedacted(t *testing.T) {
	newFakeS3(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIASECRETKEYID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cr3tAccessKey")
	t.Setenv("AWS_SESSION_TOKEN", "sessionT0ken")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the dial is refused
	secrets := []string{"AKIASECRETKEYID", "s3cr3tAccessKey", "sessionT0ken", "hunter2", "x-id=", "X-Amz-"}
	for _, u := range []string{
		"s3://b/k.bin?endpoint=" + url.QueryEscape("http://user:hunter2@"+addr) + "&use_path_style=true&region=us-east-1",
		"s3://b/k.bin?endpoint=" + url.QueryEscape("http://"+addr) + "&use_path_style=true&region=us-east-1&sig=hunter2",
		"s3://b/?endpoint=" + url.QueryEscape("http://"+addr+"/?token=hunter2") + "&use_path_style=true&region=us-east-1",
		"gs://b/k?access_token=hunter2",
	} {
		var err error
		if strings.HasSuffix(strings.SplitN(u, "?", 2)[0], "/") {
			_, err = List(context.Background(), u)
		} else {
			_, err = Open(context.Background(), u)
		}
		if err == nil {
			t.Fatalf("%s opened", u)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error leaks %q: %v", s, err)
			}
		}
	}
	msg := redactText(`Get "https://h.example/b/k?X-Amz-Signature=abc&X-Amz-Credential=AKIA": dial tcp`)
	if strings.Contains(msg, "Signature") || !strings.Contains(msg, "https://h.example/b/k?…") {
		t.Errorf("redactText: %s", msg)
	}
	var ne *url.Error
	wrapped := sanitize(&url.Error{Op: "Get", URL: "http://u:p@h/x?sig=1", Err: errors.New("refused")})
	if !errors.As(wrapped, &ne) || strings.Contains(wrapped.Error(), "sig=1") || strings.Contains(wrapped.Error(), "u:p") {
		t.Errorf("sanitize: %v", wrapped)
	}
}
