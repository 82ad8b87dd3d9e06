package main

// The CLI reference, docs/cli, is generated from the commands by the
// generator in gendocs.go (built only with -tags gendocs, so that
// github.com/spf13/cobra/doc stays out of the binary). TestCLIDocs fails
// while docs/cli differs from what it would write.
//
//go:generate go run -tags gendocs . gendocs ../../docs/cli
