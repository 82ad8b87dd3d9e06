package s3store

import (
	"os"
	"testing"

	"github.com/gosafetensors/safetensors/internal/hubtest"
)

// TestMain keeps the user's Hugging Face cache and token out of the tests.
func TestMain(m *testing.M) { os.Exit(hubtest.Main(m)) }
