package torch

import (
	"bytes"
	"crypto/sha256"
	"sync"
	"testing"
)

// TestConcurrentWriteTo streams every tensor of one checkpoint from many
// goroutines at once, including the first reads that verify storage CRCs;
// run with -race.
func TestConcurrentWriteTo(t *testing.T) {
	for _, name := range []string{"../testdata/torch/tiny_transformer.bin", "../testdata/torch/noncontiguous.pt", "../testdata/torch/tiny_transformer_legacy.bin"} {
		c, err := Open(name)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][32]byte{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range c.Tensors() {
					tn := c.Tensors()[(i+g)%len(c.Tensors())]
					var buf bytes.Buffer
					if _, err := tn.WriteTo(&buf); err != nil {
						t.Error(err)
						return
					}
					sum := sha256.Sum256(buf.Bytes())
					mu.Lock()
					if w, ok := want[tn.Name]; ok && w != sum {
						t.Errorf("%s: tensor %q differs between goroutines", name, tn.Name)
					}
					want[tn.Name] = sum
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		c.Close()
	}
}
