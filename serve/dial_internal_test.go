package serve

import (
	"errors"
	"net/netip"
	"testing"
)

// The address policy refuses every address that is not public unicast,
// whatever its spelling, and lets an explicit prefix through.
func TestAddressPolicy(t *testing.T) {
	p := &addrPolicy{}
	for _, s := range []string{
		"127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::", "0.1.2.3",
		"169.254.169.254", "169.254.0.1", "fe80::1", "fd00:ec2::254",
		"10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.0.1", "fc00::1", "::ffff:10.0.0.1",
		"100.64.0.1", "192.0.0.8", "198.18.0.1", "240.0.0.1", "255.255.255.255", "224.0.0.1", "ff02::1",
		"64:ff9b::a00:1", "2002:7f00:1::1", "2001:0::1", "2001:db8::1", "::127.0.0.1",
	} {
		err := p.check(netip.MustParseAddr(s))
		if !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("%s: %v, want refused", s, err)
		}
		var pe interface{ Permanent() bool }
		if !errors.As(err, &pe) || !pe.Permanent() {
			t.Errorf("%s: the refusal is not permanent (it would be retried)", s)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "172.32.0.1", "::ffff:8.8.8.8"} {
		if err := p.check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: %v, want allowed", s, err)
		}
	}
	p.allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}
	for _, s := range []string{"10.9.9.9", "127.0.0.1", "::ffff:127.0.0.1"} {
		if err := p.check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s allowed explicitly: %v", s, err)
		}
	}
	if err := p.check(netip.MustParseAddr("127.0.0.2")); err == nil {
		t.Error("127.0.0.2 allowed by 127.0.0.1/32")
	}
}

// Patterns match hosts and path segments, never across a host boundary
// or a segment unless asked ("**").
func TestPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern, loc string
		want         bool
	}{
		{"https://huggingface.co/**", "https://huggingface.co/org/repo/resolve/main/x.bin", true},
		{"https://huggingface.co/**", "https://huggingface.co.evil.example/x", false},
		{"https://*.example.com/models/*", "https://cdn.example.com/models/a.bin", true},
		{"https://*.example.com/models/*", "https://cdn.example.com/models/a/b.bin", false},
		{"https://*.example.com/models/*", "https://evil.com/x.example.com/models/a.bin", false},
		{"hf://my-org/**", "hf://my-org/model", true},
		{"hf://my-org/**", "hf://other/model", false},
		{"s3://b/in/**", "s3://b/in/x?endpoint=http://x", false},
		{"s3://b/in/**?*", "s3://b/in/x?endpoint=http://x", true},
		{"http://127.0.0.1:*/**", "http://127.0.0.1:8080/a", true},
		{"http://127.0.0.1:*/**", "https://127.0.0.1:8080/a", false},
	} {
		p, err := parsePattern(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		lp := &locationPolicy{patterns: []*pattern{p}}
		if got := lp.check(tc.loc) == nil; got != tc.want {
			t.Errorf("%s ~ %s: %v, want %v", tc.pattern, tc.loc, got, tc.want)
		}
	}
	for _, bad := range []string{"file:///srv/**", "huggingface.co/**", "https://user@host/**", "https:///x"} {
		if _, err := parsePattern(bad); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}
