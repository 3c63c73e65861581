package nethttp

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

// clientCase is one request: its peer, its forwarding headers, and the
// identity the policy must give it ("" for a peer that is not an address).
type clientCase struct {
	name      string
	peer      string
	xff       []string
	forwarded []string
	want      string
}

func runClientCases(t *testing.T, cfg Config, cases []clientCase) {
	t.Helper()
	p := testPolicy(t, cfg)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range c.forwarded {
				r.Header.Add("Forwarded", v)
			}
			q := p.newRequest(r, "", nil)
			defer freeRequest(q)
			got := ""
			if pfx := q.Client(); pfx.IsValid() {
				got = pfx.String()
			}
			if got != c.want {
				t.Errorf("peer %q xff %q forwarded %q: client %q, want %q", c.peer, c.xff, c.forwarded, got, c.want)
			}
			if k, want := q.clientKey(), keyOf(c.want); k != want {
				t.Errorf("key %q, want %q", k, want)
			}
		})
	}
}

// keyOf is the identity of a prefix written as text: clientKey's binary
// form, rebuilt independently.
func keyOf(prefix string) string {
	if prefix == "" {
		return "ip:unknown"
	}
	pfx := netip.MustParsePrefix(prefix)
	a := pfx.Addr().As16()
	bits := pfx.Bits()
	if pfx.Addr().Is4() {
		bits += 129
	}
	return "ip:" + string(a[:]) + string([]byte{byte(bits)})
}

func TestClientKeysAreDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"10.0.0.0/8", "10.0.0.0/32", "10.0.0.1/32", "::ffff:10.0.0.1/128", "::ffff:10.0.0.1/32", "::a00:1/128", "2001:db8::/64", "2001:db8::/63", ""} {
		k := keyOf(s)
		if prev, ok := seen[k]; ok {
			t.Errorf("%q and %q share the key %q", prev, s, k)
		}
		seen[k] = s
	}
}

func TestClientWithoutTrustedProxies(t *testing.T) {
	runClientCases(t, Config{}, []clientCase{
		{name: "ipv4", peer: "203.0.113.7:5555", want: "203.0.113.7/32"},
		{name: "spoofed xff ignored", peer: "203.0.113.7:5555", xff: []string{"198.51.100.1"}, want: "203.0.113.7/32"},
		{name: "spoofed forwarded ignored", peer: "203.0.113.7:5555", forwarded: []string{"for=198.51.100.1"}, want: "203.0.113.7/32"},
		{name: "ipv6 grouped by /64", peer: "[2001:db8:1:2:3:4:5:6]:443", want: "2001:db8:1:2::/64"},
		{name: "ipv6 neighbour in the same /64", peer: "[2001:db8:1:2:ffff::1]:443", want: "2001:db8:1:2::/64"},
		{name: "ipv6 zone dropped", peer: "[fe80::1%eth0]:80", want: "fe80::/64"},
		{name: "ipv4-mapped ipv6 is ipv4", peer: "[::ffff:198.51.100.9]:80", want: "198.51.100.9/32"},
		{name: "bare address", peer: "198.51.100.9", want: "198.51.100.9/32"},
		{name: "bare ipv6", peer: "2001:db8::1", want: "2001:db8::/64"},
		{name: "unix socket", peer: "@", want: ""},
		{name: "empty", peer: "", want: ""},
		{name: "garbage", peer: "not-an-address:80", want: ""},
	})
}

