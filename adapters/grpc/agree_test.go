package sluicegrpc

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

var agreeProxies = []string{"10.0.0.0/8", "127.0.0.1", "2001:db8::/32"}

type slotKey struct{}

type slotValues struct{ slot *netip.Prefix }

func (v slotValues) Value(key any) any {
	if key == (slotKey{}) {
		return v.slot
	}
	return nil
}

// httpClient asks the HTTP policy who the client of a request is: its Skip
// hook sees Request.Client, and skipping answers nothing.
func httpClient(t *testing.T, p *nethttp.Policy, peerAddr netip.AddrPort, header string, lines []string) netip.Prefix {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = peerAddr.String()
	if lines != nil {
		r.Header[http.CanonicalHeaderKey(header)] = lines
	}
	var got netip.Prefix
	if _, ok := p.Admit(httptest.NewRecorder(), r, "", slotValues{&got}); !ok {
		t.Fatal("the HTTP policy did not skip")
	}
	return got
}

// grpcClient asks this policy who the client of a call is.
func grpcClient(p *Policy, peerAddr netip.AddrPort, header string, lines []string) netip.Prefix {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: net.TCPAddrFromAddrPort(peerAddr)})
	if lines != nil {
		ctx = metadata.NewIncomingContext(ctx, metadata.MD{header: lines})
	}
	c := p.newCall(ctx, "/a.B/C", nil, false, false)
	defer freeCall(c)
	return c.Client()
}

// FuzzClientAgreesWithHTTP holds the gRPC policy to the HTTP policy's
// answer for the same peer and forwarding lines, for both keys: the two
// walk the same rules, and a change to one that the other lacks fails here.
// Its seeds run in every `go test`.
func FuzzClientAgreesWithHTTP(f *testing.F) {
	for _, s := range []struct {
		peer, a, b string
		fwd        bool
	}{
		{"127.0.0.1:5000", "203.0.113.9", "", false},
		{"10.1.1.1:5000", "198.51.100.1, 203.0.113.9", "10.2.2.2", false},
		{"10.1.1.1:5000", "[2001:db8::1]:80, 10.0.0.5", "", false},
		{"10.1.1.1:5000", "garbage, 203.0.113.4", "10.9.9.9 ", false},
		{"192.0.2.1:5000", "203.0.113.9", "", false},
		{"[2001:db8::7]:443", "2001:db9::1%eth0", "", false},
		{"[::ffff:10.0.0.1]:1", "::ffff:198.51.100.3", "", false},
		{"10.1.1.1:5000", `for=203.0.113.9;proto=https`, `for="[2001:db8::1]:443", for=10.0.0.2`, true},
		{"127.0.0.1:5000", `for=unknown, for=_hidden`, "", true},
		{"127.0.0.1:5000", `for="203.0.113.9:_p";by=x, FOR=10.3.3.3`, "", true},
		{"127.0.0.1:5000", `for=1.2.3.4;for=5.6.7.8`, `,,,`, true},
		{"127.0.0.1:5000", `for="\"quoted\""`, "", true},
	} {
		f.Add(s.peer, s.a, s.b, s.fwd)
	}
	clk := core.NewManualClock(time.Unix(0, 0))
	st := memory.New(&memory.Options{Clock: clk, SweepInterval: -1})
	f.Cleanup(func() { _ = st.Close() })
	lim, err := core.New(core.Config{Policy: core.Policy{Name: "p", Limit: 1, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: st, Clock: clk})
	if err != nil {
		f.Fatal(err)
	}
	skip := func(q *nethttp.Request) bool {
		if s, ok := q.Value(slotKey{}).(*netip.Prefix); ok {
			*s = q.Client()
		}
		return true
	}
	policies := map[bool][2]any{}
	for _, fwd := range []bool{false, true} {
		header := "x-forwarded-for"
		if fwd {
			header = "forwarded"
		}
		hp, err := nethttp.NewPolicy(nethttp.Config{Layers: []nethttp.Layer{{Limiter: lim}}, TrustedProxies: agreeProxies, ProxyHeader: header, IPv6Prefix: 56, Skip: skip})
		if err != nil {
			f.Fatal(err)
		}
		gp, err := NewPolicy(Config{Layers: []Layer{{Limiter: lim}}, TrustedProxies: agreeProxies, ProxyHeader: header, IPv6Prefix: 56})
		if err != nil {
			f.Fatal(err)
		}
		policies[fwd] = [2]any{hp, gp}
	}
	f.Fuzz(func(t *testing.T, peerS, a, b string, fwd bool) {
		ap, err := netip.ParseAddrPort(peerS)
		if err != nil {
			return
		}
		header := "x-forwarded-for"
		if fwd {
			header = "forwarded"
		}
		lines := []string{a}
		if b != "" {
			lines = append(lines, b)
		}
		ps := policies[fwd]
		want := httpClient(t, ps[0].(*nethttp.Policy), ap, header, lines)
		if got := grpcClient(ps[1].(*Policy), ap, header, lines); got != want {
			t.Errorf("peer %s, %s %q: gRPC says %s, HTTP says %s", peerS, header, lines, got, want)
		}
	})
}
