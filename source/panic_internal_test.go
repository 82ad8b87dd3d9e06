package source

import (
	"context"
	"errors"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// TestShardPanicIsError: a panic while an index's shard is opened, on the
// goroutine that opens it, is an error wrapping safetensors.ErrInternal,
// not the end of the process (a server auditing uploads).
func TestShardPanicIsError(t *testing.T) {
	open := func(context.Context, string) (*Object, error) { panic("injected bug") }
	_, err := openShards(context.Background(), "m.index.json", []string{"a.safetensors", "b.safetensors"}, open, &config{})
	if !errors.Is(err, safetensors.ErrInternal) {
		t.Fatalf("openShards: %v", err)
	}
}
