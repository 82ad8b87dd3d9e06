package sharded

import (
	"context"
	"errors"
	"testing"

	"github.com/gosafetensors/safetensors"
)

type panicOpener struct{}

func (panicOpener) OpenShard(ctx context.Context, name string) (safetensors.Source, error) {
	panic("injected bug")
}

// TestShardPanicIsError: a panic while a shard is opened, on the
// goroutine that opens it, is an error wrapping safetensors.ErrInternal
// naming the index and the shard, not the end of the process.
func TestShardPanicIsError(t *testing.T) {
	idx, err := ParseIndex([]byte(`{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`), "m.index.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenIndex(context.Background(), idx, "m.index.json", panicOpener{})
	if !errors.Is(err, safetensors.ErrInternal) {
		t.Fatalf("OpenIndex: %v", err)
	}
	t.Log(err)
}
