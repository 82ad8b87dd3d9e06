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

// Every IPv6 form that embeds an IPv4 address is judged by the IPv4
// address: the metadata address, loopback and private ranges are refused
// in all of them, public ones pass (an IPv6-only host behind DNS64 reaches
// the Hub through 64:ff9b::/96). Teredo is refused whatever it embeds.
func TestEmbeddedIPv4Forms(t *testing.T) {
	p := &addrPolicy{}
	for _, tc := range []struct {
		addr    string
		allowed bool
	}{
		{"::ffff:169.254.169.254", false},      // mapped
		{"::ffff:0:a9fe:a9fe", false},          // SIIT translated ::ffff:0:0:0/96 (F10)
		{"::ffff:0:7f00:1", false},             // translated loopback
		{"::ffff:0:a00:1", false},              // translated 10.0.0.1
		{"::ffff:0:808:808", true},             // translated 8.8.8.8
		{"::a9fe:a9fe", false},                 // compatible ::/96
		{"::a00:1", false},                     // compatible 10.0.0.1
		{"64:ff9b::a9fe:a9fe", false},          // NAT64 well-known
		{"64:ff9b::c0a8:1", false},             // NAT64 192.168.0.1
		{"64:ff9b::808:808", true},             // NAT64 8.8.8.8 (DNS64)
		{"64:ff9b:1:a9fe:a9:fe00::", false},    // local-use NAT64, /48 layout
		{"64:ff9b:1::a9fe:a9fe", false},        // local-use NAT64, /96 layout
		{"64:ff9b:1:ff:a9:fea9:fe00:0", false}, // local-use NAT64, /56 layout
		{"64:ff9b:1:0:a9:fea9:fe00:0", false},  // local-use NAT64, /64 layout
		{"2002:a9fe:a9fe::1", false},           // 6to4
		{"2002:7f00:1::1", false},              // 6to4 loopback
		{"2002:808:808::1", true},              // 6to4 of 8.8.8.8
		{"2001:0:a9fe:a9fe::1", false},         // Teredo server 169.254.169.254
		{"2001:0:808:808::5601:5601", false},   // Teredo client (inverted) 169.254.169.254
		{"2001:0:808:808::f7f7:f7f7", false},   // Teredo: refused whatever it embeds
	} {
		err := p.check(netip.MustParseAddr(tc.addr))
		if got := err == nil; got != tc.allowed {
			t.Errorf("%s: %v, want allowed=%v", tc.addr, err, tc.allowed)
		}
	}
	// An --allow-address for the IPv4 range allows its embedded forms too.
	p.allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	if err := p.check(netip.MustParseAddr("64:ff9b::a00:1")); err != nil {
		t.Errorf("64:ff9b::10.0.0.1 with 10.0.0.0/8 allowed: %v", err)
	}
}
