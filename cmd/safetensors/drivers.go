//go:build !nos3

package main

// The bucket stores the CLI reads. S3 (and S3-compatible stores) are in
// every build; Google Cloud Storage and Azure Blob Storage are compiled in
// with build tags (drivers_gcs.go, drivers_azure.go), because their SDKs
// cost more to download and build than the rest of the CLI together: see
// docs/build.md for the measurements.
//
//	go install -tags gcs,azure ./cmd/safetensors   # or -tags allclouds
//	go install -tags nos3 ./cmd/safetensors        # no cloud SDK at all
import _ "github.com/gosafetensors/safetensors/remote/blobstore/s3store" // s3://
