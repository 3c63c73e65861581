package sluicegrpc_test

import (
	"net/netip"
	"testing"
	"time"

	sluicegrpc "github.com/sluicehq/sluice/adapters/grpc"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"google.golang.org/grpc/codes"
)

// Who the client is, over a real loopback connection: forwarding metadata
// is believed only from a trusted proxy, and only the key the Config names.
func TestClientFromPeerAndTrustedProxy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted []string
		header  string
		md      []string
		want    string
	}{
		{"untrusted peer, x-forwarded-for ignored", nil, "", []string{"x-forwarded-for", "203.0.113.9"}, "127.0.0.1/32"},
		{"untrusted peer, forwarded ignored", nil, "forwarded", []string{"forwarded", "for=203.0.113.9"}, "127.0.0.1/32"},
		{"other proxy trusted, ignored", []string{"10.0.0.0/8"}, "", []string{"x-forwarded-for", "203.0.113.9"}, "127.0.0.1/32"},
		{"no metadata", []string{"127.0.0.1"}, "", nil, "127.0.0.1/32"},
		{"trusted peer", []string{"127.0.0.1"}, "", []string{"x-forwarded-for", "203.0.113.9"}, "203.0.113.9/32"},
		{"trusted peer, rightmost untrusted hop", []string{"127.0.0.0/8", "10.0.0.0/8"}, "", []string{"x-forwarded-for", "198.51.100.1, 203.0.113.9, 10.1.2.3"}, "203.0.113.9/32"},
		{"trusted peer, the other key is not read", []string{"127.0.0.1"}, "", []string{"forwarded", "for=203.0.113.9"}, "127.0.0.1/32"},
		{"trusted peer, forwarded", []string{"127.0.0.1"}, "Forwarded", []string{"forwarded", `for="[2001:db8:1:2::9]:443";proto=https`}, "2001:db8:1:2::/64"},
		{"trusted peer, garbage hop stops the walk", []string{"127.0.0.1"}, "", []string{"x-forwarded-for", "203.0.113.9, nonsense"}, "127.0.0.1/32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := core.NewManualClock(epoch)
			lim := newLimiter(t, core.Config{Policy: core.Policy{Name: "ip", Limit: 1, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: memStore(t, clk), Clock: clk})
			seen := make(chan netip.Prefix, 4)
			p := sluicegrpc.MustPolicy(sluicegrpc.Config{
				Layers:         []sluicegrpc.Layer{{Limiter: lim}},
				TrustedProxies: tc.trusted,
				ProxyHeader:    tc.header,
				Skip:           func(c *sluicegrpc.Call) bool { seen <- c.Client(); return false },
			})
			c := servePolicy(t, &service{}, p)
			if r := unary(t, c, callCtx(t, tc.md...), nil); r.err != nil {
				t.Fatal(r.err)
			}
			if got := <-seen; got.String() != tc.want {
				t.Errorf("client %s, want %s", got, tc.want)
			}
			// The quota is the identity's: the same metadata is refused, a
			// forged hop from an untrusted peer changes nothing.
			if r := unary(t, c, callCtx(t, tc.md...), nil); r.code() != codes.ResourceExhausted {
				t.Errorf("second call: %v, want ResourceExhausted", r.err)
			}
			<-seen
			other := []string{"x-forwarded-for", "192.0.2.77", "forwarded", "for=192.0.2.77"}
			r := unary(t, c, callCtx(t, other...), nil)
			<-seen
			// Another client behind the same trusted proxy has a quota of its
			// own; from an untrusted peer, the forged address is ignored.
			believed := len(tc.trusted) > 0 && tc.trusted[0][:4] == "127."
			if believed && r.err != nil {
				t.Errorf("another forwarded client: %v, want its own quota", r.err)
			}
			if !believed && r.code() != codes.ResourceExhausted {
				t.Errorf("a forged forwarded address: %v, want the peer's quota (ResourceExhausted)", r.err)
			}
		})
	}
}

// Every Config mistake is an error from NewPolicy, naming the field.
func TestConfigErrors(t *testing.T) {
	lim := newLimiter(t, core.Config{Policy: core.Policy{Name: "a", Limit: 5, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: memStore(t, nil)})
	conc := newLimiter(t, core.Config{Policy: core.Policy{Name: "c", Limit: 5, Window: time.Minute}, Algorithm: algorithm.Concurrency{}, Store: memStore(t, nil)})
	one := func(c *sluicegrpc.Call) int64 { return 1 }
	for _, tc := range []struct {
		name string
		cfg  sluicegrpc.Config
	}{
		{"no layers", sluicegrpc.Config{}},
		{"nil limiter", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{}}}},
		{"zero limiter", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: &core.Limiter{}}}}},
		{"same name twice", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}, {Limiter: lim}}}},
		{"weight above quota", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim, Weight: 6}}}},
		{"negative weight", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim, Weight: -1}}}},
		{"weight and cost", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim, Weight: 2, Cost: one}}}},
		{"concurrency with cost", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: conc, Cost: one}}}},
		{"skip without slash", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}, SkipMethods: []string{"grpc.health.v1.Health/Check"}}},
		{"skip without method part", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}, SkipMethods: []string{"/grpc.health.v1.Health"}}},
		{"skip everything", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}, SkipMethods: []string{"/"}}},
		{"skip too deep", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}, SkipMethods: []string{"/a/b/c"}}},
		{"bad proxy", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}, TrustedProxies: []string{"10.0.0.0/33"}}},
		{"mapped proxy prefix", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}, TrustedProxies: []string{"::ffff:10.0.0.0/104"}}},
		{"bad proxy header", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}, ProxyHeader: "x-real-ip"}},
		{"bad IPv4 prefix", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}, IPv4Prefix: 33}},
		{"bad IPv6 prefix", sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}, IPv6Prefix: -1}},
	} {
		if _, err := sluicegrpc.NewPolicy(tc.cfg); err == nil {
			t.Errorf("%s: NewPolicy accepted it", tc.name)
		}
	}
	p, err := sluicegrpc.NewPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim, Weight: 5}, {Limiter: conc}}, SkipMethods: []string{"/a.B/C", "/a.B/"}, TrustedProxies: []string{"10.0.0.1", "2001:db8::/32"}, ProxyHeader: "FORWARDED"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Layers(); len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Errorf("Layers() = %v, want [a c]", got)
	}
}
