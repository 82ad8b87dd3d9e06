package blobstore

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// heavy are the import path prefixes of cloud SDKs and what they bring
// (gocloud's core alone pulls gRPC, protobuf, the Google API client and
// OpenTelemetry: 378 packages, 677 MB of module cache).
var heavy = []string{"gocloud.dev", "cloud.google.com/", "github.com/Azure/", "github.com/aws/", "google.golang.org/", "go.opentelemetry.io/", "github.com/googleapis/"}

func goListDeps(t *testing.T, tags string, pkgs ...string) (all, nonStd []string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH:", err)
	}
	args := []string{"list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(goTool, append(args, pkgs...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(l, " ")
		all = append(all, path)
		if std != "true" {
			nonStd = append(nonStd, path)
		}
	}
	return all, nonStd
}

func heavyOf(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		for _, h := range heavy {
			if strings.HasPrefix(p, h) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// TestLeanDependencies: a library user who reads local files, HTTP and the
// Hub compiles no cloud SDK, and at most 150 packages outside the standard
// library (net/http alone is 185 standard packages, so the total with the
// standard library is reported, not bounded by 150). The default CLI build
// carries the AWS SDK (s3://) and no other cloud SDK.
func TestLeanDependencies(t *testing.T) {
	lib := []string{".", "./source", "./remote", "./sharded", "./torch", "./convert"}
	all, nonStd := goListDeps(t, "", lib...)
	t.Logf("local-and-HTTP library: %d packages, %d outside the standard library", len(all), len(nonStd))
	if h := heavyOf(all); len(h) > 0 {
		t.Errorf("the library compiles cloud SDK packages: %v", h)
	}
	if len(nonStd) > 150 {
		t.Errorf("the library compiles %d non-standard packages, budget 150", len(nonStd))
	}
	cli, cliNonStd := goListDeps(t, "", "./cmd/safetensors")
	t.Logf("default CLI: %d packages, %d outside the standard library", len(cli), len(cliNonStd))
	for _, p := range heavyOf(cli) {
		// protobuf's runtime (no gRPC, no generated Google APIs) comes with
		// prometheus/client_golang, for serve's /metrics
		if !strings.HasPrefix(p, "github.com/aws/") && !strings.HasPrefix(p, "google.golang.org/protobuf/") {
			t.Errorf("the default CLI compiles %s", p)
		}
	}
	if len(cliNonStd) > 300 {
		t.Errorf("the default CLI compiles %d non-standard packages, budget 300", len(cliNonStd))
	}
}
