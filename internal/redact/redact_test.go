package redact

import (
	"errors"
	"io/fs"
	"net/url"
	"strings"
	"testing"
)

func TestLocation(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"models/m.bin", "models/m.bin"},
		{"/srv/a?b#c.bin", "/srv/a?b#c.bin"}, // a local path is no URL
		{`C:\models\m.bin`, `C:\models\m.bin`},
		{"hf://org/repo", "hf://org/repo"},
		{"https://huggingface.co/org/repo/resolve/main/model.safetensors", "https://huggingface.co/org/repo/resolve/main/model.safetensors"},
		{"s3://b/k.bin?endpoint=" + url.QueryEscape("http://u:p@minio:9000") + "&X-Amz-Security-Token=FwoGZX&X-Amz-Signature=abc123", "s3://b/k.bin?…"},
		{"https://b.s3.amazonaws.com/k%20x?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIAX%2F2026&X-Amz-Signature=f00d", "https://b.s3.amazonaws.com/k%20x?…"},
		{"azblob://c/k?sv=2024&sig=s3cr3t%3D", "azblob://c/k?…"},
		{"https://user:hunter2@host.example/m.bin", "https://host.example/m.bin"},
		{"https://tok3n@host.example", "https://host.example"},
		{"https://host.example/m.bin?", "https://host.example/m.bin"},
		{"https://host.example/m.bin#access_token=abc", "https://host.example/m.bin"},
		{"s3://b/k?%zz", "s3://b/k?…"},
	} {
		got := Location(tc.in)
		if got != tc.want {
			t.Errorf("Location(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
		if again := Location(got); again != got {
			t.Errorf("Location is not idempotent on %q: %q", got, again)
		}
		if u, err := url.Parse(tc.in); err == nil && len(u.Scheme) > 1 && URL(u) != Location(u.String()) {
			t.Errorf("URL(%q) = %q", tc.in, URL(u))
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`Get "https://h.example/b/k?X-Amz-Signature=abc&X-Amz-Credential=AKIA": dial tcp: refused`, `Get "https://h.example/b/k?…": dial tcp: refused`},
		{"http://u:p@h/x?sig=1: failed", "http://h/x?…: failed"},
		{"http://u:p@h/x failed", "http://h/x failed"},
		{"s3://b/k?…: read bytes 0-9: EOF", "s3://b/k?…: read bytes 0-9: EOF"},
		{"see http://h/x#token=abc.", "see http://h/x?…."},
		{"no URL here: /srv/m?.bin", "no URL here: /srv/m?.bin"},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestError(t *testing.T) {
	loc := "s3://b/k.bin?endpoint=http%3A%2F%2Fminio&sig=hunter2"
	err := &fs.PathError{Op: "open", Path: loc, Err: fs.ErrNotExist}
	r := Error(err, loc)
	if strings.Contains(r.Error(), "hunter2") || r.Error() != "open s3://b/k.bin?…: file does not exist" {
		t.Errorf("Error: %v", r)
	}
	var pe *fs.PathError
	if !errors.Is(r, fs.ErrNotExist) || !errors.As(r, &pe) {
		t.Errorf("Error hides the cause: %v", r)
	}
	plain := errors.New("nothing secret")
	if Error(plain, loc) != plain || Error(nil, loc) != nil {
		t.Error("Error wraps what needs no redaction")
	}
}

func TestUnnamed(t *testing.T) {
	const loc = "https://u:p@h/x?sig=1"
	for _, tc := range [][2]string{
		{loc + ": HTTP 404", "HTTP 404"},
		{"https://h/x?…: HTTP 404", "HTTP 404"},
		{"https://h/y: HTTP 404", "https://h/y: HTTP 404"}, // another location stays
		{"read failed: " + loc + ": x", "read failed: " + loc + ": x"},
	} {
		if got := Unnamed(tc[0], loc); got != tc[1] {
			t.Errorf("Unnamed(%q) = %q, want %q", tc[0], got, tc[1])
		}
	}
	cause := errors.New("m.bin: read bytes 0-9: EOF")
	err := Wrap("m.bin", "reading failed", cause)
	if err.Error() != "m.bin: reading failed: read bytes 0-9: EOF" || !errors.Is(err, cause) {
		t.Errorf("Wrap: %v", err)
	}
}
