package torchoracle_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/internal/torchoracle"
)

var allow = []string{
	"collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter",
	"torch.FloatStorage", "torch.LongStorage", "torch.BoolStorage", "torch.HalfStorage",
	"_codecs.encode",
}

func testdata(name string) string { return filepath.Join("..", "..", "testdata", name) }

// TestOracleRefusesPayloads loads real payloads: the hook must name the
// global, stop torch.load there, and no marker file may appear.
func TestOracleRefusesPayloads(t *testing.T) {
	o := torchoracle.Shared(t, torchoracle.Options{Allow: allow, WeightsOnly: true})
	for _, c := range []struct{ file, global string }{
		{"malicious/reduce_posix_system_p0.pkl", "posix.system"},
		{"malicious/reduce_posix_system_p4.pkl", "posix.system"},
		{"malicious/torch_zip_os_system.bin", "posix.system"},
		{"malicious/torch_legacy_os_system.pt", "posix.system"},
		{"malicious/reduce_builtins_eval_p2.pkl", "__builtin__.eval"},
		{"malicious/reduce_subprocess_popen_p2.pkl", "commands.Popen"}, // protocol 2 writes the Python 2 name,
	} {
		r, err := o.Load(testdata(c.file))
		if err != nil {
			t.Fatal(err)
		}
		if r.Loaded || !r.OffAllowlist() || r.Refused[0] != c.global || len(r.Events) != 0 {
			t.Errorf("%s: loaded=%v refused=%v events=%v error=%q, want refused %s", c.file, r.Loaded, r.Refused, r.Events, r.Error, c.global)
		}
	}
	if _, err := os.Stat("/tmp/pwned_marker"); err == nil {
		t.Error("/tmp/pwned_marker exists: a payload ran (or an earlier run left it)")
	}
}

// TestOracleTensors loads real torch.save output and checks what it
// reports against the sidecar the fixtures were made with.
func TestOracleTensors(t *testing.T) {
	o := torchoracle.Shared(t, torchoracle.Options{Allow: allow, WeightsOnly: true})
	r, err := o.Load(testdata("torch/tied_weights.pt"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Loaded || r.OffAllowlist() || len(r.Tensors) == 0 {
		t.Fatalf("tied_weights.pt: %+v", r)
	}
	if !r.WeightsOnlyLoaded {
		t.Errorf("weights_only=True failed: %s", r.WeightsOnlyError)
	}
	for _, g := range r.Globals {
		if !slices.Contains(allow, g) {
			t.Errorf("global %s reported but not refused", g)
		}
	}
	for _, tn := range r.Tensors {
		if tn.SHA256 == "" || len(tn.SHA256) != 64 || tn.DType == "" {
			t.Errorf("tensor %+v", tn)
		}
	}
}

// TestOracleNarrowAllowlistAndTimeout: a global off a narrower allowlist is
// refused; the child is restarted after a file that does not finish.
func TestOracleNarrowAllowlistAndTimeout(t *testing.T) {
	o := torchoracle.Require(t, torchoracle.Options{Allow: []string{"collections.OrderedDict"}, Timeout: 2 * time.Second})
	r, err := o.Load(testdata("torch/tied_weights.pt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Loaded || !slices.Equal(r.Refused, []string{"torch._utils._rebuild_parameter"}) {
		t.Errorf("narrow allowlist: loaded=%v refused=%v", r.Loaded, r.Refused)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no fifo:", err)
	}
	r, err = o.Load(fifo) // torch blocks opening a FIFO nobody writes
	if err != nil {
		t.Fatal(err)
	}
	if !r.Timeout {
		t.Fatalf("fifo: %+v, want a timeout", r)
	}
	r, err = o.Load(testdata("torch/tied_weights.pt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Loaded || !slices.Equal(r.Refused, []string{"torch._utils._rebuild_parameter"}) {
		t.Fatalf("after a restart: %+v", r)
	}
}

// TestOracleSelfFD: fd 3 is the checkpoint torch opened, as in a user's
// process, so a tar member linked to /proc/self/fd/3 makes torch re-read
// the checkpoint (and find the payload) rather than block on a pipe.
func TestOracleSelfFD(t *testing.T) {
	o := torchoracle.Shared(t, torchoracle.Options{Allow: allow, WeightsOnly: true})
	r, err := o.Load(testdata("crafted/tar_symlink_storages_selffd.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Timeout || !r.OffAllowlist() {
		t.Fatalf("timeout=%v refused=%v error=%q", r.Timeout, r.Refused, r.Error)
	}
	t.Logf("refused %v", r.Refused)
}

func TestMain(m *testing.M) {
	code := m.Run()
	torchoracle.CloseShared()
	os.Exit(code)
}
