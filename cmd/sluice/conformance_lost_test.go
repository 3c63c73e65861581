package main

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// cutProxy forwards loopback connections to a server until cut, when it
// stops listening and closes every connection: the server, as its clients
// see it, is gone.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	t.Cleanup(p.stop)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil || !p.track(c, s) {
				c.Close()
				if s != nil {
					s.Close()
				}
				continue
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) track(c ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c...)
	return !p.cut
}

func (p *cutProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}

// A store that stops answering during the suite is unreachable (exit 3),
// not a store that failed its checks (exit 1): a script can tell the two
// apart.
func TestConformanceStoreLostMidRun(t *testing.T) {
	p := newCutProxy(t, testenv.MemcacheAddrs(t)[0])
	cut := time.AfterFunc(1500*time.Millisecond, p.stop)
	defer cut.Stop()
	code, out, errOut := sluice(t, "conformance", "--store", "memcache://"+p.ln.Addr().String())
	wantCode(t, code, exitUnreachable, out, errOut)
	if !strings.Contains(errOut, "stopped answering") {
		t.Errorf("stderr does not say the store stopped answering:\n%s", errOut)
	}
	if !strings.Contains(out, "gcra") {
		t.Errorf("the checks that ran are not shown:\n%s", out)
	}
}
