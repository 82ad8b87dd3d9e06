package audit

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/gosafetensors/safetensors/internal/bug"
)

// pipeline checks targets with c.concurrency workers and yields the
// reports in target order, each as soon as it and those before it are
// done. At most c.concurrency targets are in flight and as many reports
// wait to be yielded, however many targets there are. Stopping the
// iteration cancels the work and waits for the workers, so nothing runs
// after the iterator returns; every target is opened or released. When ctx
// ends before every target was pulled, the last report is cut's, so that
// an audit cut short never looks complete.
func pipeline[R any](ctx context.Context, c *config, targets iter.Seq2[Target, error], check func(context.Context, *Target, error) R, cut func(error) R) iter.Seq[R] {
	parent := ctx
	return func(yield func(R) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		queue := make(chan chan R, c.concurrency)
		sem := make(chan struct{}, c.concurrency)
		var workers sync.WaitGroup
		var stopped atomic.Bool // the producer stopped on ctx
		go func() {
			defer close(queue)
			defer func() {
				// a bug while listing: the audit is cut short, and says so
				if p := recover(); p != nil {
					res := make(chan R, 1)
					res <- cut(bug.Recovered("listing the targets", p))
					queue <- res
				}
			}()
			for t, err := range targets {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					t.Release()
					stopped.Store(true)
					return
				}
				res := make(chan R, 1)
				workers.Add(1)
				go func() {
					defer workers.Done()
					defer func() { <-sem }()
					res <- check(ctx, &t, err)
				}()
				select {
				case queue <- res:
				case <-ctx.Done():
					stopped.Store(true)
					return
				}
			}
		}()
		defer func() {
			cancel()
			for range queue { // let the producer finish
			}
			workers.Wait()
		}()
		for res := range queue {
			if !yield(<-res) {
				return
			}
		}
		if err := parent.Err(); err != nil && stopped.Load() {
			yield(cut(err))
		}
	}
}
