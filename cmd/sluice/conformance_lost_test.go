package main

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// cutProxy forwards loopback connections to a server until cut, when it
// stops listening and closes every connection: the server, as its clients
// see it, is gone.
type cutProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
	silent atomic.Bool  // forward nothing more, in either direction (Silence)
	slow   atomic.Int64 // ns to hold the next accepted connection before dialing the server
	each   atomic.Int64 // ns to hold every accepted connection before dialing the server
}

// Silence makes the server silent, as a stopped process is: connections
// stay open and new ones are accepted, and nothing passes any more.
func (p *cutProxy) Silence() { p.silent.Store(true) }

// pipe copies src to dst until either ends, or forever nothing once the
// proxy is silent (until it is cut).
func (p *cutProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.silent.Load() {
			_, _ = io.Copy(io.Discard, src) // until the proxy is cut
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
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
			time.Sleep(time.Duration(p.slow.Swap(0) + p.each.Load()))
			s, err := net.Dial("tcp", target)
			if err != nil || !p.track(c, s) {
				c.Close()
				if s != nil {
					s.Close()
				}
				continue
			}
			go p.pipe(s, c)
			go p.pipe(c, s)
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

// A store that goes silent during the suite, so that the suite does not
// finish within --timeout, is unreachable (exit 3) too, and the command
// gives up within --timeout, the probe that tells it so included.
func TestConformanceStoreSilentMidRun(t *testing.T) {
	p := newCutProxy(t, testenv.MemcacheAddrs(t)[0])
	silence := time.AfterFunc(1500*time.Millisecond, p.Silence)
	defer silence.Stop()
	start := time.Now()
	code, out, errOut := sluice(t, "conformance", "--store", "memcache://"+p.ln.Addr().String(), "--timeout", "5s")
	took := time.Since(start)
	wantCode(t, code, exitUnreachable, out, errOut)
	// The slack is for the exit of the suite's process and its output.
	if took > 5*time.Second+750*time.Millisecond {
		t.Errorf("returned after %v, with --timeout 5s", took.Round(time.Millisecond))
	}
	if !strings.Contains(errOut, "stopped answering") {
		t.Errorf("stderr does not say the store stopped answering:\n%s", errOut)
	}
	// The keys of the checks it cut short could not be deleted: it says so.
	if !strings.Contains(errOut, "keys it wrote under sluice-conformance may be left") {
		t.Errorf("stderr does not say that keys may be left:\n%s", errOut)
	}
}

// --timeout bounds the whole command: a store slow to answer its first
// call leaves the suite less time, not the command more; and the suite's
// process times out at the command's deadline, however long it took to
// start and to reach the store (every connection slow to open, the
// command's own among them), which is then the store not answering.
func TestConformanceTimeoutBoundsTheCommand(t *testing.T) {
	for _, c := range []struct {
		name        string
		scheme      string
		first, each time.Duration // the proxy's hold on the first connection, and on every one
		timeout     time.Duration
		code        int
		says        string
	}{
		{"slow first call", "redis", 1500 * time.Millisecond, 0, 4 * time.Second, exitFailed, "--timeout"},
		{"every connection slow", "redis", 0, 1800 * time.Millisecond, 4 * time.Second, exitUnreachable, "did not answer"},
		// valkey-go connects in its constructor, which takes no context:
		// the command bounds it by its dial timeout, what is left of
		// --timeout when that is less than the 2 s it gives a first call.
		{"valkey, every connection slow", "valkey", 0, 1800 * time.Millisecond, time.Second, exitUnreachable, "did not answer within 1s"},
		{"valkey, a slow first call", "valkey", 1500 * time.Millisecond, 0, time.Second, exitUnreachable, "did not answer within 1s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newCutProxy(t, testenv.RedisAddr(t))
			p.slow.Store(int64(c.first))
			p.each.Store(int64(c.each))
			start := time.Now()
			code, out, errOut := sluice(t, "conformance", "--store", c.scheme+"://"+p.ln.Addr().String(), "--timeout", c.timeout.String())
			took := time.Since(start)
			wantCode(t, code, c.code, out, errOut)
			if !strings.Contains(errOut, c.says) {
				t.Errorf("stderr does not say %q:\n%s", c.says, errOut)
			}
			if took > c.timeout+750*time.Millisecond {
				t.Errorf("returned after %v, with --timeout %v", took.Round(time.Millisecond), c.timeout)
			}
		})
	}
}

// A bench whose server goes silent during the run ends soon after
// --duration: its instances' stores close at once, not one after another
// (valkey-go's Close waits up to two seconds for a silent server; six
// instances returned 12 s after a 2 s run).
func TestBenchStoreSilentMidRunEndsSoon(t *testing.T) {
	p := newCutProxy(t, testenv.RedisAddr(t))
	silence := time.AfterFunc(time.Second, p.Silence)
	defer silence.Stop()
	start := time.Now()
	code, out, errOut := sluice(t, "bench", "--store", "valkey://"+p.ln.Addr().String(), "--duration", "2s", "--instances", "6", "--progress", "off")
	took := time.Since(start)
	wantCode(t, code, exitFailed, out, errOut)
	if took > 5500*time.Millisecond {
		t.Errorf("returned after %v, for --duration 2s", took.Round(time.Millisecond))
	}
}