func TestClientBehindTrustedXFF(t *testing.T) {
	cfg := Config{TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.10"}}
	runClientCases(t, cfg, []clientCase{
		{name: "one proxy", peer: "10.0.0.1:1", xff: []string{"203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "spoofed left hop ignored", peer: "10.0.0.1:1", xff: []string{"6.6.6.6, 203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "chain of trusted proxies", peer: "10.0.0.1:1", xff: []string{"6.6.6.6, 203.0.113.7, 10.0.0.2, 10.9.9.9"}, want: "203.0.113.7/32"},
		{name: "single trusted address", peer: "192.0.2.10:1", xff: []string{"203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "neighbour of single trusted address is not trusted", peer: "192.0.2.11:1", xff: []string{"203.0.113.7"}, want: "192.0.2.11/32"},
		{name: "several header lines read as one list", peer: "10.0.0.1:1", xff: []string{"6.6.6.6", "203.0.113.7, 10.0.0.2"}, want: "203.0.113.7/32"},
		{name: "client in the last line", peer: "10.0.0.1:1", xff: []string{"6.6.6.6", "203.0.113.8"}, want: "203.0.113.8/32"},
		{name: "no header: the proxy itself", peer: "10.0.0.1:1", want: "10.0.0.1/32"},
		{name: "every hop trusted: the leftmost", peer: "10.0.0.1:1", xff: []string{"10.0.0.3, 10.0.0.2"}, want: "10.0.0.3/32"},
		{name: "garbage only", peer: "10.0.0.1:1", xff: []string{"garbage"}, want: "10.0.0.1/32"},
		{name: "garbage at the right stops the walk", peer: "10.0.0.1:1", xff: []string{"203.0.113.7, garbage"}, want: "10.0.0.1/32"},
		{name: "garbage behind a trusted hop", peer: "10.0.0.1:1", xff: []string{"garbage, 10.0.0.2"}, want: "10.0.0.2/32"},
		{name: "garbage left of the client", peer: "10.0.0.1:1", xff: []string{"garbage, 203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "empty value", peer: "10.0.0.1:1", xff: []string{""}, want: "10.0.0.1/32"},
		{name: "only commas", peer: "10.0.0.1:1", xff: []string{",,,"}, want: "10.0.0.1/32"},
		{name: "white space around hops", peer: "10.0.0.1:1", xff: []string{" \t203.0.113.7 ,  10.0.0.2 "}, want: "203.0.113.7/32"},
		{name: "ipv4 with port", peer: "10.0.0.1:1", xff: []string{"203.0.113.7:8080"}, want: "203.0.113.7/32"},
		{name: "ipv4 with empty port", peer: "10.0.0.1:1", xff: []string{"203.0.113.7:"}, want: "10.0.0.1/32"},
		{name: "ipv4 with port out of range", peer: "10.0.0.1:1", xff: []string{"203.0.113.7:99999"}, want: "10.0.0.1/32"},
		{name: "ipv4 with signed port", peer: "10.0.0.1:1", xff: []string{"203.0.113.7:+80"}, want: "10.0.0.1/32"},
		{name: "ipv4 octet out of range", peer: "10.0.0.1:1", xff: []string{"256.1.1.1"}, want: "10.0.0.1/32"},
		{name: "ipv4 short", peer: "10.0.0.1:1", xff: []string{"203.0.113"}, want: "10.0.0.1/32"},
		{name: "ipv4 leading zeros", peer: "10.0.0.1:1", xff: []string{"203.0.113.007"}, want: "10.0.0.1/32"},
		{name: "two addresses without comma", peer: "10.0.0.1:1", xff: []string{"203.0.113.7 198.51.100.1"}, want: "10.0.0.1/32"},
		{name: "ipv6 bare", peer: "10.0.0.1:1", xff: []string{"2001:db8:1:2::9"}, want: "2001:db8:1:2::/64"},
		{name: "ipv6 bracketed", peer: "10.0.0.1:1", xff: []string{"[2001:db8:1:2::9]"}, want: "2001:db8:1:2::/64"},
		{name: "ipv6 bracketed with port", peer: "10.0.0.1:1", xff: []string{"[2001:db8:1:2::9]:443"}, want: "2001:db8:1:2::/64"},
		{name: "ipv6 missing bracket", peer: "10.0.0.1:1", xff: []string{"[2001:db8:1:2::9"}, want: "10.0.0.1/32"},
		{name: "ipv6 junk after bracket", peer: "10.0.0.1:1", xff: []string{"[2001:db8:1:2::9]x"}, want: "10.0.0.1/32"},
		{name: "ipv4 in brackets", peer: "10.0.0.1:1", xff: []string{"[203.0.113.7]"}, want: "10.0.0.1/32"},
		{name: "ipv6 zone dropped", peer: "10.0.0.1:1", xff: []string{"fe80::1%eth0"}, want: "fe80::/64"},
		{name: "ipv6 bracketed zone dropped", peer: "10.0.0.1:1", xff: []string{"[fe80::1%eth0]:80"}, want: "fe80::/64"},
		{name: "ipv4-mapped hop", peer: "10.0.0.1:1", xff: []string{"::ffff:203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "ipv4-mapped trusted hop", peer: "10.0.0.1:1", xff: []string{"203.0.113.7, ::ffff:10.0.0.2"}, want: "203.0.113.7/32"},
		{name: "ipv6 trusted proxy", peer: "[2001:db8:ffff:1::1]:1", xff: []string{"203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "ipv4-mapped peer is trusted", peer: "[::ffff:10.0.0.1]:1", xff: []string{"203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "untrusted peer: header ignored", peer: "198.51.100.1:1", xff: []string{"203.0.113.7"}, want: "198.51.100.1/32"},
		{name: "forwarded ignored when reading xff", peer: "10.0.0.1:1", forwarded: []string{"for=203.0.113.7"}, want: "10.0.0.1/32"},
		{name: "unknown token", peer: "10.0.0.1:1", xff: []string{"unknown"}, want: "10.0.0.1/32"},
	})
}

func TestClientBehindTrustedForwarded(t *testing.T) {
	cfg := Config{TrustedProxies: []string{"10.0.0.0/8"}, ProxyHeader: "forwarded"}
	runClientCases(t, cfg, []clientCase{
		{name: "ipv4", peer: "10.0.0.1:1", forwarded: []string{"for=203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "quoted ipv4 with port", peer: "10.0.0.1:1", forwarded: []string{`for="203.0.113.7:8080"`}, want: "203.0.113.7/32"},
		{name: "parameter name is case-insensitive", peer: "10.0.0.1:1", forwarded: []string{"For=203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "quoted bracketed ipv6 with port", peer: "10.0.0.1:1", forwarded: []string{`for="[2001:db8:1:2::9]:4711"`}, want: "2001:db8:1:2::/64"},
		{name: "quoted bracketed ipv6", peer: "10.0.0.1:1", forwarded: []string{`for="[2001:db8:1:2::9]"`}, want: "2001:db8:1:2::/64"},
		{name: "unquoted ipv6 is malformed", peer: "10.0.0.1:1", forwarded: []string{"for=2001:db8::1"}, want: "10.0.0.1/32"},
		{name: "unbracketed quoted ipv6 is malformed", peer: "10.0.0.1:1", forwarded: []string{`for="2001:db8::1"`}, want: "10.0.0.1/32"},
		{name: "obfuscated port", peer: "10.0.0.1:1", forwarded: []string{`for="203.0.113.7:_p1"`}, want: "203.0.113.7/32"},
		{name: "bad port", peer: "10.0.0.1:1", forwarded: []string{`for="203.0.113.7:x"`}, want: "10.0.0.1/32"},
		{name: "spoofed left element ignored", peer: "10.0.0.1:1", forwarded: []string{"for=6.6.6.6, for=203.0.113.7;proto=https;by=10.0.0.1"}, want: "203.0.113.7/32"},
		{name: "trusted chain", peer: "10.0.0.1:1", forwarded: []string{"for=203.0.113.7, for=10.0.0.2"}, want: "203.0.113.7/32"},
		{name: "several lines", peer: "10.0.0.1:1", forwarded: []string{"for=6.6.6.6", "for=203.0.113.7"}, want: "203.0.113.7/32"},
		{name: "white space", peer: "10.0.0.1:1", forwarded: []string{"for=6.6.6.6 ,\tfor=203.0.113.7 ; proto=http"}, want: "203.0.113.7/32"},
		{name: "empty pairs", peer: "10.0.0.1:1", forwarded: []string{";;for=203.0.113.7;;"}, want: "203.0.113.7/32"},
		{name: "unknown", peer: "10.0.0.1:1", forwarded: []string{"for=unknown"}, want: "10.0.0.1/32"},
		{name: "obfuscated node", peer: "10.0.0.1:1", forwarded: []string{`for="_hidden"`}, want: "10.0.0.1/32"},
		{name: "unknown at the right stops the walk", peer: "10.0.0.1:1", forwarded: []string{"for=203.0.113.7, for=unknown"}, want: "10.0.0.1/32"},
		{name: "element without for", peer: "10.0.0.1:1", forwarded: []string{"proto=https"}, want: "10.0.0.1/32"},
		{name: "two for in one element", peer: "10.0.0.1:1", forwarded: []string{"for=203.0.113.7;for=198.51.100.1"}, want: "10.0.0.1/32"},
		{name: "unterminated quote", peer: "10.0.0.1:1", forwarded: []string{`for="203.0.113.7`}, want: "10.0.0.1/32"},
		// A client's unterminated quote cannot swallow the element the
		// trusted proxy appended after it: elements are split from the
		// right, where the proxy's own, balanced, end the line. Read as
		// one quoted string, the client was counted as the proxy.
		{name: "client quote swallowing the proxy's element", peer: "10.0.0.1:1", forwarded: []string{`for=6.6.6.6", for=203.0.113.7`}, want: "203.0.113.7/32"},
		{name: "lone client quote before the proxy's element", peer: "10.0.0.1:1", forwarded: []string{`for=", for=203.0.113.7`}, want: "203.0.113.7/32"},
		{name: "client quote before a trusted chain", peer: "10.0.0.1:1", forwarded: []string{`for="x, for=203.0.113.7, for="[2001:db8::1]", for=10.0.0.2`}, want: "2001:db8::/64"},
		{name: "malformed left element skipped", peer: "10.0.0.1:1", forwarded: []string{`for=@@@, for=203.0.113.7`}, want: "203.0.113.7/32"},
		{name: "escaped quoted string", peer: "10.0.0.1:1", forwarded: []string{`for="\"x\""`}, want: "10.0.0.1/32"},
		{name: "escaped address", peer: "10.0.0.1:1", forwarded: []string{`for="203.0.113.\7"`}, want: "203.0.113.7/32"},
		{name: "pair without value", peer: "10.0.0.1:1", forwarded: []string{"for="}, want: "10.0.0.1/32"},
		{name: "pair without equals", peer: "10.0.0.1:1", forwarded: []string{"for"}, want: "10.0.0.1/32"},
		{name: "many elements", peer: "10.0.0.1:1", forwarded: []string{"for=1.1.1.1, for=1.1.1.2, for=1.1.1.3, for=1.1.1.4, for=1.1.1.5, for=1.1.1.6, for=1.1.1.7, for=1.1.1.8, for=1.1.1.9, for=1.1.1.10, for=1.1.1.11, for=1.1.1.12, for=1.1.1.13, for=1.1.1.14, for=1.1.1.15, for=1.1.1.16, for=1.1.1.17, for=203.0.113.7, for=10.0.0.2"}, want: "203.0.113.7/32"},
		{name: "xff ignored when reading forwarded", peer: "10.0.0.1:1", xff: []string{"203.0.113.7"}, want: "10.0.0.1/32"},
	})
}

func TestClientPrefixLengths(t *testing.T) {
	cfg := Config{IPv4Prefix: 24, IPv6Prefix: 48}
	runClientCases(t, cfg, []clientCase{
		{name: "ipv4 /24", peer: "203.0.113.7:1", want: "203.0.113.0/24"},
		{name: "ipv6 /48", peer: "[2001:db8:1:2::1]:1", want: "2001:db8:1::/48"},
	})
}
