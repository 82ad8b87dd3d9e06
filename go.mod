module github.com/gosafetensors/safetensors

go 1.26.8

require (
	github.com/go-json-experiment/json v1.27.2
	golang.org/x/sys v0.50.0
)
