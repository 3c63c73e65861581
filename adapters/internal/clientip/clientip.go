// Package clientip decides who a client is from its connection's peer
// and, behind a trusted proxy, the forwarding header the proxy wrote:
// X-Forwarded-For, or Forwarded (RFC 7239). It is the one parser the HTTP
// policy (adapters/nethttp) and the gRPC interceptors (adapters/grpc) share,
// so a client behind the same proxies is the same identity through every
// door.
package clientip

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The Forwarded header (RFC 7239):
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//	node              = nodename [ ":" node-port ]
//	nodename          = IPv4address / "[" IPv6address "]" / "unknown" / obfnode
//
// Each proxy appends one element; its "for" parameter is the node the proxy
// received the request from. An IPv6 node is bracketed and, because ':' and
// '[' are not token characters, quoted.

// hop is one element's "for" node: ok is false when the element has no
// usable address (missing, "unknown", obfuscated, or malformed).
type hop struct {
	addr netip.Addr
	ok   bool
}

// WalkForwarded is WalkXFF for Forwarded: it parses every element, then
// walks them from the right with the same rule.
func WalkForwarded(lines []string, last netip.Addr, trusted func(netip.Addr) bool) netip.Addr {
	var inline [16]hop
	hops := inline[:0]
	for _, line := range lines {
		hops = parseForwarded(line, hops)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		h := hops[i]
		if !h.ok {
			return last
		}
		if !trusted(h.addr) {
			return h.addr
		}
		last = h.addr
	}
	return last
}

// parseForwarded appends the hop of every element of one field line, in
// order. The line is split into elements from the right, at each comma
// outside a quoted string as seen from there: the right end is what the
// trusted proxies appended, well formed, so what the client wrote to the
// left (an unterminated quote) cannot swallow their elements, as it would
// if the line were read from the left. A malformed element becomes a hop
// that is not ok.
func parseForwarded(s string, hops []hop) []hop {
	first := len(hops)
	end, quoted := len(s), false
	for i := len(s) - 1; i >= -1; i-- {
		if i >= 0 {
			switch c := s[i]; {
			case c == '"' && (i == 0 || s[i-1] != '\\'):
				quoted = !quoted
				continue
			case quoted || c != ',':
				continue
			}
		}
		hops = append(hops, parseElement(s[i+1:end]))
		end = i
	}
	slices.Reverse(hops[first:])
	return hops
}

// parseElement reads one forwarded-element: its "for" node, or a hop that
// is not ok when the element is malformed, has no "for", or has two.
func parseElement(s string) hop {
	var h hop
	seen := false
	for i := 0; ; {
		i = skipOWS(s, i)
		if i >= len(s) {
			return h
		}
		if s[i] == ';' {
			i++
			continue
		}
		k := scanToken(s, i)
		if k == i || k >= len(s) || s[k] != '=' {
			return hop{}
		}
		key := s[i:k]
		val, j, ok := scanValue(s, k+1)
		if !ok {
			return hop{}
		}
		if strings.EqualFold(key, "for") {
			if seen {
				return hop{} // two "for" in one element: which one?
			}
			seen = true
			h.addr, h.ok = parseForNode(val)
		}
		if i = skipOWS(s, j); i < len(s) && s[i] != ';' {
			return hop{}
		}
	}
}

// parseForNode reads a "for" value: an IPv4 address or a bracketed IPv6
// address, with an optional port or obfuscated port. "unknown" and
// obfuscated identifiers ("_hidden") are valid but are not addresses.
func parseForNode(v string) (netip.Addr, bool) {
	host, port := v, ""
	if strings.HasPrefix(v, "[") {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host, port = v[1:end], v[end+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || !forPort(port) {
			return netip.Addr{}, false
		}
		return Clean(a), true
	}
	if i := strings.IndexByte(v, ':'); i >= 0 {
		host, port = v[:i], v[i:]
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() || !forPort(port) {
		return netip.Addr{}, false
	}
	return a, true
}

// forPort accepts "", ":8080" or an obfuscated port ":_abc".
func forPort(s string) bool {
	if s == "" {
		return true
	}
	if s[0] != ':' || len(s) < 2 {
		return false
	}
	s = s[1:]
	if s[0] != '_' {
		return validPort(s)
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return len(s) > 1
}

func skipOWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// scanToken returns the end of the token (RFC 9110 tchar run) at i.
func scanToken(s string, i int) int {
	for i < len(s) && isTchar(s[i]) {
		i++
	}
	return i
}

func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// scanValue reads a token or a quoted-string at i and returns its value and
// the index after it. A quoted-string with escapes is unescaped (which
// allocates; forwarding proxies do not escape, so this is rare).
func scanValue(s string, i int) (string, int, bool) {
	if i < len(s) && s[i] == '"' {
		i++
		start, escaped := i, false
		for ; i < len(s); i++ {
			switch s[i] {
			case '\\':
				escaped = true
				i++
			case '"':
				v := s[start:i]
				if escaped {
					v = unescape(v)
				}
				return v, i + 1, true
			}
		}
		return "", len(s), false // unterminated
	}
	k := scanToken(s, i)
	if k == i {
		return "", i, false
	}
	return s[i:k], k, true
}

func unescape(v string) string {
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b = append(b, v[i])
	}
	return string(b)
}

// WalkXFF walks X-Forwarded-For lines (joined in order, as one list) from the
// right. last is the trusted peer. It returns the first untrusted hop; at a
// hop that is not an address it stops and returns the last trusted hop,
// because the proxy that should have written a valid address there did not,
// and whatever lies further left cannot be trusted; when every hop is
// trusted it returns the leftmost.
func WalkXFF(lines []string, last netip.Addr, trusted func(netip.Addr) bool) netip.Addr {
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
		return Clean(a), true
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
	return Clean(a), true
}

// ParseHostPort reads a connection's RemoteAddr: "ip:port", "[ip6]:port",
// or a bare address (some servers and tests set one).
func ParseHostPort(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return Clean(ap.Addr()), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return Clean(a), true
	}
	return netip.Addr{}, false
}

func Clean(a netip.Addr) netip.Addr { return a.WithZone("").Unmap() }

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
