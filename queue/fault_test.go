//go:build linux

package queue_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/queue"
)

// child is a worker process and what its log says.
type child struct {
	cmd      *exec.Cmd
	mu       sync.Mutex
	inflight map[string]bool     // result keys being audited
	written  map[string][]string // result key -> the verdict of each document written
	log      strings.Builder
	drained  bool
	done     chan struct{} // the log is read to its end
}

func startChild(t *testing.T, env []string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, "QUEUE_TEST_WORKER=1")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, inflight: map[string]bool{}, written: map[string][]string{}, done: make(chan struct{})}
	go c.read(stderr)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return c
}

func (c *child) read(r io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct{ Msg, Key, Verdict string }
		json.Unmarshal(sc.Bytes(), &rec)
		c.mu.Lock()
		switch rec.Msg {
		case "auditing":
			c.inflight[rec.Key] = true
		case "result written":
			delete(c.inflight, rec.Key)
			c.written[rec.Key] = append(c.written[rec.Key], rec.Verdict)
		case "audit failed: will be tried again":
			delete(c.inflight, rec.Key)
		case "drained":
			c.drained = true
		}
		if rec.Msg != "auditing" && rec.Msg != "result written" {
			c.log.Write(sc.Bytes())
			c.log.WriteByte('\n')
		}
		c.mu.Unlock()
	}
}

func (c *child) inFlight() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return keys(c.inflight)
}

