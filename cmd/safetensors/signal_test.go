//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	dir := t.TempDir() // outputs here, the input is shared
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
// convert that a signal comes in the middle; once per test binary, in a
// directory TestMain removes.
func bigCheckpoint(t *testing.T) (bin, in string) {
	t.Helper()
	bigOnce.Do(func() { bigBin, bigIn, bigErr = makeBigCheckpoint() })
	if bigErr != nil {
		t.Fatal(bigErr)
	}
	return bigBin, bigIn
}

var (
	bigOnce       sync.Once
	bigDir        string
	bigBin, bigIn string
	bigErr        error
)

func makeBigCheckpoint() (bin, in string, err error) {
	if bigDir, err = os.MkdirTemp("", "safetensors-signal-"); err != nil {
		return "", "", err
	}
	bin = filepath.Join(bigDir, "safetensors")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %v\n%s", err, out)
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
	in = filepath.Join(bigDir, "big.bin")
	return bin, in, torchtest.WriteFile(in, tensors, torchtest.Options{})
}

func init() {
	afterTests = append(afterTests, func() {
		if bigDir != "" {
			os.RemoveAll(bigDir)
		}
	})
}
