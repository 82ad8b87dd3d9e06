package audit_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path"
	"path/filepath"

	"github.com/gosafetensors/safetensors/audit"
)

// Audit every object under a bucket prefix, with the verdicts `safetensors
// scan` gives. s3://registry/uploads/?region=… works the same way (the
// application blank-imports the drivers it uses); here a local directory
// is the bucket (file://), so the example needs no credentials.
func ExampleScan_bucket() {
	dir, err := os.MkdirTemp("", "audit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for name, src := range map[string]string{
		"uploads/model.bin":    "../testdata/torch/tiny_transformer.bin",
		"uploads/innocent.pkl": "../testdata/malicious/reduce_posix_system_p2.pkl",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			log.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dir, "uploads"), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	prefix := "file://" + filepath.ToSlash(dir) + "/uploads/"
	for r := range audit.Scan(context.Background(), prefix, audit.WithConcurrency(8)) {
		fmt.Printf("%s: %s (%s)", path.Base(r.Path), r.Verdict, r.Format)
		for _, g := range r.Globals {
			if g.Verdict != audit.Allowed {
				fmt.Printf(" %s", g)
			}
		}
		fmt.Println()
	}
	// Output:
	// innocent.pkl: dangerous (pickle) posix.system
	// model.bin: clean (zip)
}

// Validate a file against the reference implementation's rules (an index
// gets every check of a sharded model: shards present, tensors where it
// says).
func ExampleValidate() {
	for r := range audit.Validate(context.Background(), "../testdata/torch/tiny_transformer.safetensors") {
		fmt.Println(r.Status, *r.TensorCount, "tensors")
	}
	// Output: ok 35 tensors
}