// peakRSS reads the process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// The pool under faults: events for clean, dangerous, broken and
// safetensors uploads, three worker processes sharing one consumer, one
// SIGKILLed mid-audit and started again, one SIGTERMed (it drains and
// exits 0). Every object ends with exactly one result document, with the
// verdict scan gives its bytes; the messages the killed worker held are
// delivered again to the others; each worker's peak RSS stays under
// 100 MB. Every document any worker writes agrees with that verdict, an
// object uploaded again with the same bytes included.
// 60 objects by default, 1,000 with GOSAFETENSORS_LONG=1.
func TestFaultPool(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	n, delay := 60, 40*time.Millisecond
	if os.Getenv("GOSAFETENSORS_LONG") == "1" {
		n, delay = 1000, 15*time.Millisecond
	}
	fx := fixtures(t)
	s := newStore(t, "uploads")
	s.delay.Store(int64(delay)) // so that audits are in flight when a worker dies
	srv := startNATS(t)
	_, js := connect(t, srv)
	ensureStream(t, js, queue.DefaultSubject)
	results := t.TempDir()
	type upload struct {
		key, etag string
		f         fixture
	}
	ups := map[string]upload{}
	for i := range n {
		f := fx[i%len(fx)]
		key := fmt.Sprintf("in/%04d-%s.bin", i, f.kind)
		etag := s.put(t, "uploads", key, f.data)
		ev := queue.Event{Bucket: "uploads", Key: key, ETag: etag}
		ups[queue.ResultKey(&ev)] = upload{key, etag, f}
		publish(t, js, queue.DefaultSubject, s3Event("uploads", key, etag, len(f.data), i))
	}
	env := []string{"QUEUE_NATS=" + srv.ClientURL(), "QUEUE_RESULTS=file://" + filepath.ToSlash(results), "QUEUE_LOCATION=" + s.location()}
	var workers, all []*child
	for range 3 {
		workers = append(workers, startChild(t, env))
	}
	all = append(all, workers...)
	const maxRSS = 100 << 20 // measured: 25 MB
	rss := map[string]int64{}

	// SIGKILL worker 0 while it audits, a quarter of the way, and start
	// another in its place. It is stopped first (SIGSTOP), so that what it
	// holds unfinished — an audit logged as started, no result written —
	// is known for certain when it dies.
	var killedHeld []string
	waitFor(t, 2*time.Minute, "a quarter of the results and worker 0 mid-audit", func() bool {
		if countResults(results) < n/4 || len(workers[0].inFlight()) == 0 {
			return false
		}
		workers[0].cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(100 * time.Millisecond) // the log read to what it wrote
		for _, k := range workers[0].inFlight() {
			if _, err := os.Stat(filepath.Join(results, filepath.FromSlash(k))); os.IsNotExist(err) {
				killedHeld = append(killedHeld, k)
			}
		}
		if len(killedHeld) == 0 {
			workers[0].cmd.Process.Signal(syscall.SIGCONT)
		}
		return len(killedHeld) > 0
	})
	rss["killed"] = peakRSS(t, workers[0].cmd.Process.Pid)
	workers[0].cmd.Process.Signal(syscall.SIGKILL)
	workers[0].cmd.Wait()
	<-workers[0].done
	workers[0] = startChild(t, env)
	all = append(all, workers[0])
	// Every 20th object uploaded again with the same bytes (a new
	// sequencer, the same ETag): it is read and its document written a
	// second time, and both must agree.
	var again2 []string
	for i := 0; i < n; i += 20 {
		f := fx[i%len(fx)]
		key := fmt.Sprintf("in/%04d-%s.bin", i, f.kind)
		ev := queue.Event{Bucket: "uploads", Key: key, ETag: s.put(t, "uploads", key, f.data)} // the same ETag
		again2 = append(again2, queue.ResultKey(&ev))
		publish(t, js, queue.DefaultSubject, s3Event("uploads", key, ev.ETag, len(f.data), n+i))
	}

	// SIGTERM worker 1 half way, while it audits: it drains (every audit
	// it started ends in a result it wrote) and exits 0.
	waitFor(t, 2*time.Minute, "half the results and worker 1 mid-audit", func() bool {
		return countResults(results) >= n/2 && len(workers[1].inFlight()) > 0
	})
	rss["terminated"] = peakRSS(t, workers[1].cmd.Process.Pid)
	termHeld := len(workers[1].inFlight())
	workers[1].cmd.Process.Signal(syscall.SIGTERM)
	if err := workers[1].cmd.Wait(); err != nil {
		t.Fatalf("the SIGTERMed worker: %v\n%s", err, workers[1].log.String())
	}
	<-workers[1].done
	if !workers[1].drained {
		t.Errorf("the SIGTERMed worker did not drain:\n%s", workers[1].log.String())
	}
	if left := workers[1].inFlight(); len(left) != 0 {
		t.Errorf("the SIGTERMed worker exited with audits it started unfinished: %v", left)
	}

	waitFor(t, time.Minute+time.Duration(n)*200*time.Millisecond, fmt.Sprintf("%d results", n), func() bool { return countResults(results) >= n })
	waitFor(t, 30*time.Second, "every message acknowledged", func() bool { return pending(t, js) == 0 })
	for name, w := range map[string]*child{"restarted": workers[0], "untouched": workers[2]} {
		rss[name] = peakRSS(t, w.cmd.Process.Pid)
		w.cmd.Process.Signal(syscall.SIGTERM)
		if err := w.cmd.Wait(); err != nil {
			t.Errorf("worker: %v\n%s", err, w.log.String())
		}
	}
	for k, v := range rss {
		if v > maxRSS {
			t.Errorf("%s worker: peak RSS %d MB, want at most %d MB", k, v>>20, maxRSS>>20)
		}
	}

	docs := readResults(t, results)
	want := maps.Clone(ups)
	temps := 0
	redelivered := 0
	for k, r := range docs {
		if r == nil {
			temps++ // a write the SIGKILL cut short
			continue
		}
		u, ok := ups[filepath.ToSlash(k)]
		if !ok {
			t.Errorf("a document for no upload: %s %+v", k, r)
			continue
		}
		if !sameReport(r.ScanReport, u.f.want) || r.Key != u.key || r.ETag != u.etag || r.Changed {
			t.Errorf("%s: verdict %v (%+v), want %v", u.key, r.Verdict, r, u.f.want.Verdict)
		}
		if r.Attempts > 1 {
			redelivered++
		}
		delete(ups, filepath.ToSlash(k))
	}
	// Every document any worker logged as written — those a later
	// delivery overwrote too — agrees with the verdict scan gives the
	// bytes. (A worker killed between a write and its log line wrote one
	// not counted here; it is the document checked above.)
	rewritten := 0
	for _, c := range all {
		<-c.done
	}
	writes := map[string]int{}
	for _, c := range all {
		for k, vs := range c.written {
			writes[k] += len(vs)
			for _, v := range vs {
				if u, ok := want[k]; ok && v != u.f.want.Verdict.String() {
					t.Errorf("%s: a document with the verdict %s was written, want %v", u.key, v, u.f.want.Verdict)
				}
			}
		}
	}
	for _, n := range writes {
		if n > 1 {
			rewritten++
		}
	}
	for _, k := range again2 {
		if writes[k] < 2 {
			t.Errorf("%s uploaded twice: %d documents written, want 2", k, writes[k])
		}
	}
	if len(ups) != 0 {
		t.Errorf("%d objects without a result: %v", len(ups), keys(ups))
	}
	if temps > 2 {
		t.Errorf("%d temporary files left", temps)
	}
	// what the killed worker held unfinished was audited again by the others
	again := 0
	for _, k := range killedHeld {
		if r := docs[filepath.FromSlash(k)]; r != nil && r.Attempts > 1 {
			again++
		}
	}
	if again != len(killedHeld) {
		t.Errorf("of the %d objects the killed worker held unfinished (%v), %d were delivered again", len(killedHeld), killedHeld, again)
	}
	t.Logf("%d objects, %d results redelivered (%d of the %d the killed worker held), %d objects' documents written twice, all agreeing; %d temporary files; the SIGTERMed worker drained %d audits; peak RSS %v MB",
		n, redelivered, again, len(killedHeld), rewritten, temps, termHeld, mb(rss))
}

func mb(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = v >> 20
	}
	return out
}
