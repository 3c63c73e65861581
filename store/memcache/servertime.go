package memcache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memcached reads an expiration past MaxRelativeExpiration as a Unix time
// on its own clock, so such an expiration must come from that clock: taken
// from the process's, a process clock a month behind would write every
// long-lived state already expired (a "2 per 30 days" GCRA admitted 10 of
// 10). gomemcache keeps its server list to itself and has no stats call, so
// the Store reads the clock of each server in Options.Servers itself, with
// memcached's text protocol ("stats", whose "time" is the server's Unix
// time), on a connection of its own, and extrapolates each reading by the
// process's monotonic clock, which counts elapsed time whatever the wall
// clock says.
const (
	// clockRefresh is the age after which a server's reading is read again,
	// in the background: memcached's clock follows the server's wall
	// clock, which NTP may step.
	clockRefresh = time.Minute
	// clockTimeout bounds one stats round trip.
	clockTimeout = time.Second
)

// serverClocks holds one reading of each server's clock.
type serverClocks struct {
	addrs []string

	mu         sync.Mutex
	readings   []clockReading // by index in addrs
	refreshing bool
}

// clockReading is a server's Unix time, in seconds, read at the instant at
// (which carries the monotonic clock).
type clockReading struct {
	unix int64
	at   time.Time
	ok   bool
}

func newServerClocks(addrs []string) *serverClocks {
	if len(addrs) == 0 {
		return nil
	}
	return &serverClocks{addrs: addrs, readings: make([]clockReading, len(addrs))}
}

// now returns the latest clock among the servers, in Unix seconds rounded
// up, and whether any server's clock is known. The latest is safe for every
// key whatever server it lives on (the ServerSelector is gomemcache's): an
// item on a server whose clock is behind lives that much longer, which
// never admits more. With no reading yet it reads every server within ctx;
// with a reading older than clockRefresh it answers from it and reads again
// in the background (tracked by bg, so that Close waits for it).
func (c *serverClocks) now(ctx context.Context, bg *background) (int64, bool) {
	c.mu.Lock()
	latest, known, stale := c.latest()
	if !known {
		c.mu.Unlock()
		c.refresh(ctx)
		c.mu.Lock()
		latest, known, _ = c.latest()
		c.mu.Unlock()
		return latest, known
	}
	if stale && !c.refreshing {
		c.refreshing = true
		bg.add()
		go func() {
			defer bg.done()
			ctx, cancel := context.WithTimeout(context.Background(), clockTimeout)
			defer cancel()
			c.refresh(ctx)
			c.mu.Lock()
			c.refreshing = false
			c.mu.Unlock()
		}()
	}
	c.mu.Unlock()
	return latest, true
}

// latest is the latest extrapolated reading; c.mu is held.
func (c *serverClocks) latest() (latest int64, known, stale bool) {
	for _, r := range c.readings {
		if !r.ok {
			stale = true
			continue
		}
		age := time.Since(r.at)
		// Round up: the server's second may have begun just before it was
		// read.
		if t := r.unix + int64(age/time.Second) + 1; !known || t > latest {
			latest = t
		}
		known = true
		stale = stale || age > clockRefresh
	}
	return latest, known, stale
}

// refresh reads every server's clock; a server that cannot be read keeps
// its last reading.
func (c *serverClocks) refresh(ctx context.Context) {
	for i, addr := range c.addrs {
		unix, err := readServerTime(ctx, addr)
		if err != nil {
			continue
		}
		c.mu.Lock()
		c.readings[i] = clockReading{unix: unix, at: time.Now(), ok: true}
		c.mu.Unlock()
	}
}

var errNoTime = errors.New("sluice/memcache: stats carried no time")

// readServerTime asks the memcached at addr for its stats and returns its
// "time", within ctx and clockTimeout.
func readServerTime(ctx context.Context, addr string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, clockTimeout)
	defer cancel()
	network := "tcp"
	if strings.Contains(addr, "/") {
		network = "unix"
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("stats\r\n")); err != nil {
		return 0, err
	}
	return parseStatsTime(bufio.NewReader(conn))
}

// parseStatsTime reads a stats reply up to END and returns its time.
func parseStatsTime(r *bufio.Reader) (int64, error) {
	var unix int64
	found := false
	for range 1000 { // a stats reply has about a hundred lines
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "END":
			if !found {
				return 0, errNoTime
			}
			return unix, nil
		case strings.HasPrefix(line, "STAT time "):
			v, err := strconv.ParseInt(strings.TrimPrefix(line, "STAT time "), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("sluice/memcache: stats time %q: %w", line, err)
			}
			unix, found = v, true
		case strings.HasPrefix(line, "ERROR"), strings.HasPrefix(line, "SERVER_ERROR"), strings.HasPrefix(line, "CLIENT_ERROR"):
			return 0, fmt.Errorf("sluice/memcache: stats: %s", line)
		}
	}
	return 0, errNoTime
}
