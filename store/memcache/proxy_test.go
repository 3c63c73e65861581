package memcache_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy sits between a client and a real memcached on loopback. It counts
// the commands that go through it, by verb, and can hold back commands of
// chosen verbs (a stalled server, as the client sees it) until released.
type proxy struct {
	ln       net.Listener
	upstream string
	stall    map[string]bool
	release  chan struct{} // closed to let stalled commands through

	mu     sync.Mutex
	counts map[string]int
	conns  []net.Conn
	wg     sync.WaitGroup
	closed atomic.Bool
}

// startProxy starts a proxy to upstream, stopped at the end of the test.
// Commands whose verb is in stall wait until Release.
func startProxy(t *testing.T, upstream string, stall ...string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, stall: map[string]bool{}, release: make(chan struct{}), counts: map[string]int{}}
	for _, v := range stall {
		p.stall[v] = true
	}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// Release lets stalled commands (and later ones) through.
func (p *proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.release:
	default:
		close(p.release)
	}
}

// take returns how many commands of verb went through, and resets the count.
func (p *proxy) take(verb string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.counts[verb]
	delete(p.counts, verb)
	return n
}

func (p *proxy) close() {
	p.closed.Store(true)
	p.ln.Close()
	p.Release()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c) || !p.track(up) {
			c.Close()
			up.Close()
			return
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(c, up)
			c.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.forward(c, up)
			up.Close()
		}()
	}
}

// forward copies commands from client to server, one by one, counting them.
func (p *proxy) forward(client, server net.Conn) {
	r := bufio.NewReader(client)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		verb := string(fields[0])
		msg := line
		switch verb {
		case "set", "add", "replace", "append", "prepend", "cas":
			if len(fields) < 5 {
				return
			}
			n, err := strconv.Atoi(string(fields[4]))
			if err != nil || n < 0 {
				return
			}
			data := make([]byte, n+2)
			if _, err := io.ReadFull(r, data); err != nil {
				return
			}
			msg = append(append([]byte(nil), line...), data...)
		}
		p.mu.Lock()
		p.counts[verb]++
		p.mu.Unlock()
		if p.stall[verb] {
			<-p.release
			if p.closed.Load() {
				return
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// silentServer accepts connections and reads from them but never answers:
// a stalled memcached. It is stopped at the end of the test.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	closed := false
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
