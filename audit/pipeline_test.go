package audit

import (
	"context"
	"iter"
	"strconv"
	"sync/atomic"
	"testing"
)

// The pipeline yields in target order, holds at most its concurrency in
// flight and as many done reports, however many targets there are (the
// memory bound of an audit of a million objects), and stops pulling
// targets when the consumer stops.
func TestPipelineBounded(t *testing.T) {
	const n, workers = 5000, 4
	var pulled, checked, inFlight, maxInFlight, consumed atomic.Int64
	var maxAhead int64
	targets := iter.Seq2[Target, error](func(yield func(Target, error) bool) {
		for i := range n {
			pulled.Add(1)
			if ahead := pulled.Load() - consumed.Load(); ahead > maxAhead {
				maxAhead = ahead
			}
			if !yield(Target{Location: strconv.Itoa(i)}, nil) {
				return
			}
		}
	})
	c := &config{concurrency: workers}
	check := func(ctx context.Context, t *Target, err error) string {
		k := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if k <= m || maxInFlight.CompareAndSwap(m, k) {
				break
			}
		}
		defer inFlight.Add(-1)
		checked.Add(1)
		return t.Location
	}
	i := 0
	never := func(error) string { panic("cut short") }
	for loc := range pipeline(context.Background(), c, targets, check, never) {
		if loc != strconv.Itoa(i) {
			t.Fatalf("report %d is for target %s", i, loc)
		}
		i++
		consumed.Add(1)
	}
	if i != n || checked.Load() != n {
		t.Fatalf("%d reports, %d checked, want %d", i, checked.Load(), n)
	}
	if maxInFlight.Load() > workers {
		t.Errorf("%d checks at once, want at most %d", maxInFlight.Load(), workers)
	}
	// pulled ahead of the consumer: the one being yielded, a queue of
	// workers and the workers themselves, plus the one waiting for a slot
	if limit := int64(2*workers + 2); maxAhead > limit {
		t.Errorf("targets pulled %d ahead of the consumer, want at most %d", maxAhead, limit)
	}

	pulled.Store(0)
	checked.Store(0)
	consumed.Store(0)
	for range pipeline(context.Background(), c, targets, check, never) {
		if consumed.Add(1) == 10 {
			break
		}
	}
	if p := pulled.Load(); p > 10+2*workers+2 {
		t.Errorf("stopping after 10 reports pulled %d targets", p)
	}
	if inFlight.Load() != 0 {
		t.Errorf("%d checks still running after the iterator returned", inFlight.Load())
	}
}

// A cancelled context ends the audit: the targets not yet checked are
// reported as not checked, never as clean.
func TestPipelineCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := &config{concurrency: 2}
	n := 0
	for r := range pipeline(ctx, c, c.targets(ctx, "../testdata/torch/", ScanCheck), func(ctx context.Context, t *Target, err error) *ScanReport {
		return c.scanTarget(ctx, t)
	}, func(err error) *ScanReport { return newScanReport("cut").fail(err) }) {
		n++
		if r.Verdict != Error {
			t.Fatalf("%s: %s after cancel", r.Path, r.Verdict)
		}
	}
	if n == 0 {
		t.Fatal("an audit cancelled before it began reported nothing")
	}
}
