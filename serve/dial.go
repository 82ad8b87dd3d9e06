package serve

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrForbiddenAddress is the error of a connection refused because its
// address (after DNS resolution, on every redirect) is loopback,
// link-local, private, unspecified or otherwise not a public unicast
// address, and no [WithAllowAddresses] prefix allows it.
var ErrForbiddenAddress = errors.New("serve: address not allowed")

// specialPrefixes are ranges that are not public unicast destinations,
// besides what netip.Addr's predicates already name (loopback, private,
// link-local, multicast, unspecified).
var specialPrefixes = mustPrefixes(
	"0.0.0.0/8",          // "this network"
	"100.64.0.0/10",      // carrier-grade NAT
	"192.0.0.0/24",       // IETF protocol assignments
	"192.0.2.0/24",       // documentation
	"198.18.0.0/15",      // benchmarking
	"198.51.100.0/24",    // documentation
	"203.0.113.0/24",     // documentation
	"240.0.0.0/4",        // reserved, broadcast
	"100::/64",           // discard
	"2001::/23",          // IETF protocol assignments (Teredo, ORCHID...): refused whatever they embed
	"2001:db8::/32",      // documentation
	"fec0::/10",          // site-local (deprecated, still routed by some)
	"ff00::/8",           // multicast
	"169.254.169.254/32", // cloud metadata (also link-local)
	"fd00:ec2::254/128",  // AWS metadata over IPv6 (also private)
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// IPv6 forms that embed an IPv4 address: such an address is judged by the
// IPv4 address it embeds (a translator or relay would reach it).
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215: any RFC 6052 layout inside
	siitTranslated = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765 IPv4-translated
	v4Compatible   = netip.MustParsePrefix("::/96")           // deprecated IPv4-compatible
	sixToFour      = netip.MustParsePrefix("2002::/16")       // RFC 3056: 2002:AABB:CCDD::/48
	teredo         = netip.MustParsePrefix("2001::/32")       // RFC 4380: server and (inverted) client
)

// embeddedIPv4 returns the IPv4 addresses an IPv6 address embeds (every
// candidate where the layout is not fixed), or nil.
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	v4 := func(p ...byte) netip.Addr { return netip.AddrFrom4([4]byte{p[0], p[1], p[2], p[3]}) }
	switch {
	case nat64WellKnown.Contains(ip), siitTranslated.Contains(ip), v4Compatible.Contains(ip):
		return []netip.Addr{v4(b[12:]...)}
	case nat64Local.Contains(ip):
		// RFC 6052 layouts for prefixes /48, /56, /64 and /96 (bits 64-71
		// are the "u" octet, skipped).
		return []netip.Addr{
			v4(b[6], b[7], b[9], b[10]),
			v4(b[7], b[9], b[10], b[11]),
			v4(b[9], b[10], b[11], b[12]),
			v4(b[12:]...),
		}
	case sixToFour.Contains(ip):
		return []netip.Addr{v4(b[2:6]...)}
	case teredo.Contains(ip):
		return []netip.Addr{v4(b[4:8]...), v4(^b[12], ^b[13], ^b[14], ^b[15])}
	}
	return nil
}

// addrPolicy decides which addresses the service may connect to.
type addrPolicy struct {
	allow []netip.Prefix // explicitly allowed, even if special
}

// check returns nil if the service may connect to ip.
func (p *addrPolicy) check(ip netip.Addr) error {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	for _, a := range p.allow {
		if a.Contains(ip) {
			return nil
		}
	}
	for _, v4 := range embeddedIPv4(ip) {
		if err := p.check(v4); err != nil {
			return &addressError{ip: ip, why: fmt.Sprintf("an IPv6 form of %s, which is %s", v4, err.(*addressError).why)}
		}
	}
	why := ""
	switch {
	case !ip.IsValid():
		why = "not an IP address"
	case ip.IsLoopback():
		why = "loopback"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		why = "link-local (cloud metadata lives here)"
	case ip.IsPrivate():
		why = "private"
	case ip.IsUnspecified():
		why = "unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		why = "multicast"
	case ip.Zone() != "":
		why = "scoped"
	default:
		for _, s := range specialPrefixes {
			if s.Contains(ip) {
				why = "special-purpose (" + s.String() + ")"
				break
			}
		}
	}
	if why != "" {
		return &addressError{ip: ip, why: why}
	}
	return nil
}

// addressError is a refused address: permanent, never retried.
type addressError struct {
	ip  netip.Addr
	why string
}

func (e *addressError) Error() string {
	return fmt.Sprintf("%v: %s is %s", ErrForbiddenAddress, e.ip, e.why)
}
func (e *addressError) Unwrap() error   { return ErrForbiddenAddress }
func (e *addressError) Permanent() bool { return true }

// control runs after DNS resolution, on the address actually dialled,
// for every connection (redirects and retries included): a hostname that
// resolves to loopback, a DNS answer that changes between two lookups, a
// redirect to 169.254.169.254 all end here.
func (p *addrPolicy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &addressError{why: fmt.Sprintf("not an IP address (%q: %v)", address, err)}
	}
	return p.check(ap.Addr())
}

// client returns an HTTP client whose every connection is checked by p
// at dial time. It uses no proxy: a proxy would fetch what the check
// refuses on the service's behalf.
func (p *addrPolicy) client(counter func(int), reach *reachPolicy) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: &countingTransport{&reachTransport{tr, reach}, counter}, Timeout: 0}
}

// countingTransport counts response body bytes read, for /metrics.
type countingTransport struct {
	rt    http.RoundTripper
	count func(int)
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err == nil && resp.Body != nil && t.count != nil {
		resp.Body = &countingBody{resp.Body, t.count}
	}
	return resp, err
}

type countingBody struct {
	body interface {
		Read([]byte) (int, error)
		Close() error
	}
	count func(int)
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.count(n)
	return n, err
}

func (b *countingBody) Close() error { return b.body.Close() }
