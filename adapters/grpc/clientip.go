package sluicegrpc

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// This file decides who the client is, by the HTTP policy's rules: the
// connection's peer address, unless that peer is a trusted proxy, in which
// case the proxy's forwarding metadata is walked from right to left (the
// right end is what the nearest proxy wrote; anything further left may have
// been written by the client) and the first address that is not a trusted
// proxy is the client. The walk is the HTTP policy's
// (adapters/nethttp/clientip.go), on metadata instead of header lines;
// TestClientAgreesWithHTTP holds the two to the same answers.

// clientAddr returns the client's address, unmapped and without zone. ok is
// false when the peer is not an IP address (a Unix socket, an in-process
// transport) or unknown.
func (p *Policy) clientAddr(c *Call) (netip.Addr, bool) {
	pr, ok := peer.FromContext(c.ctx)
	if !ok || pr.Addr == nil {
		return netip.Addr{}, false
	}
	var a netip.Addr
	switch addr := pr.Addr.(type) {
	case *net.TCPAddr:
		a = clean(addr.AddrPort().Addr())
		if !a.IsValid() {
			return netip.Addr{}, false
		}
	default:
		if a, ok = parseHostPort(addr.String()); !ok {
			return netip.Addr{}, false
		}
	}
	if !p.trusted(a) {
		return a, true
	}
	md, _ := metadata.FromIncomingContext(c.ctx)
	lines := md[p.proxyKey]
	if p.forwarded {
		return walkForwarded(lines, a, p.trusted), true
	}
	return walkXFF(lines, a, p.trusted), true
}

// trusted reports whether a is inside a TrustedProxies prefix.
func (p *Policy) trusted(a netip.Addr) bool {
	for _, pfx := range p.proxies {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// walkXFF walks x-forwarded-for values (joined in order, as one list) from
// the right. last is the trusted peer. It returns the first untrusted hop; at
// a hop that is not an address it stops and returns the last trusted hop,
// because the proxy that should have written a valid address there did not,
// and whatever lies further left cannot be trusted; when every hop is
// trusted it returns the leftmost.
func walkXFF(lines []string, last netip.Addr, trusted func(netip.Addr) bool) netip.Addr {
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		for {
			j := strings.LastIndexByte(s, ',')
			a, ok := parseNode(s[j+1:])
			if !ok {
				return last
			}
			if !trusted(a) {
				return a
			}
			last = a
			if j < 0 {
				break
			}
			s = s[:j]
		}
	}
	return last
}

// parseNode reads one forwarding hop, trimmed of optional white space:
// "192.0.2.1", "192.0.2.1:8080", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:8080", with an optional IPv6 zone that is dropped.
// IPv4-mapped IPv6 addresses become IPv4.
func parseNode(s string) (netip.Addr, bool) {
	s = strings.Trim(s, " \t")
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, false
		}
		return clean(a), true
	}
	if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		// One colon: IPv4 with a port.
		a, err := netip.ParseAddr(s[:i])
		if err != nil || !a.Is4() || !validPort(s[i+1:]) {
			return netip.Addr{}, false
		}
		return a, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return clean(a), true
}

// parseHostPort reads a peer address: "ip:port", "[ip6]:port", or a bare
// address.
func parseHostPort(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return clean(ap.Addr()), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return clean(a), true
	}
	return netip.Addr{}, false
}

func clean(a netip.Addr) netip.Addr { return a.WithZone("").Unmap() }

func validPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	n, _ := strconv.Atoi(s)
	return n <= 65535
}

// group masks a to the configured prefix length.
func (p *Policy) group(a netip.Addr) netip.Prefix {
	bits := p.v6bits
	if a.Is4() {
		bits = p.v4bits
	}
	pfx, _ := a.Prefix(bits)
	return pfx
}
