//go:build unix

package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/torch/torchtest"
)

// SIGINT or SIGTERM during convert leaves no temporary file behind and
// exits 130 or 143, like a shell reports.
func TestInterruptedConvertLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and writes 384 MiB")
	}
	bin, in := bigCheckpoint(t)
	dir := filepath.Dir(in)
	for _, sig := range []struct {
		s    syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}, {syscall.SIGHUP, 129}} {
		out := filepath.Join(dir, "out-"+strconv.Itoa(sig.code)+".safetensors")
		cmd := exec.Command(bin, "convert", in, out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// wait for the temporary output to appear
		deadline := time.Now().Add(20 * time.Second)
		for !hasTemp(t, dir) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		cmd.Process.Signal(sig.s)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != sig.code {
			if err == nil {
				t.Logf("%v: convert finished before the signal", sig.s)
				os.Remove(out)
				continue
			}
			t.Fatalf("%v: %v, want exit %d", sig.s, err, sig.code)
		}
		if hasTemp(t, dir) {
			t.Fatalf("%v left a temporary file", sig.s)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: the output appeared", sig.s)
		}
	}
}

func hasTemp(t *testing.T, dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			return true
		}
	}
	return false
}

// bigCheckpoint builds the CLI and a 384 MiB checkpoint, long enough to
// convert that a signal comes in the middle.
func bigCheckpoint(t *testing.T) (bin, in string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "safetensors")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const size = 64 << 20
	var tensors []torchtest.Tensor
	for i := range 6 {
		tensors = append(tensors, torchtest.Tensor{Name: "layers." + strconv.Itoa(i) + ".weight", DType: "F32", Shape: []int64{size / 4},
			DataSize: size, Fill: func(w io.Writer) error {
				buf := make([]byte, 1<<20)
				for left := int64(size); left > 0; left -= int64(len(buf)) {
					if _, err := w.Write(buf); err != nil {
						return err
					}
				}
				return nil
			}})
	}
	in = filepath.Join(dir, "big.bin")
	if err := torchtest.WriteFile(in, tensors, torchtest.Options{}); err != nil {
		t.Fatal(err)
	}
	return bin, in
}
