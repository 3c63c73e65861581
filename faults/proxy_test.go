package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// The toxiproxy server that every proxy of the tests belongs to, run in
// process: no API listener, no metrics.
var (
	proxyServerOnce sync.Once
	proxyServer     *toxiproxy.ApiServer
)

// proxy is a toxiproxy proxy on a loopback port of its own in front of
// upstream, stopped when the test ends.
type proxy struct {
	t    testing.TB
	p    *toxiproxy.Proxy
	Addr string
}

func newProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	proxyServerOnce.Do(func() {
		// The toxics log through zerolog's global logger.
		zerolog.SetGlobalLevel(zerolog.Disabled)
		proxyServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	})
	name := strings.ReplaceAll(t.Name(), "/", "_")
	p := toxiproxy.NewProxy(proxyServer, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return &proxy{t: t, p: p, Addr: p.Listen}
}

// add adds a toxic to both directions (a JSON attributes object).
func (p *proxy) add(kind, attrs string) {
	p.t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, kind+"_"+stream, kind, stream, attrs)
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			p.t.Fatalf("toxic %s: %v", body, err)
		}
	}
}

// clear removes every toxic.
func (p *proxy) clear() { p.p.Toxics.ResetToxics(context.Background()) }
