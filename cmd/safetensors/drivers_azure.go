//go:build azure || allclouds

package main

import _ "github.com/gosafetensors/safetensors/remote/blobstore/azurestore" // azblob://
