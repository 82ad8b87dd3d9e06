package load_test

import (
	"errors"
	"testing"

	"github.com/gosafetensors/safetensors/load"
	"github.com/gosafetensors/safetensors/source"
)

// TestNewRefusesSourceOptions: options for opening a location, given to
// New, which opens nothing, are an error rather than silently ignored.
func TestNewRefusesSourceOptions(t *testing.T) {
	if _, err := load.New(nil, load.WithSourceOptions(source.WithSubfolder("sub"))); !errors.Is(err, load.ErrOption) {
		t.Errorf("New with WithSourceOptions: %v, want ErrOption", err)
	}
}
