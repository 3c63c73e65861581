package nethttp

import (
	"net/http"
	"net/netip"

	"github.com/sluicehq/sluice/adapters/internal/clientip"
)

// This file decides who the client is: the connection's remote address,
// unless that peer is a trusted proxy, in which case the proxy's forwarding
// header is walked from right to left (the right end is what the nearest
// proxy wrote; anything further left may have been written by the client)
// and the first address that is not a trusted proxy is the client. The
// parsing is adapters/internal/clientip's, which the gRPC door shares.

// clientAddr returns the client's address, unmapped and without zone. ok is
// false when the connection's peer is not an IP address (a Unix socket).
func (p *Policy) clientAddr(r *http.Request) (netip.Addr, bool) {
	peer, ok := clientip.ParseHostPort(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !p.trusted(peer) {
		return peer, true
	}
	if p.forwarded {
		return clientip.WalkForwarded(r.Header[headerForwarded], peer, p.trusted), true
	}
	return clientip.WalkXFF(r.Header[headerXFF], peer, p.trusted), true
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

// group masks a to the configured prefix length.
func (p *Policy) group(a netip.Addr) netip.Prefix {
	bits := p.v6bits
	if a.Is4() {
		bits = p.v4bits
	}
	pfx, _ := a.Prefix(bits)
	return pfx
}
