package compressed

import (
	"context"
	"sync"
)

// ordered runs work(i) for i in [0, n) on conc goroutines and calls emit(i,
// result) in order of i from the calling goroutine. At most 2*conc results
// are in flight, so memory is bounded by the window, not by n. The first
// error stops new work and is returned; so does ctx's cancellation, checked
// before each piece of work starts and before each result is emitted.
func ordered(ctx context.Context, n, conc int, work func(i int) ([]byte, error), emit func(i int, b []byte) error) error {
	if ctx.Done() != nil {
		inner, out := work, emit
		work = func(i int) ([]byte, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return inner(i)
		}
		emit = func(i int, b []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return out(i, b)
		}
	}
	if conc <= 1 {
		// One worker: no goroutines, no hand-offs between them.
		for i := range n {
			b, err := work(i)
			if err == nil {
				err = emit(i, b)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	type result struct {
		b   []byte
		err error
	}
	stop := make(chan struct{})
	window := make(chan chan result, 2*conc)
	jobs := make(chan int)
	var wg sync.WaitGroup
	slots := make([]chan result, n)
	go func() {
		defer close(window)
		defer close(jobs)
		for i := range n {
			ch := make(chan result, 1)
			slots[i] = ch
			select {
			case window <- ch:
			case <-stop:
				return
			}
			select {
			case jobs <- i:
			case <-stop:
				return
			}
		}
	}()
	for range conc {
		wg.Go(func() {
			for i := range jobs {
				b, err := work(i)
				slots[i] <- result{b, err}
			}
		})
	}
	var err error
	i := 0
	for ch := range window {
		if err != nil {
			continue // drain: the producer has stopped
		}
		r := <-ch
		err = r.err
		if err == nil {
			err = emit(i, r.b)
		}
		if err != nil {
			close(stop)
		}
		i++
	}
	wg.Wait()
	return err
}
