package main

import (
	"errors"
	"testing"
)

// --max-expanded defaults to twice --max-upload (an upload that compresses
// as weights do), is taken as given otherwise, and a bad value of either
// expansion flag is a usage error naming the flag.
func TestServeExpandedFlags(t *testing.T) {
	base := serveFlags{maxUpload: "1GiB", maxHeader: "16MiB", maxConcurrent: 4, maxQueued: 32, maxExpansion: 32}
	lim, err := base.limits()
	if err != nil || lim.MaxExpandedBytes != 2<<30 || lim.MaxExpansionRatio != 32 {
		t.Errorf("defaults: %d, %d, %v", lim.MaxExpandedBytes, lim.MaxExpansionRatio, err)
	}
	fl := base
	fl.maxExpanded, fl.maxExpansion = "3MiB", 0
	if lim, err = fl.limits(); err != nil || lim.MaxExpandedBytes != 3<<20 || lim.MaxExpansionRatio != 0 {
		t.Errorf("--max-expanded 3MiB --max-expansion 0: %d, %d, %v", lim.MaxExpandedBytes, lim.MaxExpansionRatio, err)
	}
	for _, bad := range []serveFlags{
		func() serveFlags { f := base; f.maxExpanded = "0"; return f }(),
		func() serveFlags { f := base; f.maxExpanded = "lots"; return f }(),
		func() serveFlags { f := base; f.maxExpansion = -1; return f }(),
	} {
		_, err := bad.limits()
		var ee *exitError
		if !errors.As(err, &ee) || ee.Code != exitNoCheck {
			t.Errorf("%q %d: %v, want a usage error", bad.maxExpanded, bad.maxExpansion, err)
		}
	}
}
