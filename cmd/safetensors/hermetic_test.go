package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/gosafetensors/safetensors/internal/hubtest"
)

// afterTests are run by TestMain once every test has finished.
var afterTests []func()

// TestMain keeps the user's Hugging Face cache and token out of the tests.
func TestMain(m *testing.M) {
	cleanup, err := hubtest.Hermetic()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	cleanup()
	os.Exit(code)
}
