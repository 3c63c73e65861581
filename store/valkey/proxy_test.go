package valkey_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// stallProxy is a loopback TCP proxy in front of one server. Requests always
// pass. Stall holds the replies on every connection open at that moment, so
// a test can make the server run a command and lose its reply, as a slow
// network would; connections opened later pass freely, so a command sent
// again on a new connection would reach the server and be seen there.
type stallProxy struct {
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup

	mu    sync.Mutex
	links []*link
	done  bool
	hang  bool // new connections are held from the start too (Hang)
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	stalled        bool
	resume         chan struct{} // closed when a stall ends
}

// newStallProxy listens on 127.0.0.1 and forwards to upstream until the
// test ends.
func newStallProxy(t *testing.T, upstream string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, upstream: upstream}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) Addr() string { return p.ln.Addr().String() }

// Stall holds the replies of every open connection until Resume.
func (p *stallProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		if !l.stalled {
			l.stalled, l.resume = true, make(chan struct{})
		}
	}
}

// Hang holds the replies of every connection, open now or opened later,
// until Resume: a server that accepts connections and answers nothing.
func (p *stallProxy) Hang() {
	p.mu.Lock()
	p.hang = true
	p.mu.Unlock()
	p.Stall()
}

// Resume lets held and later replies through.
func (p *stallProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hang = false
	for _, l := range p.links {
		if l.stalled {
			l.stalled = false
			close(l.resume)
		}
	}
}

// Drop closes every open connection, both ends, as a network failure
// would; new connections still pass.
func (p *stallProxy) Drop() {
	p.mu.Lock()
	links := p.links
	p.links = nil
	p.mu.Unlock()
	// Close first, so that no held reply reaches the client; then end the
	// stalls, under the lock that replies reads them with.
	for _, l := range links {
		l.client.Close()
		l.server.Close()
	}
	p.mu.Lock()
	for _, l := range links {
		if l.stalled {
			l.stalled = false
			close(l.resume)
		}
	}
	p.mu.Unlock()
}

func (p *stallProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			client.Close()
			continue
		}
		l := &link{client: client, server: server}
		if !p.track(l) {
			return
		}
		p.wg.Go(func() { _, _ = io.Copy(server, client); server.Close() })
		p.wg.Go(func() { p.replies(l); client.Close() })
	}
}

func (p *stallProxy) track(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		l.client.Close()
		l.server.Close()
		return false
	}
	if p.hang {
		l.stalled, l.resume = true, make(chan struct{})
	}
	p.links = append(p.links, l)
	return true
}

// replies copies server to client, waiting out stalls before each write.
func (p *stallProxy) replies(l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled, resume, done := l.stalled, l.resume, p.done
			p.mu.Unlock()
			if done {
				return
			}
			if stalled {
				<-resume
			}
			if _, werr := l.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) close() {
	p.ln.Close()
	p.Resume()
	p.mu.Lock()
	p.done = true
	links := p.links
	p.mu.Unlock()
	for _, l := range links {
		l.client.Close()
		l.server.Close()
	}
	p.wg.Wait()
}
