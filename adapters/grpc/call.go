package sluicegrpc

import (
	"context"
	"net/netip"
	"sync"

	"google.golang.org/grpc/metadata"
)

// Call is one call as a KeyFunc, CostFunc or Skip function sees it. It is
// valid only during the function call it is passed to: do not keep it.
type Call struct {
	// FullMethod is the method called, "/package.Service/Method".
	FullMethod string
	// Request is the request message of a unary call; nil for a stream,
	// whose messages arrive after it was admitted.
	Request any
	// IsClientStream and IsServerStream describe a streaming call; both
	// are false for a unary one.
	IsClientStream bool
	IsServerStream bool

	ctx      context.Context
	p        *Policy
	client   netip.Prefix
	resolved bool
}

var callPool = sync.Pool{New: func() any { return new(Call) }}

func (p *Policy) newCall(ctx context.Context, method string, req any, cs, ss bool) *Call {
	c := callPool.Get().(*Call)
	*c = Call{FullMethod: method, Request: req, IsClientStream: cs, IsServerStream: ss, ctx: ctx, p: p}
	return c
}

func freeCall(c *Call) {
	*c = Call{}
	callPool.Put(c)
}

// Context returns the call's context: for a stream, the stream's. The
// values earlier interceptors attached (an authenticated identity) are in
// it, and so are the incoming metadata and the peer.
func (c *Call) Context() context.Context { return c.ctx }

// Value returns the value an earlier interceptor stored in the call's
// context under key, or nil.
func (c *Call) Value(key any) any { return c.ctx.Value(key) }

// Metadata returns the values of the incoming metadata key (lower case, as
// gRPC delivers it), as the client or a proxy sent them.
func (c *Call) Metadata(key string) []string {
	return metadata.ValueFromIncomingContext(c.ctx, key)
}

// Client returns the client's address grouped by the configured prefix
// lengths: for example 203.0.113.7/32, or 2001:db8:1:2::/64. The address is
// the connection's peer address, or, when that peer is a trusted proxy, the
// first untrusted hop of the forwarding metadata read from the right. It
// returns the zero Prefix (IsValid false) when the peer is not an IP
// address (a Unix socket).
func (c *Call) Client() netip.Prefix {
	if !c.resolved {
		if a, ok := c.p.clientAddr(c); ok {
			c.client = c.p.group(a)
		}
		c.resolved = true
	}
	return c.client
}

// clientKey is the identity of the client address, built as the HTTP
// policy builds it: "ip:", then the prefix in binary (its 16-byte address,
// then its length; an IPv4 prefix is told apart by a length above 128).
// Every peer that is not an IP address shares the identity "ip:unknown".
func (c *Call) clientKey() string {
	pfx := c.Client()
	if !pfx.IsValid() {
		return "ip:unknown"
	}
	var buf [20]byte
	b := append(buf[:0], "ip:"...)
	a := pfx.Addr().As16()
	b = append(b, a[:]...)
	bits := pfx.Bits()
	if pfx.Addr().Is4() {
		bits += 129
	}
	return string(append(b, byte(bits)))
}

// identity is the key of layer l for c. A KeyFunc's value is set apart from
// client addresses by its "k:" prefix, so no key can collide with the
// address fallback of another call.
func (l *layer) identity(c *Call) string {
	if l.key != nil {
		if k := l.key(c); k != "" {
			return KeyIdentity(k)
		}
	}
	return c.clientKey()
}
