package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the CLI writes to the terminal side,
// the test reads what a terminal would show from the other.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open the terminal side: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// onTerminal runs the CLI with stdout on a terminal and returns what the
// terminal received.
func onTerminal(t *testing.T, args ...string) string {
	t.Helper()
	m, s := openPTY(t)
	var got bytes.Buffer
	done := make(chan struct{})
	go func() {
		io.Copy(&got, m) // ends with EIO once the terminal side is closed
		close(done)
	}()
	var stderr bytes.Buffer
	run(args, s, &stderr)
	s.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("reading the terminal did not end")
	}
	return got.String()
}

// Verdicts are coloured on a terminal, unless NO_COLOR says otherwise, and
// never in a pipe.
func TestColourOnTerminalOnly(t *testing.T) {
	file := torchDir + "tiny_transformer.safetensors"
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	if out := onTerminal(t, "validate", file); !strings.Contains(out, "\x1b[32mok\x1b[0m") {
		t.Errorf("validate on a terminal: %q, want a green ok", out)
	}
	if out := onTerminal(t, "scan", file); !strings.Contains(out, "\x1b[32mclean\x1b[0m") {
		t.Errorf("scan on a terminal: %q, want a green clean", out)
	}
	t.Setenv("NO_COLOR", "1")
	if out := onTerminal(t, "validate", file); strings.Contains(out, "\x1b[") {
		t.Errorf("NO_COLOR=1: %q has escape codes", out)
	}
	t.Setenv("NO_COLOR", "")
	if _, out, _ := runCLI(t, "validate", file); strings.Contains(out, "\x1b[") {
		t.Errorf("piped: %q has escape codes", out)
	}
}
