//go:build !unix

package sharded

func checkSpace(string, int64) error { return nil }
