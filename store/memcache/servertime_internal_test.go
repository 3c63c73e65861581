package memcache

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/inflight"
)

func TestParseStatsTime(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  int64
		ok    bool
	}{
		{"STAT pid 1\r\nSTAT uptime 5\r\nSTAT time 1773501600\r\nSTAT version 1.6\r\nEND\r\n", 1773501600, true},
		{"STAT pid 1\r\nEND\r\n", 0, false},              // no time
		{"STAT time x\r\nEND\r\n", 0, false},             // not a number
		{"ERROR\r\n", 0, false},                          // not a memcached
		{"STAT time 1773501600\r\n", 0, false},           // cut short
		{"SERVER_ERROR out of memory\r\n", 0, false},     // refused
		{strings.Repeat("STAT a b\r\n", 2000), 0, false}, // endless
	} {
		got, err := parseStatsTime(bufio.NewReader(strings.NewReader(tc.reply)))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseStatsTime(%.40q) = %d, %v; want %d, ok %v", tc.reply, got, err, tc.want, tc.ok)
		}
	}
}

// TestServerClockExtrapolates: a reading moves on with the monotonic
// clock, rounded up, and the latest server wins.
func TestServerClockExtrapolates(t *testing.T) {
	c := newServerClocks([]string{"a", "b"})
	at := time.Now().Add(-90 * time.Second)
	c.readings[0] = clockReading{unix: 1000, at: at, ok: true}
	c.readings[1] = clockReading{unix: 5000, at: at, ok: true}
	latest, known, stale := c.latest()
	if !known || latest != 5000+90+1 || !stale {
		t.Fatalf("latest() = %d, %v, %v; want %d, true, true (a reading 90s old)", latest, known, stale, 5000+90+1)
	}
	if newServerClocks(nil) != nil {
		t.Fatalf("no servers should give no clocks")
	}
}

// TestClockReadAfterCloseSendsNothing: once Close has begun, a call that
// needs a server's clock does not open a connection to read it (nor leave
// a goroutine that outlives Close); it goes without, and fails at its
// round trip.
func TestClockReadAfterCloseSendsNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	var bg inflight.Counter
	bg.Close()
	c := newServerClocks([]string{ln.Addr().String()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, ok := c.now(ctx, &bg); ok {
		t.Error("a clock known after Close, with no reading before")
	}
	if ctx.Err() != nil {
		t.Error("now waited until its deadline for a read Close forbade")
	}
	// A stale reading is answered from, and not read again.
	c.readings[0] = clockReading{unix: 1000, at: time.Now().Add(-2 * clockRefresh), ok: true}
	if _, ok := c.now(ctx, &bg); !ok {
		t.Error("a stale reading was not used after Close")
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections to the server after Close", n)
	}
	bg.Wait()
}

// TestCloseCutsAClockReadShort: a server-clock read on its way to a silent
// server when Close comes ends at once, not at its own second's timeout,
// so that Close waits no longer than for the round trips.
func TestCloseCutsAClockReadShort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	defer func() {
		close(accepted)
		for c := range accepted {
			_ = c.Close()
		}
	}()
	var bg inflight.Counter
	c := newServerClocks([]string{ln.Addr().String()})
	c.readings[0] = clockReading{unix: 1000, at: time.Now().Add(-2 * clockRefresh), ok: true}
	if _, ok := c.now(context.Background(), &bg); !ok {
		t.Fatal("a stale reading was not used")
	}
	select {
	case <-accepted: // the background read reached the server
	case <-time.After(time.Second):
		t.Fatal("no background read of a stale clock")
	}
	start := time.Now()
	bg.Close()
	c.close()
	bg.Wait()
	if took := time.Since(start); took > clockTimeout/2 {
		t.Errorf("Close waited %v for a clock read of a silent server", took)
	}
}

// TestClockReadAnswersAtFirstReading: with one server silent and another
// answering, a caller that waits for a first clock reading gets the
// answering server's at once, not at the end of the read's second: a hung
// server among Options.Servers must not fail the first long-lived
// decisions on every other server's keys (their callers' deadlines are
// shorter than the read's).
func TestClockReadAnswersAtFirstReading(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn // never answered
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	answering, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer answering.Close()
	go func() {
		for {
			c, err := answering.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte("STAT pid 1\r\nSTAT time 1773501600\r\nEND\r\n"))
			}()
		}
	}()
	var bg inflight.Counter
	defer func() { bg.Close(); bg.Wait() }()
	c := newServerClocks([]string{silent.Addr().String(), answering.Addr().String()})
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), clockTimeout/4)
	defer cancel()
	start := time.Now()
	latest, ok := c.now(ctx, &bg)
	if !ok || latest < 1773501601 || latest > 1773501603 {
		t.Fatalf("now() = %d, %v after %v; want the answering server's clock, 1773501601", latest, ok, time.Since(start))
	}
}
