package redis

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy is a loopback TCP proxy in front of a real server. It forwards
// requests as they come; while stalled it reads the server's replies and
// drops them, so a client sees its command run but never hears back. The
// first reply on each connection always passes: it answers the client's
// handshake (HELLO), so that a new connection, too, gets as far as sending
// a command. With no target it accepts connections and never answers at
// all.
type proxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// newProxy starts a proxy to target ("" for a black hole), stopped at the
// end of the test.
func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept(t)
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Stall makes the proxy drop replies from now on.
func (p *proxy) Stall() { p.stalled.Store(true) }

// Close stops accepting and drops every connection: to a client, the
// server has stopped.
func (p *proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers c to be closed by Close; it reports false (and closes c)
// when the proxy is already closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) accept(t testing.TB) {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("proxy accept: %v", err)
			}
			return
		}
		if !p.track(client) {
			return
		}
		if p.target == "" {
			p.wg.Add(1)
			go func() { // a black hole: read everything, answer nothing
				defer p.wg.Done()
				_, _ = io.Copy(io.Discard, client)
			}()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			t.Errorf("proxy dial %s: %v", p.target, err)
			_ = client.Close()
			continue
		}
		if !p.track(server) {
			return
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(server, client)
			_ = server.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.replies(client, server)
			_ = client.Close()
		}()
	}
}

// replies copies the server's replies to the client: the first always,
// the others unless stalled.
func (p *proxy) replies(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	first := true
	for {
		n, err := server.Read(buf)
		if n > 0 && (first || !p.stalled.Load()) {
			first = false
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
