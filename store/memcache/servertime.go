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

	"github.com/sluicehq/sluice/internal/inflight"
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
	// clockRetry is how long after a read that reached no server a caller
	// that knows no clock goes without one (MaxRelativeExpiration) instead
	// of waiting on another read: an unreachable server must not cost
	// every long-lived decision a timeout.
	clockRetry = 10 * time.Second
)

// serverClocks holds one reading of each server's clock.
type serverClocks struct {
	addrs []string
	// stop ends the reads on their way (close, at the Store's Close).
	stop  context.Context
	close context.CancelFunc

	mu       sync.Mutex
	readings []clockReading // by index in addrs
	reading  bool           // a read is in progress
	ready    chan struct{}  // closed at the read's first reading, or at its end
	failedAt time.Time      // when the last read reached no server
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
	stop, cancel := context.WithCancel(context.Background())
	return &serverClocks{addrs: addrs, readings: make([]clockReading, len(addrs)), stop: stop, close: cancel}
}

// now returns the latest clock among the servers, in Unix seconds rounded
// up, and whether any server's clock is known. The latest is safe for every
// key whatever server it lives on (the ServerSelector is gomemcache's): an
// item on a server whose clock is behind lives that much longer, which
// never admits more. With a reading older than clockRefresh it answers from
// it and reads again in the background; with none yet it waits, within
// ctx, for a read (one at a time, shared by every caller) to bring its
// first reading, unless the last one reached no server less than
// clockRetry ago. It does not wait for the other servers: one that hangs
// would hold every caller for the read's whole second, and a reading that
// comes in later than another is used from then on (a server whose clock
// is ahead by less than absoluteSlack changes nothing). Reads are tracked
// by bg, so that Close waits for them.
func (c *serverClocks) now(ctx context.Context, bg *inflight.Counter) (int64, bool) {
	c.mu.Lock()
	latest, known, stale := c.latest()
	switch {
	case known:
		if stale && !c.reading {
			c.startRead(bg)
		}
		c.mu.Unlock()
		return latest, true
	case !c.reading && !c.failedAt.IsZero() && time.Since(c.failedAt) < clockRetry:
		c.mu.Unlock()
		return 0, false
	case !c.reading && !c.startRead(bg):
		c.mu.Unlock()
		return 0, false // closed: the call fails at its round trip
	}
	ready := c.ready
	c.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	latest, known, _ = c.latest()
	return latest, known
}

// startRead reads every server's clock in the background, unless the
// Store is closing (it reports false then, and sends nothing); c.mu is
// held.
func (c *serverClocks) startRead(bg *inflight.Counter) bool {
	if !bg.Enter() {
		return false
	}
	ready := make(chan struct{})
	c.reading, c.ready = true, ready
	var once sync.Once
	signal := func() { once.Do(func() { close(ready) }) }
	go func() {
		defer bg.Done()
		ctx, cancel := context.WithTimeout(c.stop, clockTimeout)
		ok := c.refresh(ctx, signal)
		cancel()
		c.mu.Lock()
		if !ok {
			c.failedAt = time.Now()
		}
		c.reading = false
		c.mu.Unlock()
		signal()
	}()
	return true
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

// refresh reads every server's clock, all at once, calls first once a
// reading is in, and reports whether any answered; a server that cannot be
// read keeps its last reading.
func (c *serverClocks) refresh(ctx context.Context, first func()) bool {
	var wg sync.WaitGroup
	answered := false
	for i, addr := range c.addrs {
		wg.Go(func() {
			unix, err := readServerTime(ctx, addr)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.readings[i] = clockReading{unix: unix, at: time.Now(), ok: true}
			answered = true
			c.mu.Unlock()
			first()
		})
	}
	wg.Wait()
	return answered
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
	// A read cut short (the Store's Close) ends at once.
	defer context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })()
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
