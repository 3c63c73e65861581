package nethttp

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sluicehq/sluice/adapters/internal/clientip"
)

// FuzzClient feeds arbitrary peers and forwarding headers to both header
// walkers. Nothing may panic; an untrusted peer is always the client,
// whatever the headers say; and a client is always a masked prefix.
func FuzzClient(f *testing.F) {
	for _, s := range [][3]string{
		{"10.0.0.1:1", "203.0.113.7, 10.0.0.2", `for=203.0.113.7, for="[2001:db8::1]:80"`},
		{"10.0.0.1:1", "[2001:db8::1]:443,fe80::1%eth0", `for="\"x`},
		{"198.51.100.1:1", "6.6.6.6", "for=6.6.6.6"},
		{"[::ffff:10.0.0.1]:1", ",,,", ";;,;for=_x"},
		{"@", "", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	trusted := netip.MustParsePrefix("10.0.0.0/8")
	xff := testPolicy(f, Config{TrustedProxies: []string{"10.0.0.0/8"}})
	fwd := testPolicy(f, Config{TrustedProxies: []string{"10.0.0.0/8"}, ProxyHeader: "Forwarded"})
	f.Fuzz(func(t *testing.T, peer, xffValue, fwdValue string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", xffValue)
		r.Header.Set("Forwarded", fwdValue)
		peerAddr, peerOK := clientip.ParseHostPort(peer)
		for _, p := range []*Policy{xff, fwd} {
			q := p.newRequest(r, "", nil)
			pfx := q.Client()
			freeRequest(q)
			if !peerOK {
				if pfx.IsValid() {
					t.Fatalf("peer %q is not an address, client %v", peer, pfx)
				}
				continue
			}
			if pfx != pfx.Masked() {
				t.Fatalf("client %v is not masked", pfx)
			}
			if !trusted.Contains(peerAddr) && pfx != p.group(peerAddr) {
				t.Fatalf("untrusted peer %q, headers %q %q: client %v", peer, xffValue, fwdValue, pfx)
			}
		}
	})
}
