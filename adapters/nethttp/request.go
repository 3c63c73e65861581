package nethttp

import (
	"net/http"
	"net/netip"
	"sync"
)

// Values looks up a value the application attached to a request after its
// own authentication. context.Context satisfies it; the gin and echo
// adapters look in the framework's own per-request store first.
type Values interface {
	Value(key any) any
}

// Request is one request as a KeyFunc, CostFunc or Skip function sees it:
// the *http.Request, the matched route, and the application's values. It
// is valid only during the call it is passed to: do not keep it.
type Request struct {
	*http.Request
	// Route is the route pattern the request matched: the ServeMux pattern
	// (Request.Pattern) for net/http, FullPath for gin, Path for echo. It
	// is "" when the framework matched no route, or when the net/http
	// middleware runs outside the mux (wrap the handler inside it instead:
	// mux.Handle(pattern, mw(handler))).
	Route string

	values   Values
	mux      bool // Route is the ServeMux pattern that serves it (Middleware)
	p        *Policy
	client   netip.Prefix
	resolved bool
}

var requestPool = sync.Pool{New: func() any { return new(Request) }}

func (p *Policy) newRequest(r *http.Request, route string, v Values) *Request {
	q := requestPool.Get().(*Request)
	*q = Request{Request: r, Route: route, values: v, p: p}
	return q
}

func freeRequest(q *Request) {
	*q = Request{}
	requestPool.Put(q)
}

// Value returns the value stored under key by the application (for
// net/http, in the request's context), or nil.
func (q *Request) Value(key any) any {
	if q.values != nil {
		return q.values.Value(key)
	}
	return q.Request.Context().Value(key)
}

// Client returns the client's address grouped by the configured prefix
// lengths: for example 203.0.113.7/32, or 2001:db8:1:2::/64. The address is
// the connection's remote address, or, when that peer is a trusted proxy,
// the first untrusted hop of the forwarding header read from the right. It
// returns the zero Prefix (IsValid false) when the peer is not an IP
// address (a Unix socket).
func (q *Request) Client() netip.Prefix {
	if !q.resolved {
		if a, ok := q.p.clientAddr(q.Request); ok {
			q.client = q.p.group(a)
		}
		q.resolved = true
	}
	return q.client
}

// clientKey is the identity of the client address: "ip:", then the
// prefix in binary (its 16-byte address, then its length; an IPv4 prefix
// is distinguished by a length above 128), which is cheaper to build than
// text and just as unique: core hashes identities, nobody reads them.
// Every peer that is not an IP address shares the identity "ip:unknown".
func (q *Request) clientKey() string {
	pfx := q.Client()
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

// identity is the key of layer l for q. A KeyFunc's value is set apart
// from client addresses by its "k:" prefix, so no key can collide with the
// address fallback of another request.
func (l *layer) identity(q *Request) string {
	if l.key != nil {
		if k := l.key(q); k != "" {
			return KeyIdentity(k)
		}
	}
	return q.clientKey()
}
