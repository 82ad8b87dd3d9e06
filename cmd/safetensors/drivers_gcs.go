//go:build gcs || allclouds

package main

import _ "github.com/gosafetensors/safetensors/remote/blobstore/gcsstore" // gs://
