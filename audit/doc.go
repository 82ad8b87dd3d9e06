// Package audit decides whether files are safe and valid to load, the
// way `safetensors scan` and `safetensors validate` do, for any program
// that audits models: a registry's upload hook, a bucket audit, the HTTP
// service. The CLI and the service only print what it decides.
//
// [Scan] audits the files of a location for code that would run on load:
// every pickle of a PyTorch checkpoint is decoded by an inert interpreter
// and every global it names is checked against the allowlist, a
// safetensors file is validated (and checked for being a tar archive
// torch.load would also read), and each file gets a [Verdict]. [Validate]
// checks safetensors files and sharded models against the reference
// implementation's rules. Both take a location and expand it into files
// with [Targets]: a file or object as it is (whatever its name), a local
// directory walked recursively, a sharded model's index (scanned as its
// shards), a Hub repository (its model), a bucket prefix ending in '/'
// (every object listed). Reports stream out in target order as they are
// done, a bounded number at a time, so memory does not grow with the
// number of files.
//
// Formats are recognised by content, never by name. Reports marshal to
// the JSON that `scan --json` and `validate --json` print; docs/json.md
// documents the schema.
package audit
