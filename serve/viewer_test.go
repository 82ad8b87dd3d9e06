package serve_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/gosafetensors/safetensors/serve"
)

// chromium starts a real headless Chromium (Debian's chromium) with a
// fresh profile, or skips saying why.
func chromium(t *testing.T) (context.Context, *[]string) {
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH (apt-get install -y chromium): the viewer is not tested in a browser")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1600),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	var mu sync.Mutex
	var urls []string
	err = chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			urls = append(urls, e.Request.URL)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx, &urls
}

// artefacts is where the test keeps its screenshots: $SAFETENSORS_ARTIFACTS
// if set, else the test's temporary directory.
func artefacts(t *testing.T) string {
	if d := os.Getenv("SAFETENSORS_ARTIFACTS"); d != "" {
		os.MkdirAll(d, 0o755)
		return d
	}
	return t.TempDir()
}

// The viewer in real headless Chromium: a model's tensors grouped by
// layer with the Hub's totals, a dangerous checkpoint's verdict with the
// global that makes it so, an upload through the form; every request the
// page makes goes to the service (assets embedded, nothing from the
// Internet).
func TestViewerInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the viewer is not tested in Chromium")
	}
	ctx, urls := chromium(t)
	root := rootDir(t)
	ts := start(t, serve.WithRoot(root))
	dir := artefacts(t)

	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return v
	}
	screenshot := func(name string) {
		t.Helper()
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", p)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/?location=torch/tiny_transformer.safetensors"),
		chromedp.WaitVisible(chromedp.CSS("#tensors"))); err != nil {
		t.Fatal(err)
	}
	summary, tree, dtypes := text("#summary"), text("#tensors"), text("#dtypes-table")
	screenshot("viewer-model.png")
	if !contains(summary, "1.60K params", "F32", "35 tensors") {
		t.Errorf("summary %q", summary)
	}
	if !contains(tree, "[0-1] x2", "each 15 tensors", "fc_in", "F32 [16, 8]", "position_ids") {
		t.Errorf("tensor tree:\n%s", tree)
	}
	if !contains(dtypes, "F32", "I64") {
		t.Errorf("dtypes:\n%s", dtypes)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/?location=malicious/torch_zip_os_system.bin"),
		chromedp.WaitVisible(chromedp.CSS("#verdict"))); err != nil {
		t.Fatal(err)
	}
	verdict, scan := text("#verdict"), text("#scan")
	screenshot("viewer-dangerous.png")
	if strings.ToLower(strings.TrimSpace(verdict)) != "dangerous" || !contains(scan, "posix.system", "not allowed", "REDUCE") {
		t.Errorf("verdict %q\n%s", verdict, scan)
	}

	upload := filepath.Join(root, "malicious", "reduce_posix_system_p2.pkl")
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#file")),
		chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{upload}),
		chromedp.Click(chromedp.CSS("#upload")),
		chromedp.WaitVisible(chromedp.CSS("#verdict"))); err != nil {
		t.Fatal(err)
	}
	name, verdict, scan := text("#name"), text("#verdict"), text("#scan")
	screenshot("viewer-upload.png")
	if name != "reduce_posix_system_p2.pkl" || strings.ToLower(strings.TrimSpace(verdict)) != "dangerous" || !contains(scan, "posix.system") {
		t.Errorf("upload: name %q verdict %q\n%s", name, verdict, scan)
	}
	for _, u := range *urls {
		if !strings.HasPrefix(u, ts.URL+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page fetched %s", u)
		}
	}
}
