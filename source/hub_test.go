package source

import (
	"testing"

	"github.com/gosafetensors/safetensors/internal/hubtest"
)

const hubCommit = hubtest.Commit

// serveHub serves dir as the Hub repository org/model on loopback.
func serveHub(t testing.TB, dir string) *hubtest.Server { return hubtest.Serve(t, dir) }
