package sluicegrpc

import (
	"net"
	"net/netip"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sluicehq/sluice/adapters/internal/clientip"
)

// This file decides who the client is, by the HTTP policy's rules: the
// connection's peer address, unless that peer is a trusted proxy, in which
// case the proxy's forwarding metadata is walked from right to left (the
// right end is what the nearest proxy wrote; anything further left may have
// been written by the client) and the first address that is not a trusted
// proxy is the client. The walk is the HTTP policy's own
// (adapters/internal/clientip), on metadata instead of header lines.

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
		a = clientip.Clean(addr.AddrPort().Addr())
		if !a.IsValid() {
			return netip.Addr{}, false
		}
	default:
		if a, ok = clientip.ParseHostPort(addr.String()); !ok {
			return netip.Addr{}, false
		}
	}
	if !p.trusted(a) {
		return a, true
	}
	md, _ := metadata.FromIncomingContext(c.ctx)
	lines := md[p.proxyKey]
	if p.forwarded {
		return clientip.WalkForwarded(lines, a, p.trusted), true
	}
	return clientip.WalkXFF(lines, a, p.trusted), true
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
