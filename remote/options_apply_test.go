package remote

import (
	"context"
	"errors"
	"testing"
)

// TestOpenRefusesHubOptions: the Hub's own options given to Open, which
// reads the URL it is given, are an error, not silently ignored; nothing
// is requested (the address is closed anyway).
func TestOpenRefusesHubOptions(t *testing.T) {
	for name, o := range map[string]Option{
		"WithEndpoint": WithEndpoint("https://hub.example"),
		"WithOffline":  WithOffline(true),
	} {
		if _, err := Open(context.Background(), "http://127.0.0.1:1/x", o); !errors.Is(err, ErrOption) {
			t.Errorf("Open with %s: %v, want ErrOption", name, err)
		}
		if _, err := NewHub(o, WithToken("")); err != nil {
			t.Errorf("NewHub with %s: %v", name, err)
		}
	}
}
