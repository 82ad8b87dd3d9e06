// Package docscheck holds the tests that keep the project's documentation
// true: README.md stays a quickstart (at most 12 KB, starting with two
// commands that work on a fresh clone), CONTRIBUTING.md lists every package
// of the module, docs/dependencies.md names every module go.mod requires
// directly, and every relative link in README.md, CONTRIBUTING.md and docs/
// (and every docs/ path a Go file mentions) leads to a file and heading that
// exist. It has no code of its own.
package docscheck
