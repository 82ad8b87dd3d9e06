package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// screenLines is what a terminal shows of out: each line after carriage
// returns and erase-line sequences (other escape sequences dropped).
func screenLines(out string) []string {
	var lines []string
	for _, raw := range strings.Split(out, "\n") {
		var line []rune
		col := 0
		for i := 0; i < len(raw); i++ {
			switch c := raw[i]; {
			case c == '\r':
				col = 0
			case c == 0x1b && i+1 < len(raw) && raw[i+1] == '[':
				j := i + 2
				for j < len(raw) && (raw[j] < 0x40 || raw[j] > 0x7e) {
					j++
				}
				if j < len(raw) && raw[i+2:j] == "2" && raw[j] == 'K' {
					line, col = line[:0], 0
				}
				i = j
			default:
				r := []rune(raw[i:])[0]
				i += len(string(r)) - 1
				for len(line) <= col {
					line = append(line, ' ')
				}
				line[col] = r
				col++
			}
		}
		lines = append(lines, strings.TrimRight(string(line), " "))
	}
	return lines
}

// Ctrl-C during convert ends the progress line: the terminal shows the
// message on a clean line, no bar left beside it or above it.
func TestInterruptClearsProgressLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and writes 384 MiB")
	}
	bin, in := bigCheckpoint(t)
	m, s := openPTY(t)
	cmd := exec.Command(bin, "convert", in, filepath.Join(t.TempDir(), "out.safetensors"))
	cmd.Stderr, cmd.Stdout = s, s
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "TERM=xterm")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var got bytes.Buffer
	read := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		signalled := false
		for {
			n, err := m.Read(buf)
			got.Write(buf[:n])
			if !signalled && strings.Contains(got.String(), "converting") {
				cmd.Process.Signal(os.Interrupt)
				signalled = true
			}
			if err != nil {
				close(read)
				return
			}
		}
	}()
	err := cmd.Wait()
	<-read
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Logf("output %q", got.String())
		t.Skipf("convert ended with %v before it could be interrupted", err)
	}
	lines := screenLines(got.String())
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) != 1 || lines[0] != "safetensors: interrupted" {
		t.Fatalf("the terminal shows %q (raw %q)", lines, got.String())
	}
}
