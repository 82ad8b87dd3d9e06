package fetch

import (
	"context"
	"fmt"
)

// Pool hands out at most n buffers of size bytes, allocated on first use
// and reused: Get blocks while all of them are out. With Get as a Run's
// Buffers (through [Pool.Buffers]) and Put after a chunk is consumed,
// memory is bounded by n × size whatever the consumer's pace.
type Pool struct {
	size int64
	free chan []byte
	made chan struct{} // one token per buffer not yet allocated
}

// NewPool returns a pool of n buffers of size bytes.
func NewPool(n int, size int64) (*Pool, error) {
	if n < 1 || size < 1 {
		return nil, fmt.Errorf("%w: pool of %d buffers of %d bytes", ErrConfig, n, size)
	}
	p := &Pool{size: size, free: make(chan []byte, n), made: make(chan struct{}, n)}
	for range n {
		p.made <- struct{}{}
	}
	return p, nil
}

// Get returns a buffer of the pool's size, waiting for one to be put back
// when all are in use.
func (p *Pool) Get(ctx context.Context) ([]byte, error) {
	select {
	case b := <-p.free:
		return b, nil
	default:
	}
	select {
	case b := <-p.free:
		return b, nil
	case <-p.made:
		return make([]byte, p.size), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Put gives a buffer from Get back.
func (p *Pool) Put(b []byte) {
	p.free <- b[:p.size:p.size]
}

// Buffers gets one buffer and cuts it into c's pieces, for Config.Buffers.
// Give it back with PutChunk.
func (p *Pool) Buffers(ctx context.Context, c *Chunk) ([][]byte, error) {
	if c.Bytes > p.size {
		return nil, fmt.Errorf("%w: a %d-byte chunk does not fit the pool's %d-byte buffers", ErrConfig, c.Bytes, p.size)
	}
	b, err := p.Get(ctx)
	if err != nil {
		return nil, err
	}
	return Cut(b, c), nil
}

// PutChunk gives back the buffer that Buffers cut for a chunk.
func (p *Pool) PutChunk(bufs [][]byte) {
	if len(bufs) > 0 {
		p.Put(bufs[0][:0])
	}
}

// Cut slices b (at least c.Bytes long) into consecutive buffers, one per
// piece of c.
func Cut(b []byte, c *Chunk) [][]byte {
	bufs := make([][]byte, len(c.Pieces))
	pos := int64(0)
	for i, pc := range c.Pieces {
		bufs[i] = b[pos : pos+pc.Len : pos+pc.Len]
		pos += pc.Len
	}
	if len(bufs) > 0 {
		bufs[0] = b[:len(bufs[0])] // keeps the whole buffer's capacity, for PutChunk
	}
	return bufs
}
